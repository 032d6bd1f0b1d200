/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Write-intent bitmap (see bitmap.h). On disk it is one bit per chunk of the
 * data area, chunk k at bit k % 8 of byte k / 8, in 4 KiB blocks at
 * VB_BITMAP_OFFSET of every component; the persist callback writes a block.
 *
 * The ordering rule: a chunk's bit is set and flushed before the first write to
 * the chunk may start, so after a crash every chunk that may differs between
 * components reads set. It is cleared lazily, by the sweep, only once every
 * component has every write to the chunk (none in flight) and the chunk stayed
 * idle for a whole sweep period; a clear that reaches the disk late or not at
 * all costs only a needless resync of the chunk. Before any bit is cleared
 * the clear function runs (events_cleared in the superblocks): a copy of a
 * component older than that is rebuilt in full, never resynced from bits
 * that no longer say what it missed.
 *
 * In memory, besides the bits, a "pending" bit per chunk says the bit is set but
 * not known to be durable yet; writers whose bits are set and not pending take
 * the fast path (one lock, no I/O). Persisting a block copies it under the lock
 * and calls the callback without the lock; one persist per block runs at a
 * time (blocks[].busy), others wait on a GCond, and a writer that finds its
 * block busy usually finds its bit durable once that persist is done. */
#include "config.h"

#include "bitmap.h"
#include "vb-report.h"

#include <errno.h>
#include <string.h>

#define BITS_PER_BLOCK ((guint64) VB_BITMAP_BLOCK_SIZE * 8)

typedef struct {
  guint64 gen;     /* bumped by every change of the block in memory */
  guint64 durable; /* gen of the last snapshot persisted successfully */
  gboolean busy;   /* a persist of the block runs (without the lock) */
} VbBitmapBlock;

struct _VbBitmap {
  GMutex lock;
  GCond persisted; /* a persist finished (any block) */
  guint64 data_size;
  guint64 chunk;
  guint64 n_chunks;
  gsize n_bytes; /* whole blocks */
  guint n_blocks;
  guint8 *bits;       /* the bitmap as it should be on disk */
  guint8 *pending;    /* set in bits, not known durable yet */
  guint8 *written;    /* a write started or ended since the previous sweep */
  guint8 *captured;   /* per busy block: the pending bits its snapshot holds */
  guint8 *shadow;     /* per busy block: the snapshot being persisted, aligned */
  guint32 *in_flight; /* writes between start_write and end_write, per chunk */
  VbBitmapBlock *blocks;
  VbBitmapPersistFunc persist;
  gpointer user_data;
  VbBitmapClearFunc clear_func;
  gpointer clear_data;
};

static inline gboolean
bit_get (const guint8 *map, guint64 k)
{
  return (map[k >> 3] >> (k & 7)) & 1;
}

static inline void
bit_set (guint8 *map, guint64 k)
{
  map[k >> 3] |= (guint8) (1u << (k & 7));
}

static inline void
bit_clear (guint8 *map, guint64 k)
{
  map[k >> 3] &= (guint8) ~(1u << (k & 7));
}

gsize
vb_bitmap_bytes_for (guint64 data_size, guint64 chunk)
{
  guint64 n_chunks, bytes;

  g_return_val_if_fail (chunk > 0, 0);

  n_chunks = data_size / chunk + (data_size % chunk != 0);
  bytes = n_chunks / 8 + (n_chunks % 8 != 0);
  bytes = MAX (bytes, 1);
  return (gsize) ((bytes + VB_BITMAP_BLOCK_SIZE - 1) / VB_BITMAP_BLOCK_SIZE * VB_BITMAP_BLOCK_SIZE);
}

