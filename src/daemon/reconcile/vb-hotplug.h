/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Hotplug: udev block events (vb-hotplug-events.c) through the policy rules
 * (vb-hotplug.c). */
#pragma once

#include <libudev.h>

#include "vb-reconcile.h"

G_BEGIN_DECLS

void vb_hotplug_init (VbDaemon *daemon);
/* The udev monitor's socket, whose unread events count as undecided. */
void vb_hotplug_watch_fd (int fd);
/* Calls @func (main thread) once every block event that reached vblkd is
 * decided, or after a few seconds: a start waits for the disks the system
 * is still announcing (a component back at another path), as mdadm's
 * assembly waits for udev to settle. */
void vb_hotplug_when_settled (GFunc func, gpointer data);
/* A block event about a node vblk does not run (main thread). */
void vb_hotplug_event (struct udev_device *dev);
/* Every block device there now, as if it had just appeared (after start-up). */
void vb_hotplug_coldplug (struct udev *udev);
gboolean vb_hotplug_is_ours (const char *devnode);
/* The component UUID whose vblk superblock the last event of @devnode
 * showed (a component back at another path), or NULL (main thread). */
const char *vb_hotplug_component_at (const char *devnode);
/* Slot @slot of a started device is faulty in its engine. */
gboolean vb_hotplug_slot_failed (VbDaemon *daemon, const VbDeviceConfig *d, guint slot);
/* A started device lost a component: a spare of its domain may move to it. */
void vb_hotplug_component_failed (const char *device);
/* Main thread: the administrator failed this component (SetFaulty): a
 * going away of its disk seen before no longer counts as a return to
 * re-add at its next event. */
void vb_hotplug_forget_gone (const char *component_uuid);
/* Decisions taken since start (benchmark). */
guint64 vb_hotplug_decisions (void);

G_END_DECLS
