/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The write-intent bitmap of the redundant drivers: one bit per chunk of the
 * data area, set and made durable before the first write to its chunk, cleared
 * lazily once every component has the write. Thread-safe. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* On disk: one bit per chunk, little-endian bit order (bit k % 8 of byte k / 8
 * is chunk k), in blocks of VB_BITMAP_BLOCK_SIZE bytes; the area is
 * VB_BITMAP_OFFSET .. + bitmap_bytes on every component. */
#define VB_BITMAP_BLOCK_SIZE 4096

/* On-disk bytes for @data_size bytes of data in chunks of @chunk bytes:
 * one bit per chunk, rounded up to whole blocks, at least one block. */
gsize vb_bitmap_bytes_for (guint64 data_size, guint64 chunk);

typedef struct _VbBitmap VbBitmap;

/* Persist block @block (VB_BITMAP_BLOCK_SIZE bytes at @data, aligned to 4096)
 * to every healthy component and flush it. Called with no bitmap lock held by
 * the thread that needs it; may block. Never called twice at once for the same
 * block. Returns 0 or -errno. */
typedef int (*VbBitmapPersistFunc) (guint block, const guint8 *data, gpointer user_data);

/* Called before bits are cleared (by a sweep or after a resync), with no
 * bitmap lock held; may block. It makes the clearing known first — the
 * engine records events_cleared in the superblocks, so that a copy of a
 * component taken before the bits went is never resynced from them.
 * Returns 0, or -errno: then nothing is cleared (the bits stay set). */
typedef int (*VbBitmapClearFunc) (gpointer user_data);

/* @initial: the bitmap area as read from disk (NULL: all clear); it may be
 * shorter or longer than needed, bits past the last chunk are ignored. The
 * loaded bits are taken as durable. */
VbBitmap *vb_bitmap_new (guint64 data_size, guint64 chunk, const guint8 *initial, gsize initial_len,
                         VbBitmapPersistFunc persist, gpointer user_data);
/* No call may be running on @bm. */
void vb_bitmap_free (VbBitmap *bm);
/* Before any bit is cleared, @func (NULL: none); set before the bitmap is
 * shared. */
void vb_bitmap_set_clear_func (VbBitmap *bm, VbBitmapClearFunc func, gpointer user_data);

/* Before a write: sets the bits of every chunk the range touches; a bit newly
 * set is persisted (persist() returned 0) before this returns; in-flight count
 * per chunk +1. Returns 0 or the persist error (then nothing is counted in
 * flight; the bit stays set in memory). A range of length 0 is ignored. */
int vb_bitmap_start_write (VbBitmap *bm, guint64 offset, guint64 length);
/* vb_bitmap_start_write without waiting: 0 when every bit the range needs
 * is set and durable already (counted in flight), -EAGAIN when one must be
 * persisted first (nothing changed: call vb_bitmap_start_write where a
 * thread may block). */
int vb_bitmap_try_start_write (VbBitmap *bm, guint64 offset, guint64 length);
/* After the write completed on every component it went to (same range). */
void vb_bitmap_end_write (VbBitmap *bm, guint64 offset, guint64 length);

/* Lazy clearing, called from a timer: a set bit with no write in flight that
 * saw no new write since the previous call is cleared (if @may_clear; the
 * engine passes FALSE while a component is faulty, missing or rebuilding so
 * bits keep what it missed); changed blocks are persisted. Returns how many
 * bits were cleared. */
guint vb_bitmap_sweep (VbBitmap *bm, gboolean may_clear);

guint64 vb_bitmap_chunk_size (VbBitmap *bm);
guint64 vb_bitmap_n_chunks (VbBitmap *bm);
guint64 vb_bitmap_count_dirty (VbBitmap *bm);
gboolean vb_bitmap_test (VbBitmap *bm, guint64 chunk);
/* The first set bit at or after @from_chunk; G_MAXUINT64: none. */
guint64 vb_bitmap_next_dirty (VbBitmap *bm, guint64 from_chunk);
/* Full resync needed: sets every bit and persists (errors are logged). */
void vb_bitmap_mark_all (VbBitmap *bm);
/* After a resync of @chunk: clears its bit and persists; 0 or -errno. A chunk
 * with a write in flight keeps its bit (a later sweep clears it). */
int vb_bitmap_clear_chunk (VbBitmap *bm, guint64 chunk);
/* The same for @n chunks at once: the clear function runs once for all. */
int vb_bitmap_clear_chunks (VbBitmap *bm, const guint64 *chunks, guint n);
/* Copy of the current bits (for writing to a new component); bytes past the
 * bitmap are zero. */
void vb_bitmap_snapshot (VbBitmap *bm, guint8 *out, gsize len);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbBitmap, vb_bitmap_free)

G_END_DECLS