VbBitmap *
vb_bitmap_new (guint64 data_size, guint64 chunk, const guint8 *initial, gsize initial_len,
               VbBitmapPersistFunc persist, gpointer user_data)
{
  VbBitmap *bm;

  g_return_val_if_fail (chunk > 0, NULL);
  g_return_val_if_fail (persist != NULL, NULL);
  g_return_val_if_fail (initial != NULL || initial_len == 0, NULL);

  bm = g_new0 (VbBitmap, 1);
  g_mutex_init (&bm->lock);
  g_cond_init (&bm->persisted);
  bm->data_size = data_size;
  bm->chunk = chunk;
  bm->n_chunks = data_size / chunk + (data_size % chunk != 0);
  bm->n_bytes = vb_bitmap_bytes_for (data_size, chunk);
  bm->n_blocks = (guint) (bm->n_bytes / VB_BITMAP_BLOCK_SIZE);
  bm->bits = g_malloc0 (bm->n_bytes);
  bm->pending = g_malloc0 (bm->n_bytes);
  bm->written = g_malloc0 (bm->n_bytes);
  bm->captured = g_malloc0 (bm->n_bytes);
  bm->shadow = g_aligned_alloc0 (bm->n_blocks, VB_BITMAP_BLOCK_SIZE, VB_BITMAP_BLOCK_SIZE);
  bm->in_flight = g_new0 (guint32, MAX (bm->n_chunks, 1));
  bm->blocks = g_new0 (VbBitmapBlock, bm->n_blocks);
  bm->persist = persist;
  bm->user_data = user_data;

  if (initial_len > 0)
    {
      gsize whole = bm->n_chunks / 8;

      /* Only the bits of existing chunks; the rest stays zero so snapshots
       * never carry garbage from past the end of the data. */
      memcpy (bm->bits, initial, MIN (initial_len, whole));
      for (guint64 k = (guint64) whole * 8; k < bm->n_chunks && k / 8 < initial_len; k++)
        if (bit_get (initial, k))
          bit_set (bm->bits, k);
    }
  return bm;
}

void
vb_bitmap_free (VbBitmap *bm)
{
  if (bm == NULL)
    return;
  g_mutex_clear (&bm->lock);
  g_cond_clear (&bm->persisted);
  g_free (bm->bits);
  g_free (bm->pending);
  g_free (bm->written);
  g_free (bm->captured);
  g_aligned_free (bm->shadow);
  g_free (bm->in_flight);
  g_free (bm->blocks);
  g_free (bm);
}

void
vb_bitmap_set_clear_func (VbBitmap *bm, VbBitmapClearFunc func, gpointer user_data)
{
  g_return_if_fail (bm != NULL);
  bm->clear_func = func;
  bm->clear_data = user_data;
}

/* Lock held: the clear function before bits go; returns with the lock held.
 * The lock is dropped around it, so the caller decides which bits go only
 * afterwards (a write that came meanwhile keeps its chunk's bit). */
static int
before_clear (VbBitmap *bm)
{
  int r;

  if (bm->clear_func == NULL)
    return 0;
  g_mutex_unlock (&bm->lock);
  r = bm->clear_func (bm->clear_data);
  g_mutex_lock (&bm->lock);
  return r < 0 ? r : 0;
}

/* Lock held: a set bit that the sweep would clear now. */
static gboolean
any_idle (VbBitmap *bm)
{
  for (gsize i = 0; i < bm->n_bytes; i++)
    {
      guint8 idle = bm->bits[i] & (guint8) ~bm->written[i];

      for (; idle != 0; idle &= (guint8) (idle - 1))
        if (bm->in_flight[(guint64) i * 8 + (guint) __builtin_ctz (idle)] == 0)
          return TRUE;
    }
  return FALSE;
}

/* The chunks [*first, *last] a byte range touches; FALSE for an empty range. */
static gboolean
chunk_range (VbBitmap *bm, guint64 offset, guint64 length, guint64 *first, guint64 *last)
{
  if (length == 0)
    return FALSE;
  *first = offset / bm->chunk;
  *last = (offset + length - 1) / bm->chunk;
  return TRUE;
}

static gboolean
range_valid (VbBitmap *bm, guint64 offset, guint64 length)
{
  return length <= bm->data_size && offset <= bm->data_size - length;
}

/* Called with the lock held and block @b not busy; returns with the lock held.
 * Persists the block as it is now; on success, the pending bits the snapshot
 * held (and that were not cleared meanwhile) are durable. */
