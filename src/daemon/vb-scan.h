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
} VbScanGroup;

typedef struct {
  GPtrArray *components;    /* VbScanComponent*, in the order read */
  GPtrArray *path_problems; /* char* path, char* message, ... (pairs) */
  GHashTable *seen;         /* identity of every path read (st_rdev or st_dev:st_ino) */
  GPtrArray *groups;        /* VbScanGroup*, by name then UUID (vb_scan_group) */
} VbScan;

VbScan *vb_scan_new (void);
void vb_scan_free (VbScan *scan);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbScan, vb_scan_free)

/* Pure: records a superblock read from @path. */
void vb_scan_add (VbScan *scan, const char *path, const VbSuperblock *sb);
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
 * another name) is skipped. */
void vb_scan_read (VbScan *scan, const char *const *paths, gboolean explicit);

/* Pure: (re)builds scan->groups from the superblocks against @desired: per
 * device UUID the newest superblock, stale marks, problems (a slot with no
 * component, two components claiming one role at the same events, one
 * component at two paths, a name taken, an unknown driver or invalid
 * attributes) and, for a device not in @desired and without problems, the
 * VbDeviceConfig adoption would add (backend auto, autostart, not started). */
void vb_scan_group (VbScan *scan, const VbState *desired);

/* The "found" result of Manager.Scan, aa{sv} (floating): one entry per
 * group (uuid, name, driver, events, slots, known, adopted, device when
 * known or adopted, components, problems), then one entry per path problem
 * (path, problems) — those have no "uuid". */
GVariant *vb_scan_found_variant (const VbScan *scan);

/* Object paths of the groups that are known or adopted (NULL-terminated). */
char **vb_scan_device_paths (const VbScan *scan);

G_END_DECLS
