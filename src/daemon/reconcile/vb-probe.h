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

typedef struct {
  const VbState *state;
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
  /* memo of the claim (vb-claim.c): every path component of the state's
   * devices but one with its identity, looked at once per probe */
  GArray *identities;       /* VbProbeIdentity */
  char *identities_besides; /* the device whose components are not in it */
} VbProbe;

typedef struct {
  const VbDeviceConfig *device;
  const char *source;
  VbIdentity id;
} VbProbeIdentity;

void vb_probe_init (VbProbe *probe, const VbState *state, GHashTable *block_devices);
void vb_probe_clear (VbProbe *probe);
/* The facts of @path with at least @flags looked at (memoized). */
const VbPathFacts *vb_probe_facts (VbProbe *probe, const char *path, VbInspectFlags flags,
                                   GError **error);
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