static int
persist_block (VbBitmap *bm, guint b)
{
  VbBitmapBlock *blk = &bm->blocks[b];
  gsize off = (gsize) b * VB_BITMAP_BLOCK_SIZE;
  guint64 gen = blk->gen;
  int r;

  g_assert (!blk->busy);
  memcpy (bm->shadow + off, bm->bits + off, VB_BITMAP_BLOCK_SIZE);
  memcpy (bm->captured + off, bm->pending + off, VB_BITMAP_BLOCK_SIZE);
  blk->busy = TRUE;
  g_mutex_unlock (&bm->lock);

  r = bm->persist (b, bm->shadow + off, bm->user_data);

  g_mutex_lock (&bm->lock);
  blk->busy = FALSE;
  if (r == 0)
    {
      for (gsize i = off; i < off + VB_BITMAP_BLOCK_SIZE; i++)
        bm->pending[i] &= (guint8) ~bm->captured[i];
      /* Persists of a block never overlap, so this only grows. */
      blk->durable = gen;
    }
  else if (r > 0)
    r = -EIO;
  g_cond_broadcast (&bm->persisted);
  return r;
}

/* Lock held: until the disk has block @b as of generation @target (or later). */
static int
persist_until (VbBitmap *bm, guint b, guint64 target)
{
  VbBitmapBlock *blk = &bm->blocks[b];

  while (blk->durable < target)
    {
      int r;

      if (blk->busy)
        {
          g_cond_wait (&bm->persisted, &bm->lock);
          continue;
        }
      r = persist_block (bm, b);
      if (r < 0)
        return r;
    }
  return 0;
}

static gboolean
range_has_pending (VbBitmap *bm, guint64 first, guint64 last)
{
  for (guint64 k = first; k <= last; k++)
    if (bit_get (bm->pending, k))
      return TRUE;
  return FALSE;
}

/* Lock held: until no bit of chunks [first, last] is pending. A persist that
 * another thread runs on the block counts when its snapshot had our bits. */
static int
wait_durable (VbBitmap *bm, guint64 first, guint64 last)
{
  for (guint64 b = first / BITS_PER_BLOCK; b <= last / BITS_PER_BLOCK; b++)
    {
      guint64 lo = MAX (first, b * BITS_PER_BLOCK);
      guint64 hi = MIN (last, (b + 1) * BITS_PER_BLOCK - 1);

      while (range_has_pending (bm, lo, hi))
        {
          int r;

          if (bm->blocks[b].busy)
            {
              g_cond_wait (&bm->persisted, &bm->lock);
              continue;
            }
          r = persist_block (bm, (guint) b);
          if (r < 0)
            return r;
        }
    }
  return 0;
}

int
vb_bitmap_start_write (VbBitmap *bm, guint64 offset, guint64 length)
{
  guint64 first, last;
  gboolean durable = TRUE;
  int r = 0;

  g_return_val_if_fail (bm != NULL, -EINVAL);
  g_return_val_if_fail (range_valid (bm, offset, length), -EINVAL);

  if (!chunk_range (bm, offset, length, &first, &last))
    return 0;

  g_mutex_lock (&bm->lock);
  /* Counted in flight before the lock can be dropped, so that a sweep never
   * clears a bit we are waiting for. */
  for (guint64 k = first; k <= last; k++)
    {
      bm->in_flight[k]++;
      bit_set (bm->written, k);
      if (!bit_get (bm->bits, k))
        {
          bit_set (bm->bits, k);
          bit_set (bm->pending, k);
          bm->blocks[k / BITS_PER_BLOCK].gen++;
          durable = FALSE;
        }
      else if (bit_get (bm->pending, k))
        durable = FALSE;
    }
  if (!durable)
    r = wait_durable (bm, first, last);
  if (r < 0)
    {
      /* The bits stay set (and pending): harmless, the next writer of these
       * chunks persists them again. */
      for (guint64 k = first; k <= last; k++)
        bm->in_flight[k]--;
    }
  g_mutex_unlock (&bm->lock);
  return r;
}

int
vb_bitmap_try_start_write (VbBitmap *bm, guint64 offset, guint64 length)
{
  guint64 first, last;

  g_return_val_if_fail (bm != NULL, -EINVAL);
  g_return_val_if_fail (range_valid (bm, offset, length), -EINVAL);

  if (!chunk_range (bm, offset, length, &first, &last))
    return 0;
  g_mutex_lock (&bm->lock);
  for (guint64 k = first; k <= last; k++)
    if (!bit_get (bm->bits, k) || bit_get (bm->pending, k))
      {
        g_mutex_unlock (&bm->lock);
        return -EAGAIN;
      }
  for (guint64 k = first; k <= last; k++)
    {
      bm->in_flight[k]++;
      bit_set (bm->written, k);
    }
  g_mutex_unlock (&bm->lock);
  return 0;
}

