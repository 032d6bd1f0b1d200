/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one rule that says what the component in a slot of a device with
 * vblk superblocks is when the device is assembled (start, a
 * reconfiguration) or when a component is re-added: in sync, behind only by
 * what the write-intent bitmap records, to be rebuilt in full, or faulty
 * until an explicit re-add. It is DESIGN.md's first invariant of the data:
 * a leg not known to be in sync is never read. The engine's assembly and
 * re-add, the md part of backend kernel and Scan all ask it; pure logic,
 * no I/O. */
#pragma once

#include <glib.h>

#include "superblock.h"

G_BEGIN_DECLS

typedef enum {
  VB_SLOT_CURRENT, /* in sync: its events are the device's and the table says in-sync */
  VB_SLOT_RESYNC,  /* behind only by what the bitmap still records: its dirty chunks are copied */
  VB_SLOT_RESUME,  /* its full rebuild was stopped: it goes on at the device's rebuild_offset */
  VB_SLOT_REBUILD, /* every byte is copied to it before it is read */
  VB_SLOT_FAULTY,  /* failed: not read, not written, until an explicit re-add */
  VB_SLOT_MISSING, /* not there */
  /* another disk (a blank one) is at the path of the component the
   * device's table names: not read, not written; the table records its
   * component as gone (missing) */
  VB_SLOT_STRANGER,
} VbSlotDecision;

typedef struct {
  /* the newest superblock of the device, its role table as the device has
   * it now (a reconfiguration has remapped it to the new slots) */
  const VbSuperblock *device;
  guint slot;
  gboolean present; /* the component is there (its file or disk opened) */
  /* its own superblock when it holds one of this device (role as remapped
   * by a reconfiguration, -1: another slot's); NULL: blank */
  const VbSuperblock *own;
  /* the component UUID of a component that is in sync now (the holder of
   * the newest superblock at assembly): a returning component whose own
   * table says that one was not in sync ran without it (split brain) */
  const char *newest;
  /* the runner copies only the bitmap's dirty chunks (the engine); FALSE:
   * it keeps no vblk bitmap while it runs (md), behind means rebuilt */
  gboolean use_bitmap;
  /* a stopped full rebuild may go on where it was recorded (the data of
   * the device starts at the same offset of every component: raid1) */
  gboolean can_resume;
  /* an administrator's re-add (vbmgr add of the slot's own component, a
   * policy's re-add): a faulty slot may come back */
  gboolean readd;
  /* the component the device's table names for the slot is one of the
   * device's spares: a spare took the slot (its failure's takeover), and
   * the desired state had not recorded it yet when vblkd stopped */
  gboolean taken_by_spare;
  /* the desired state's component for the slot is the one the device's
   * table names (not one the administrator put there since, nor a
   * reconfiguration's new slot): a blank disk at its path is another disk */
  gboolean named;
} VbSlotFacts;

/* What slot @facts->slot is, and why in a few words for the log (*@why,
 * may be NULL; "" for a current slot). */
VbSlotDecision vb_assembly_decide (const VbSlotFacts *facts, char **why);

/* "current", "resync", "resume", "rebuild", "faulty", "missing", "stranger" */
const char *vb_slot_decision_to_string (VbSlotDecision d);

/* The superblock's events_cleared as the rule reads it: a superblock
 * written before it was recorded trusts no older copy (its own events). */
guint64 vb_assembly_events_cleared (const VbSuperblock *sb);

/* Before bitmap bits are cleared: events_cleared becomes the events of the
 * superblock write that the caller does next (so that every copy taken
 * before it has fewer events). */
void vb_assembly_record_clear (VbSuperblock *sb);

/* The single-copy drivers (assembly-single.c). */
/* Assembly of a device that keeps one copy of its data (raid0, linear)
 * from vblk's superblocks, in one place for everything that runs one: the
 * engine, and backend kernel's md and device-mapper parts. There is no
 * other copy to resync from, rebuild from or read instead, so every slot
 * must hold its own, current component — md refuses a raid0 with a member
 * missing the same way. The redundant drivers' rules (a stale leg re-added
 * or rebuilt) are elsewhere (engine-assemble.c, backend-kernel-md.c). */

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
