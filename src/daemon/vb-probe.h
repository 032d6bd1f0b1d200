/* Probing components (worker thread only): what each source is, its size,
 * whether it is free to use. Block devices are opened read-only. */
#pragma once

#include <glib.h>

#include "backend.h"
#include "vb-state.h"

G_BEGIN_DECLS

typedef struct {
  const VbState *state;
  GHashTable *block_devices; /* device name -> block node of a started device */
  GHashTable *sizes;         /* memo: device name -> guint64* */
  guint depth;
  /* A slot of a redundant device with metadata whose file or disk is gone
   * is started as missing (degraded), unless this is set: vblkd's own
   * start-up leaves that to the policy's start-degraded-after. */
  gboolean no_missing;
  /* The sources come from the components' superblocks (hotplug): another
   * device's entry naming the same path is stale, not a conflict. */
  gboolean by_superblock;
} VbProbe;

void vb_probe_init (VbProbe *probe, const VbState *state, GHashTable *block_devices);
/* A path source that is not there: gone, or a block device without medium
 * (a detached loop device). */
gboolean vb_probe_source_missing (const char *source);
void vb_probe_clear (VbProbe *probe);

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

/* Refuses a component another device of the state already uses (Busy),
 * unless both are windows on disjoint ranges, and a block device that is
 * mounted or held open exclusively (WouldLoseData) — but for the
 * components of @holder (may be NULL), the running device's own
 * configuration, which it holds itself. */
gboolean vb_probe_check_free (VbProbe *probe, const VbDeviceConfig *config,
                              const VbDeviceConfig *holder, GError **error);

/* Refuses to take away @block_device while it is mounted or opened
 * exclusively (Busy, naming the mount point). */
gboolean vb_probe_node_unused (const char *name, const char *block_device, GError **error);

G_END_DECLS