void
vb_bitmap_end_write (VbBitmap *bm, guint64 offset, guint64 length)
{
  guint64 first, last;

  g_return_if_fail (bm != NULL);
  g_return_if_fail (range_valid (bm, offset, length));

  if (!chunk_range (bm, offset, length, &first, &last))
    return;

  g_mutex_lock (&bm->lock);
  for (guint64 k = first; k <= last; k++)
    {
      if (G_UNLIKELY (bm->in_flight[k] == 0))
        {
          g_critical ("vb_bitmap_end_write: chunk %" G_GUINT64_FORMAT " has no write in flight", k);
          continue;
        }
      bm->in_flight[k]--;
      /* Keeps the bit for one more sweep period after the write ended. */
      bit_set (bm->written, k);
    }
  g_mutex_unlock (&bm->lock);
}

/* Lock held: clears chunk @k in memory; the caller persists its block. */
static void
clear_bit (VbBitmap *bm, guint64 k)
{
  bit_clear (bm->bits, k);
  /* A pending bit here belongs to a failed start_write (nothing in flight).
   * Drop it from a snapshot being persisted too, so that the end of that
   * persist does not mark a later setting of the bit durable. */
  bit_clear (bm->pending, k);
  bit_clear (bm->captured, k);
  bm->blocks[k / BITS_PER_BLOCK].gen++;
}

guint
vb_bitmap_sweep (VbBitmap *bm, gboolean may_clear)
{
  guint cleared = 0;

  g_return_val_if_fail (bm != NULL, 0);

  g_mutex_lock (&bm->lock);
  if (may_clear && any_idle (bm) && before_clear (bm) < 0)
    may_clear = FALSE;
  if (may_clear)
    {
      for (gsize i = 0; i < bm->n_bytes; i++)
        {
          guint8 idle = bm->bits[i] & (guint8) ~bm->written[i];

          while (idle != 0)
            {
              guint j = (guint) __builtin_ctz (idle);
              guint64 k = (guint64) i * 8 + j;

              idle &= (guint8) (idle - 1);
              if (bm->in_flight[k] != 0)
                continue;
              clear_bit (bm, k);
              cleared++;
            }
        }
    }
  /* Ages the flags even when nothing may be cleared, so that once clearing is
   * allowed again the bits idle for a whole period go at the next sweep. */
  memset (bm->written, 0, bm->n_bytes);

  for (guint b = 0; b < bm->n_blocks; b++)
    {
      int r;

      if (bm->blocks[b].durable >= bm->blocks[b].gen)
        continue;
      /* Also retries blocks whose last persist failed. A failure is only
       * logged and the bits stay cleared in memory: this is safe because a
       * clear that did not reach the disk leaves the bit set there, which costs
       * a needless resync of the chunk after a crash and nothing else; the next
       * writer of the chunk sets and persists the bit again, and every persist
       * writes the block as it is in memory at that time. */
      r = persist_until (bm, b, bm->blocks[b].gen);
      if (r < 0)
        vb_report ("write-intent bitmap", VB_REPORT_WARNING, "persisting block %u failed: %s", b,
                   g_strerror (-r));
    }
  g_mutex_unlock (&bm->lock);
  return cleared;
}

guint64
vb_bitmap_chunk_size (VbBitmap *bm)
{
  g_return_val_if_fail (bm != NULL, 0);
  return bm->chunk;
}

guint64
vb_bitmap_n_chunks (VbBitmap *bm)
{
  g_return_val_if_fail (bm != NULL, 0);
  return bm->n_chunks;
}

guint64
vb_bitmap_count_dirty (VbBitmap *bm)
{
  guint64 count = 0;

  g_return_val_if_fail (bm != NULL, 0);

  g_mutex_lock (&bm->lock);
  for (gsize i = 0; i < bm->n_bytes; i += sizeof (guint64))
    {
      guint64 word;

      memcpy (&word, bm->bits + i, sizeof word);
      count += (guint64) __builtin_popcountll (word);
    }
  g_mutex_unlock (&bm->lock);
  return count;
}

