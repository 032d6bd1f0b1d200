/* Assembly of a device that keeps one copy of its data (raid0, linear)
 * from vblk's superblocks, in one place for everything that runs one: the
 * engine, and backend kernel's md and device-mapper parts. There is no
 * other copy to resync from, rebuild from or read instead, so every slot
 * must hold its own, current component — md refuses a raid0 with a member
 * missing the same way. The redundant drivers' rules (a stale leg re-added
 * or rebuilt) are elsewhere (engine-meta.c, backend-kernel-md.c). */
#pragma once

#include <glib.h>

#include "superblock.h"

G_BEGIN_DECLS

typedef struct {
  const char *path;       /* for messages */
  gboolean missing;       /* its file or disk is not there */
  const VbSuperblock *sb; /* its superblock of this device; NULL: none (blank) */
} VbAssemblySlot;

/* @table is the device's newest superblock (its role table and events),
 * NULL for a new device. Refuses, naming the component, with
 * VB_ERROR_FAILED ("...; refusing to start (nothing was written)"):
 *  - a component that is missing (a new device too: it is made whole);
 *  - a blank component of a device that has superblocks — unless @grown
 *    and the table has its slot new
 *    (VB_ROLE_REBUILDING after a reconfiguration's remap: a concatenation
 *    grown by a component is new space, nothing to copy), which then turns
 *    in sync in @table;
 *  - a component that is not the one the table names for its slot;
 *  - a stale one: more than one event behind the table (it missed writes).
 *    One event behind is a superblock update cut short — vblkd stopped
 *    between two components' writes, with no data written in between —
 *    which md accepts too;
 *  - a slot the table does not have in sync.
 * The callers check first what every driver needs: readable superblocks
 * with the device's UUID, no two components in one role, the slot count. */
gboolean vb_assembly_single_copy (const char *device, VbSuperblock *table,
                                  const VbAssemblySlot *slots, guint n, gboolean grown,
                                  GError **error);

G_END_DECLS
