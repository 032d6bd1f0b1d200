/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Manager.Scan: finding devices from the superblocks on their components.
 * Reading (vb_scan_read, a worker thread) is kept apart from grouping
 * (vb_scan_group, pure), so that the grouping is unit-tested with
 * superblocks built in memory. No D-Bus here beyond the GVariant result. */
#pragma once

#include <glib.h>

#include "assembly.h"
#include "superblock.h"
#include "vb-state.h"

G_BEGIN_DECLS

/* One superblock found, on one path. */
typedef struct {
  char *path;
  VbSuperblock sb;
  /* what starting the device would make of it (the assembly rule, as the
   * engine and md apply it); stale: anything but current */
  VbSlotDecision decision;
  gboolean stale;
  /* the path is the block node of a device this vblkd runs: that device's
   * UUID as the node's tag carries it (md: its first 16 hex digits), and
   * the component is adopted as vblk:NAME of it; NULL otherwise */
  char *node_of;
} VbScanComponent;

/* The superblocks of one device UUID. */
typedef struct {
  char *uuid;
  const VbSuperblock *best; /* the highest event counter (the first of equals) */
  GPtrArray *components;    /* VbScanComponent* (not owned): slots by role, spares, by path */
  GPtrArray *problems;      /* char*: why it cannot be adopted */
  char *known_name;         /* the desired state's name for this UUID, or NULL */
  /* What adoption adds: NULL when known or when there is a problem. */
  VbDeviceConfig *config;
  gboolean adopted; /* set by the caller once the config is in the state */
  const char *note; /* for people, set by the caller (e.g. what adoption left to do) */
} VbScanGroup;

typedef struct {
  GPtrArray *components;    /* VbScanComponent*, in the order read */
  GPtrArray *path_problems; /* char* path, char* message, ... (pairs) */
  GHashTable *seen;         /* identity of every path read (st_rdev or st_dev:st_ino) */
  GPtrArray *groups;        /* VbScanGroup*, by name then UUID (vb_scan_group) */
  char *instance;           /* this vblkd's: block nodes it made are its devices' */
  GHashTable *looked;       /* every path vb_scan_read looked at */
} VbScan;

VbScan *vb_scan_new (void);
void vb_scan_free (VbScan *scan);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbScan, vb_scan_free)

/* Pure: records a superblock read from @path. */
void vb_scan_add (VbScan *scan, const char *path, const VbSuperblock *sb);
/* Pure: the same, read from the block node of device @node_of of this
 * vblkd (a device stacked on it: its component is vblk:NAME). */
void vb_scan_add_node (VbScan *scan, const char *path, const VbSuperblock *sb, const char *node_of);
/* Pure: records that @path could not be read (@message names the path). */
void vb_scan_add_problem (VbScan *scan, const char *path, const char *message);

/* Worker thread: the default paths — /dev/NAME of every block device in
 * /sys/class/block with a nonzero size, then @extra (component paths of
 * the desired state), NULL-terminated. */
char **vb_scan_default_paths (const char *const *extra);

/* Worker thread: reads the superblock of every path (O_RDONLY) through the
 * metadata handlers. A path without a superblock is skipped; a bad one (CRC,
 * format) or an unreadable one is a path problem. With @explicit FALSE a
 * path that does not exist or is not a regular file or block device is
 * skipped too. A path whose file or block device was already read (under
 * another name) is skipped, and so is a block node vblk made that is not
 * a device's node of scan->instance (one vblk uses inside a device, whose
 * file is the component, or another vblkd's); a device's node is recorded
 * as such (vb_scan_add_node). */
void vb_scan_read (VbScan *scan, const char *const *paths, gboolean explicit);

/* Pure: (re)builds scan->groups from the superblocks against @desired: per
 * device UUID the newest superblock, stale marks, problems (a slot with no
 * component, two components claiming one role at the same events, one
 * component at two paths, a name taken, an unknown driver or invalid
 * attributes, a component on the node of a device @desired does not have)
 * and, for a device not in @desired and without problems, the
 * VbDeviceConfig adoption would add (backend auto, autostart, not started;
 * a component on a device's node as vblk:NAME). */
void vb_scan_group (VbScan *scan, const VbState *desired);

/* The "found" result of Manager.Scan, aa{sv} (floating): one entry per
 * group (uuid, name, driver, events, slots, known — in the desired state
 * before the scan —, adopted, device when known or adopted, components,
 * problems, note when set), then one entry per path problem (path,
 * problems) — those have no "uuid". */
GVariant *vb_scan_found_variant (const VbScan *scan);

/* Object paths of the groups that are known or adopted (NULL-terminated). */
char **vb_scan_device_paths (const VbScan *scan);

/* Pure: the block nodes a stack's next level is read from — those of the
 * running devices (@block_devices: device name -> node) the groups are
 * known or adopted as — that the scan has not read yet (NULL-terminated;
 * empty when there is nothing new). */
char **vb_scan_next_nodes (const VbScan *scan, GHashTable *block_devices);

G_END_DECLS
