/* What vb-hotplug.c (the decisions) takes from vb-hotplug-spares.c (the
 * disks that join devices, and the slot and spare facts both go by).
 * Main thread. */
#pragma once

#include "vb-reconcile.h"

G_BEGIN_DECLS

/* Lends hotplug's daemon and its table of components seen (component UUID
 * -> path) since start. */
void vb_hotplug_spares_init (VbDaemon *daemon, GHashTable *present);
/* Slot @slot of a started device is faulty in its engine. */
gboolean vb_hotplug_slot_failed (VbDaemon *daemon, const VbDeviceConfig *d, guint slot);
/* A blank disk at @devnode is already in use by some device. */
gboolean vb_hotplug_blank_taken (VbDaemon *daemon, const VbState *state, const char *devnode);
guint vb_hotplug_n_spares (const VbDeviceConfig *d);
/* @devnode becomes a spare of @device, or replaces its failed slot. */
void vb_hotplug_take_blank (VbDaemon *daemon, const char *device, const char *devnode,
                            gboolean replace);

G_END_DECLS
