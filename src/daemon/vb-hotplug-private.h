/* Shared inside hotplug (vb-hotplug.c, vb-hotplug-spares.c); main thread. */
#pragma once

#include "vb-daemon.h"

G_BEGIN_DECLS

VbDaemon *vb_hotplug_daemon (void);
/* Slot @slot of a started device is faulty in its engine. */
gboolean vb_hotplug_slot_failed (VbDaemon *daemon, const VbDeviceConfig *d, guint slot);
/* A blank disk at @devnode is already in use by some device. */
gboolean vb_hotplug_blank_taken (VbDaemon *daemon, const VbState *state, const char *devnode);
guint vb_hotplug_n_spares (const VbDeviceConfig *d);
/* The component was seen (its superblock) since vblkd started. */
gboolean vb_hotplug_seen (const char *component_uuid);
/* @devnode becomes a spare of @device, or replaces its failed slot. */
void vb_hotplug_take_blank (VbDaemon *daemon, const char *device, const char *devnode,
                            gboolean replace);

G_END_DECLS
