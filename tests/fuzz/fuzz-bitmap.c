/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzz target for the two readers of the write-intent bitmap a component
 * holds: the engine's (vb_bitmap_new with the area as read) and vbmgr
 * examine's (vb_superblock_count_dirty, here on a memfd). The first 12
 * bytes of an input give the geometry (chunks, chunk size, the last
 * chunk's length), the rest is the bitmap area. Both readers must take
 * exactly the bits of existing chunks: the same count, each bit as on
 * disk, nothing past the last chunk in a snapshot; and the loaded bits are
 * durable (no persist, writes to dirty chunks take the fast path). Built
 * for libFuzzer (clang) and for the standalone driver of fuzz-main.c. */
#include "config.h"

#include "fuzz.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bitmap.h"
#include "superblock.h"


#define HEADER 12
#define BITS_PER_BLOCK ((guint64) VB_BITMAP_BLOCK_SIZE * 8)
/* three blocks' worth: every boundary, and quick */
#define MAX_CHUNKS (3 * BITS_PER_BLOCK)
/* vb_bitmap_test is checked on the chunks this near either end */
#define EDGE 1024

static guint32
get32 (const guint8 *p)
{
  return (guint32) p[0] | (guint32) p[1] << 8 | (guint32) p[2] << 16 | (guint32) p[3] << 24;
}

static void
put32 (guint8 *p, guint32 v)
{
  for (int i = 0; i < 4; i++)
    p[i] = (guint8) (v >> (8 * i));
}

/* Nothing is changed in memory by loading or querying: nothing to persist. */
static int
persist_never (guint block, const guint8 *data, gpointer user_data)
{
  FUZZ_CHECK (!"a loaded bitmap persisted a block");
  return -EIO;
}

/* Chunk @k of the area as the format defines it: bit k % 8 of byte k / 8;
 * a chunk past the area is clean. */
static gboolean
area_bit (const guint8 *area, gsize len, guint64 k)
{
  return k / 8 < len && (area[k / 8] >> (k % 8)) & 1;
}

/* The area's bytes as the bitmap of @n chunks must hold them: bits past
 * the last chunk, and bytes past the area, clear. */
static guint8 *
expected_bytes (guint64 n, const guint8 *area, gsize len, gsize n_bytes)
{
  guint8 *want = g_malloc0 (n_bytes);

  for (gsize i = 0; i < n_bytes && i < len && (guint64) i * 8 < n; i++)
    {
      guint64 left = n - (guint64) i * 8;

      want[i] = left >= 8 ? area[i] : area[i] & (guint8) ((1u << left) - 1);
    }
  return want;
}

static void
check_bitmap (VbBitmap *bm, guint64 data_size, guint64 chunk, guint64 n, const guint8 *area,
              gsize len)
{
  /* a snapshot longer than the bitmap is zero past it */
  gsize n_bytes = vb_bitmap_bytes_for (data_size, chunk) + 64;
  g_autofree guint8 *want = expected_bytes (n, area, len, n_bytes);
  g_autofree guint8 *snap = g_malloc (n_bytes);
  guint64 dirty = 0, walked = 0, k, next, prev = 0;

  FUZZ_CHECK (vb_bitmap_n_chunks (bm) == n);
  FUZZ_CHECK (vb_bitmap_chunk_size (bm) == chunk);

  vb_bitmap_snapshot (bm, snap, n_bytes);
  FUZZ_CHECK (memcmp (snap, want, n_bytes) == 0);
  for (gsize i = 0; i < n_bytes; i++)
    dirty += (guint64) __builtin_popcount (want[i]);
  FUZZ_CHECK (vb_bitmap_count_dirty (bm) == dirty);

  for (k = 0; k < n; k++)
    {
      if (k == EDGE && n > 2 * EDGE)
        k = n - EDGE; /* the middle is left to the walk */
      FUZZ_CHECK (vb_bitmap_test (bm, k) == area_bit (want, n_bytes, k));
    }

  /* the walk of a resync visits exactly the dirty chunks, in order */
  for (next = vb_bitmap_next_dirty (bm, 0); next != G_MAXUINT64;
       next = vb_bitmap_next_dirty (bm, next + 1))
    {
      FUZZ_CHECK (next < n && (walked == 0 || next > prev) && area_bit (want, n_bytes, next));
      prev = next;
      walked++;
    }
  FUZZ_CHECK (walked == dirty);

  /* loaded bits are durable: a write to a dirty chunk needs no persist,
   * one to a clean chunk does; the sweep that may not clear writes
   * nothing */
  next = vb_bitmap_next_dirty (bm, 0);
  if (next != G_MAXUINT64)
    {
      guint64 off = next * chunk, length = MIN (chunk, data_size - off);

      FUZZ_CHECK (vb_bitmap_try_start_write (bm, off, length) == 0);
      vb_bitmap_end_write (bm, off, length);
    }
  for (k = 0; k < MIN (n, 64); k++)
    if (!area_bit (want, n_bytes, k))
      {
        FUZZ_CHECK (vb_bitmap_try_start_write (bm, k * chunk, 1) == -EAGAIN);
        break;
      }
  FUZZ_CHECK (vb_bitmap_sweep (bm, FALSE) == 0);
  FUZZ_CHECK (vb_bitmap_count_dirty (bm) == dirty);
}

/* vbmgr examine's count, from a component holding the area at
 * VB_BITMAP_OFFSET (padded to whole blocks, as bitmap_bytes is). */
static guint64
count_on_component (guint64 data_size, guint64 chunk, const guint8 *area, gsize len)
{
  static int fd = -1;
  VbSuperblock sb = { 0 };
  g_autoptr (GError) error = NULL;
  gsize padded = (len + VB_BITMAP_BLOCK_SIZE - 1) / VB_BITMAP_BLOCK_SIZE * VB_BITMAP_BLOCK_SIZE;
  guint64 dirty = G_MAXUINT64;

  if (fd < 0)
    fd = memfd_create ("fuzz-bitmap", MFD_CLOEXEC);
  FUZZ_CHECK (fd >= 0);
  FUZZ_CHECK (ftruncate (fd, 0) == 0 && ftruncate (fd, VB_BITMAP_OFFSET + padded) == 0);
  FUZZ_CHECK (len == 0 || pwrite (fd, area, len, VB_BITMAP_OFFSET) == (ssize_t) len);
  sb.features = VB_SB_FEATURE_BITMAP;
  sb.bitmap_chunk = chunk;
  sb.data_size = data_size;
  sb.bitmap_bytes = (guint32) padded;
  FUZZ_CHECK (vb_superblock_count_dirty (fd, NULL, &sb, &dirty, &error));
  FUZZ_CHECK (error == NULL);
  return dirty;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  const guint8 *area = data + HEADER;
  gsize len;
  guint64 n, chunk, data_size;
  gsize n_bytes;

  if (size < HEADER || size - HEADER > 4 * MAX_CHUNKS / 8)
    return 0;
  len = size - HEADER;
  n = get32 (data) % (MAX_CHUNKS + 1);
  chunk = (guint64) get32 (data + 4) + 1;
  /* the last chunk may be short */
  data_size = n == 0 ? 0 : (n - 1) * chunk + 1 + get32 (data + 8) % chunk;

  n_bytes = vb_bitmap_bytes_for (data_size, chunk);
  FUZZ_CHECK (n_bytes % VB_BITMAP_BLOCK_SIZE == 0 && n_bytes >= VB_BITMAP_BLOCK_SIZE);
  FUZZ_CHECK (n_bytes * 8 >= n && (n_bytes - VB_BITMAP_BLOCK_SIZE) * 8 < MAX (n, 1));

  /* the area as read (any length), and as the engine reads it: whole
   * blocks */
  {
    g_autoptr (VbBitmap) bm = vb_bitmap_new (data_size, chunk, area, len, persist_never, NULL);

    check_bitmap (bm, data_size, chunk, n, area, len);
  }
  {
    gsize padded = (len + VB_BITMAP_BLOCK_SIZE - 1) / VB_BITMAP_BLOCK_SIZE * VB_BITMAP_BLOCK_SIZE;
    g_autofree guint8 *blocks = g_malloc0 (MAX (padded, 1));
    g_autoptr (VbBitmap) bm = NULL;

    if (len > 0)
      memcpy (blocks, area, len);
    bm = vb_bitmap_new (data_size, chunk, blocks, padded, persist_never, NULL);
    check_bitmap (bm, data_size, chunk, n, area, len);
    /* the engine and vbmgr examine agree */
    FUZZ_CHECK (count_on_component (data_size, chunk, area, len) == vb_bitmap_count_dirty (bm));
  }
  return 0;
}

/* Seeds: a few geometries, with bits at the edges. */

static gboolean
write_seed (const char *dir, const char *name, guint32 n, guint32 chunk_minus_1, guint32 tail,
            const guint8 *area, gsize len)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autofree guint8 *buf = g_malloc (HEADER + len);
  g_autoptr (GError) error = NULL;

  put32 (buf, n);
  put32 (buf + 4, chunk_minus_1);
  put32 (buf + 8, tail);
  if (len > 0)
    memcpy (buf + HEADER, area, len);
  if (!g_file_set_contents (path, (const char *) buf, HEADER + len, &error))
    {
      fprintf (stderr, "%s\n", error->message);
      return FALSE;
    }
  return TRUE;
}