gboolean
vb_bitmap_test (VbBitmap *bm, guint64 chunk)
{
  gboolean set;

  g_return_val_if_fail (bm != NULL, FALSE);
  g_return_val_if_fail (chunk < bm->n_chunks, FALSE);

  g_mutex_lock (&bm->lock);
  set = bit_get (bm->bits, chunk);
  g_mutex_unlock (&bm->lock);
  return set;
}

guint64
vb_bitmap_next_dirty (VbBitmap *bm, guint64 from_chunk)
{
  guint64 found = G_MAXUINT64;

  g_return_val_if_fail (bm != NULL, G_MAXUINT64);

  g_mutex_lock (&bm->lock);
  for (guint64 k = from_chunk; k < bm->n_chunks; k = (k | 7) + 1)
    {
      guint8 rest = bm->bits[k >> 3] >> (k & 7);

      if (rest != 0)
        {
          found = k + (guint64) __builtin_ctz (rest);
          break;
        }
    }
  g_mutex_unlock (&bm->lock);
  /* Bits past the last chunk are always zero, so found < n_chunks. */
  return found;
}

void
vb_bitmap_mark_all (VbBitmap *bm)
{
  g_return_if_fail (bm != NULL);

  g_mutex_lock (&bm->lock);
  for (guint64 k = 0; k < bm->n_chunks; k++)
    if (!bit_get (bm->bits, k))
      {
        bit_set (bm->bits, k);
        bit_set (bm->pending, k);
        bm->blocks[k / BITS_PER_BLOCK].gen++;
      }
  for (guint b = 0; b < bm->n_blocks; b++)
    {
      int r = persist_until (bm, b, bm->blocks[b].gen);

      /* The bits stay set and pending: the next writer of a chunk persists. */
      if (r < 0)
        vb_report ("write-intent bitmap", VB_REPORT_WARNING, "persisting block %u failed: %s", b,
                   g_strerror (-r));
    }
  g_mutex_unlock (&bm->lock);
}

int
vb_bitmap_clear_chunk (VbBitmap *bm, guint64 chunk)
{
  return vb_bitmap_clear_chunks (bm, &chunk, 1);
}

int
vb_bitmap_clear_chunks (VbBitmap *bm, const guint64 *chunks, guint n)
{
  gboolean any = FALSE;
  int r = 0;

  g_return_val_if_fail (bm != NULL, -EINVAL);
  g_return_val_if_fail (chunks != NULL || n == 0, -EINVAL);
  for (guint i = 0; i < n; i++)
    g_return_val_if_fail (chunks[i] < bm->n_chunks, -EINVAL);

  g_mutex_lock (&bm->lock);
  for (guint i = 0; i < n && !any; i++)
    any = bit_get (bm->bits, chunks[i]) && bm->in_flight[chunks[i]] == 0;
  if (any)
    r = before_clear (bm);
  for (guint i = 0; i < n && any && r == 0; i++)
    {
      /* A write in flight may not have reached every component yet. */
      if (!bit_get (bm->bits, chunks[i]) || bm->in_flight[chunks[i]] != 0)
        continue;
      clear_bit (bm, chunks[i]);
      bit_clear (bm->written, chunks[i]);
    }
  for (guint i = 0; i < n && any && r == 0; i++)
    {
      guint b = (guint) (chunks[i] / BITS_PER_BLOCK);

      r = persist_until (bm, b, bm->blocks[b].gen);
    }
  g_mutex_unlock (&bm->lock);
  return r;
}

void
vb_bitmap_snapshot (VbBitmap *bm, guint8 *out, gsize len)
{
  gsize n;

  g_return_if_fail (bm != NULL);
  g_return_if_fail (out != NULL || len == 0);

  n = MIN (len, bm->n_bytes);
  if (n > 0)
    {
      g_mutex_lock (&bm->lock);
      memcpy (out, bm->bits, n);
      g_mutex_unlock (&bm->lock);
    }
  if (len > n)
    memset (out + n, 0, len - n);
}
