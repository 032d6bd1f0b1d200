/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What engine-meta.c and engine-assemble.c share: the metadata's state and
 * the writes assembly makes. Not for the layers above (engine-meta.h). */
#pragma once

#include "engine-component.h"

#include "bitmap.h"
#include "metadata.h"
#include "superblock.h"

struct _VbEngineMeta {
  GMutex lock; /* the superblock and the recording of failures */
  GCond recorded;
  VbSuperblock sb; /* the device's current superblock (role and component filled per write) */
  VbBitmap *bitmap;
  const VbMetadataHandler *handler; /* the metadata attribute's */
  guint8 *io;                       /* aligned block_size buffer, under @lock */
  GMutex bitmap_io_lock;
  guint8 *bitmap_io; /* aligned 4096 buffer, under @bitmap_io_lock */
  /* sync job wanted at activation */
  gboolean need_sync;
  /* spares, by index; a spare that takes a slot leaves the list */
  GPtrArray *spare_paths;
  GPtrArray *spare_uuids;
  GArray *old_fds; /* fds of replaced components, closed at the end */
  gboolean closed;
  gboolean sync_incomplete; /* a job stopped before its end */
  /* atomic: without a bitmap, the superblocks say clean while the device
   * runs (vb_engine_settle); the next write has them say otherwise first */
  gint settled;
};

/* e->meta, allocated with @id's spares; closed until assembly succeeds. */
VbEngineMeta *engine_meta_new (VbEngine *e, const VbEngineIdentity *id,
                               const VbMetadataHandler *handler);
/* Writes the current superblock to every healthy slot (events + 1); a
 * component the write fails on turns faulty. Called with the lock held. */
void engine_meta_write_all_locked (VbEngine *e);
/* Every spare's superblock (role spare). Called with the lock held. */
void engine_meta_write_spares_locked (VbEngine *e);
/* The bitmap's persist and clear functions (bitmap.h). */
int engine_meta_persist_bitmap_block (guint block, const guint8 *data, gpointer user_data);
int engine_meta_record_clear (gpointer data);
