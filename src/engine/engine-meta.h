/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine's metadata layer (engine-meta.c, engine-assemble.c): what
 * the superblocks, the spares' list and the bitmap say, for the layers
 * above. Calls only the component layer. */
#pragma once

#include "engine-component.h"

#include "assembly.h"
#include "bitmap.h"
#include "metadata.h"
#include "superblock.h"

/* engine-assemble.c */
gboolean engine_meta_assemble (VbEngine *e, const VbEngineIdentity *identity,
                               GHashTable *attributes, GError **error);
/* The assembly rule (assembly.h) for a component re-added into faulty slot
 * @slot, from its own superblock (@own; NULL: blank). */
VbSlotDecision engine_meta_decide_readd (VbEngine *e, guint slot, const VbSuperblock *own,
                                         char **why);

/* engine-meta.c */
void engine_meta_free (VbEngine *e);
/* The next close writes nothing (vb_engine_free_unclean). */
void engine_meta_forget (VbEngine *e);
/* A clean stop: superblocks say clean. No job and no sweeper may run. */
void engine_meta_close (VbEngine *e);
/* @i just turned faulty: the survivors' superblocks say so before this
 * returns (or they turn faulty too). */
void engine_meta_record_failure (VbEngine *e, guint i);
/* Faulty @i, component @uuid, went away (its disk was unplugged): once its
 * failure is recorded, the table says missing, so that it is re-added when
 * it comes back, also by a later vblkd — unless the slot holds another
 * component by then. A failure the administrator asked for stays faulty
 * only while its component is there to be failed. */
void engine_meta_record_gone (VbEngine *e, guint i, const char *uuid);
/* Slot @i's state in the table. */
VbRoleState engine_meta_role_state (VbEngine *e, guint i);
/* Blocks while @i is faulty but its failure not yet recorded. */
void engine_meta_wait_recorded (VbEngine *e, guint i);
/* A faulty slot holds another component now (a spare, a re-add): whoever
 * waits for its failure to be recorded waits no more. */
void engine_meta_slot_refilled (VbEngine *e);
/* Writes every healthy component's superblock after a state change. */
void engine_meta_update (VbEngine *e);
int engine_meta_write_begin (VbEngine *e, guint64 offset, guint64 length);
/* engine_meta_write_begin when it need not write (the bits are durable,
 * the superblocks say "not clean"): 0, else -EAGAIN and nothing done. */
int engine_meta_try_write_begin (VbEngine *e, guint64 offset, guint64 length);
/* No bitmap: the superblocks say clean until the next write (which has
 * them say otherwise first); the caller holds the barrier, every leg in
 * sync and flushed. */
void engine_meta_mark_clean (VbEngine *e);
void engine_meta_write_end (VbEngine *e, guint64 offset, guint64 length);
/* What the data path needs quickly. */
gboolean engine_meta_active (VbEngine *e);
const char *engine_meta_device_uuid (VbEngine *e);
const VbMetadataHandler *engine_meta_handler (VbEngine *e);
/* For the jobs */
VbBitmap *engine_meta_bitmap (VbEngine *e);
void engine_meta_role_in_sync (VbEngine *e, guint i);
guint64 engine_meta_sync_speed (VbEngine *e, gboolean max);
void engine_meta_sync_incomplete (VbEngine *e, gboolean incomplete);
void engine_meta_set_attributes (VbEngine *e, GHashTable *attributes);
void engine_meta_set_speeds (VbEngine *e, guint64 min, guint64 max);
/* A full rebuild has copied everything below @offset (durably): the
 * superblocks say so, so that a stopped rebuild resumes there (0: done). */
void engine_meta_rebuild_progress (VbEngine *e, guint64 offset);
/* Whether a job must run: a slot behind, or dirty bits. */
gboolean engine_meta_needs_sync (VbEngine *e);
/* Whether assembly found that a job must run at activation. */
gboolean engine_meta_need_sync_at_start (VbEngine *e);
/* The spares: replaced (their superblocks written), asked, taken. */
void engine_meta_set_spares (VbEngine *e, guint n, const char *const *paths,
                             const char *const *uuids);
gboolean engine_meta_has_spare (VbEngine *e);
/* The next spare, removed from the list (FALSE: none). */
gboolean engine_meta_pop_spare (VbEngine *e, char **path, char **uuid);
void engine_meta_keep_fd (VbEngine *e, int fd);
/* Slot @i holds component @uuid in @state now; written to every healthy slot. */
void engine_meta_set_role (VbEngine *e, guint i, const char *uuid, VbRoleState state);
