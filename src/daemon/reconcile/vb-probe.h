/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Probing components (worker thread only): what each source is and its
 * size, from vb-inspect.c's facts (looked at once per path per probe,
 * bounded in time); block devices are opened read-only. */
#pragma once

#include <glib.h>

#include "backend.h"
#include "vb-inspect.h"
#include "vb-state.h"

G_BEGIN_DECLS

/* The identities of component paths ("b:MAJ:MIN", "f:DEV:INO") as last
 * looked at, kept between ops (one per daemon, any worker thread): the
 * claim's check that a new component is not another device's under
 * another name reads the other devices' components here, rather than
 * looking at each of thousands again at every change. Every successful
 * look of a probe that has them records its path; a failed one forgets
 * it; a whole-daemon op (start-up, udev's events, the policy, a scan)
 * looks at every component again. */
typedef struct _VbKeptLooks VbKeptLooks;

VbKeptLooks *vb_kept_looks_new (void);
void vb_kept_looks_free (VbKeptLooks *kept);
/* Forget every path (before a whole-daemon op looks at them all). */
void vb_kept_looks_clear (VbKeptLooks *kept);

typedef struct {
  const VbState *state;
  VbKeptLooks *kept;         /* or NULL: nothing kept, nothing read from there */
  GHashTable *block_devices; /* device name -> block node of a started device */
  GHashTable *sizes;         /* memo: device name -> guint64* */
  GHashTable *facts;         /* memo: path -> VbPathFacts* */
  const char *instance;      /* this vblkd's, to know its own block nodes (claim) */
  guint depth;
  /* A slot of a redundant device with metadata whose file or disk is gone
   * is started as missing (degraded), unless this is set: vblkd's own
   * start-up leaves that to the policy's start-degraded-after. */
  gboolean no_missing;
  /* The sources come from the components' superblocks (hotplug): another
   * device's entry naming the same path is stale, not a conflict. */
  gboolean by_superblock;
  /* with by_superblock: the paths found so (the others are not claimed) */
  GHashTable *found;
} VbProbe;

void vb_probe_init (VbProbe *probe, const VbState *state, GHashTable *block_devices);
void vb_probe_clear (VbProbe *probe);
/* The facts of @path with at least @flags looked at (memoized). */
const VbPathFacts *vb_probe_facts (VbProbe *probe, const char *path, VbInspectFlags flags,
                                   GError **error);
/* The identity of @path: as looked at by this probe, else as kept
 * (probe->kept), else looked at now; "p:PATH" when it is not there to
 * look at. */
char *vb_probe_kept_identity (VbProbe *probe, const char *path);
/* A path source that is not there: gone, or a block device without medium
 * (a detached loop device). */
gboolean vb_probe_source_missing (VbProbe *probe, const char *source);

/* Every component of @config: its resolved path (NULL for an unstarted
 * vblk:NAME) and facts. */
gboolean vb_probe_components (VbProbe *probe, const VbDeviceConfig *config, GPtrArray **paths,
                              GArray **infos, GError **error);
/* A new device must not take components that carry another device's
 * superblock (VB_ERROR_BUSY naming the component and that device). */
gboolean vb_probe_check_foreign (VbProbe *probe, const VbDeviceConfig *config, GError **error);
/* The spares of @config that are there now: their paths and UUIDs. */
gboolean vb_probe_spares (VbProbe *probe, const VbDeviceConfig *config, GPtrArray **paths,
                          GPtrArray **uuids, GError **error);

/* Driver checks of @config against its probed components; with
 * @need_complete FALSE a device may still lack components (configuring).
 * Sets *@size and *@complete. */
gboolean vb_probe_validate (VbProbe *probe, const VbDeviceConfig *config, gboolean need_complete,
                            guint64 *size, gboolean *complete, GError **error);

G_END_DECLS
