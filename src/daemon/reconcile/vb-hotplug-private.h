/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What hotplug's three files take from each other: vb-hotplug-events.c
 * (udev events, the probed facts of a device node), vb-hotplug.c (the
 * decisions) and vb-hotplug-spares.c (the disks that join devices, and the
 * slot and spare facts both go by). Main thread, but for the probing. */
#pragma once

#include "metadata.h"
#include "vb-reconcile.h"

G_BEGIN_DECLS

/* A device node's latest event; the worker fills in what it found. */
typedef struct {
  char *devnode;
  char *action; /* add, change, remove */
  GHashTable *properties;
  dev_t devnum;
  /* filled by the worker */
  gboolean gone;
  gboolean skip;   /* could not be probed: no decision */
  char *vblk_node; /* a node vblk made, or built on one: never a disk to take */
  guint64 size;
  const char *metadata; /* vblk, none, unknown */
  gboolean has_sb;
  VbSuperblock sb;
} VbHotplugItem;

/* What the events hand on (vb-hotplug.c's, given at init: the events do
 * not know who decides). */
typedef struct {
  /* a probed batch of items, each the latest event of its node */
  void (*decide) (GPtrArray *items);
  /* @item's node went away (a loop device found detached by the poll) */
  void (*gone) (VbHotplugItem *item);
} VbHotplugDecider;

/* vb-hotplug-events.c */
void vb_hotplug_events_init (VbDaemon *daemon, const VbHotplugDecider *decider);
void vb_hotplug_events_watch_fd (int fd);
/* Events wait to be read, probed, or are being probed (one may be a
 * missing component, late on a busy host). */
gboolean vb_hotplug_events_undecided (void);

/* vb-hotplug-spares.c */

/* Lends hotplug's daemon and its table of components seen (component UUID
 * -> path) since start. */
void vb_hotplug_spares_init (VbDaemon *daemon, GHashTable *present);
/* A blank disk at @devnode is already in use by some device. */
gboolean vb_hotplug_blank_taken (VbDaemon *daemon, const VbState *state, const char *devnode);
guint vb_hotplug_n_spares (const VbDeviceConfig *d);
/* @devnode becomes a spare of @device, or replaces its failed slot. */
void vb_hotplug_take_blank (VbDaemon *daemon, const char *device, const char *devnode,
                            gboolean replace);

G_END_DECLS