int
vb_fuzz_write_seeds (const char *dir)
{
  static const guint8 few[] = { 0x81, 0x00, 0x10, 0xff, 0x01 };
  g_autofree guint8 *block = g_malloc0 (VB_BITMAP_BLOCK_SIZE + 8);
  gboolean ok = TRUE;

  /* 37 chunks of 64 KiB, the last one short, bits past the end set */
  ok &= write_seed (dir, "short-tail", 37, (64 << 10) - 1, 4096, few, sizeof few);
  /* one block and a bit: chunk 32768 is in the second block */
  block[0] = 0x01;
  block[VB_BITMAP_BLOCK_SIZE - 1] = 0x80;
  block[VB_BITMAP_BLOCK_SIZE] = 0x01;
  ok &= write_seed (dir, "block-edge", BITS_PER_BLOCK + 1, (1 << 20) - 1, 0, block,
                    VB_BITMAP_BLOCK_SIZE + 8);
  /* a 1 GiB chunk, one chunk, no area read */
  ok &= write_seed (dir, "one-chunk-no-area", 1, (1u << 30) - 1, 12345, NULL, 0);
  /* chunk size not a power of two, every bit set */
  memset (block, 0xff, 64);
  ok &= write_seed (dir, "odd-chunk-all-set", 500, 99999, 7, block, 64);
  return ok ? 0 : 1;
}
