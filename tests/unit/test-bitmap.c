/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/metadata/bitmap: bit math, the persist-before-write rule,
 * lazy clearing by the sweep, errors, and concurrent writers checked against
 * an in-memory "disk" that the persist callback updates. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "bitmap.h"
#include "vb-report.h"

#define C ((guint64) 64 * 1024) /* chunk size of every test */
#define MAX_BLOCKS 4
#define BLOCK VB_BITMAP_BLOCK_SIZE

/* The components' bitmap area as persist() leaves it. */
typedef struct {
  GMutex lock;
  guint8 image[MAX_BLOCKS * BLOCK];
  guint calls[MAX_BLOCKS];
  guint total;
  int fail;        /* returned by persist() instead of writing, when non-zero */
  guint max_sleep; /* µs persist() takes at most before the block is durable */
  gint active[MAX_BLOCKS];
} Disk;

static int
disk_persist (guint block, const guint8 *data, gpointer user_data)
{
  Disk *disk = user_data;
  int r = 0;

  g_assert_cmpuint (block, <, MAX_BLOCKS);
  g_assert_true (((guintptr) data % 4096) == 0);
  /* The module must never persist one block twice at once. */
  g_assert_cmpint (g_atomic_int_add (&disk->active[block], 1), ==, 0);
  if (disk->max_sleep > 0)
    g_usleep (g_random_int_range (1, (gint32) disk->max_sleep));

  g_mutex_lock (&disk->lock);
  disk->calls[block]++;
  disk->total++;
  if (disk->fail != 0)
    r = disk->fail;
  else
    memcpy (disk->image + (gsize) block * BLOCK, data, BLOCK);
  g_mutex_unlock (&disk->lock);

  g_atomic_int_add (&disk->active[block], -1);
  return r;
}

static Disk *
disk_new (void)
{
  Disk *disk = g_new0 (Disk, 1);

  g_mutex_init (&disk->lock);
  return disk;
}

static void
disk_free (Disk *disk)
{
  g_mutex_clear (&disk->lock);
  g_free (disk);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Disk, disk_free)

static gboolean
disk_bit (Disk *disk, guint64 chunk)
{
  gboolean set;

  g_assert_cmpuint (chunk, <, MAX_BLOCKS * BLOCK * 8);
  g_mutex_lock (&disk->lock);
  set = (disk->image[chunk / 8] >> (chunk % 8)) & 1;
  g_mutex_unlock (&disk->lock);
  return set;
}

/* The dirty chunks as "a,b,c", through next_dirty. */
static char *
dirty_list (VbBitmap *bm)
{
  GString *s = g_string_new (NULL);

  for (guint64 k = vb_bitmap_next_dirty (bm, 0); k != G_MAXUINT64;
       k = vb_bitmap_next_dirty (bm, k + 1))
    g_string_append_printf (s, "%s%" G_GUINT64_FORMAT, s->len ? "," : "", k);
  return g_string_free (s, FALSE);
}

static void
test_bytes_for (void)
{
  g_assert_cmpuint (vb_bitmap_bytes_for (0, C), ==, 4096);
  g_assert_cmpuint (vb_bitmap_bytes_for (1, C), ==, 4096);
  g_assert_cmpuint (vb_bitmap_bytes_for (C * 8 * 4096, C), ==, 4096);
  g_assert_cmpuint (vb_bitmap_bytes_for (C * 8 * 4096 + 1, C), ==, 8192);
  g_assert_cmpuint (vb_bitmap_bytes_for (C * 8 * 4096 * 3, C), ==, 3 * 4096);
  /* 1 TiB in 64 MiB chunks: 16384 bits, 2048 bytes. */
  g_assert_cmpuint (vb_bitmap_bytes_for (G_GUINT64_CONSTANT (1) << 40, 64 << 20), ==, 4096);
}

/* One write of [offset, offset+length) on a fresh bitmap of 10 chunks and
 * 100 bytes; returns the chunks it set. */
static char *
dirty_after (guint64 offset, guint64 length, guint *persists)
{
  g_autoptr (Disk) disk = disk_new ();
  g_autoptr (VbBitmap) bm = vb_bitmap_new (10 * C + 100, C, NULL, 0, disk_persist, disk);

  g_assert_cmpuint (vb_bitmap_n_chunks (bm), ==, 11);
  g_assert_cmpuint (vb_bitmap_chunk_size (bm), ==, C);
  g_assert_cmpint (vb_bitmap_start_write (bm, offset, length), ==, 0);
  vb_bitmap_end_write (bm, offset, length);
  *persists = disk->total;
  return dirty_list (bm);
}

static void
assert_dirty_after (guint64 offset, guint64 length, const char *expected, guint expected_persists)
{
  guint persists;
  g_autofree char *got = dirty_after (offset, length, &persists);

  g_assert_cmpstr (got, ==, expected);
  g_assert_cmpuint (persists, ==, expected_persists);
}

static void
test_range_math (void)
{
  assert_dirty_after (C + 10, 100, "1", 1);       /* inside one chunk */
  assert_dirty_after (C, C, "1", 1);              /* exactly one chunk */
  assert_dirty_after (2 * C - 1, 2, "1,2", 1);    /* spans a boundary */
  assert_dirty_after (C - 1, C + 2, "0,1,2", 1);  /* touches three */
  assert_dirty_after (10 * C + 50, 50, "10", 1);  /* last, partial chunk */
  assert_dirty_after (9 * C, C + 100, "9,10", 1); /* up to the very end */
  assert_dirty_after (0, 10 * C + 100, "0,1,2,3,4,5,6,7,8,9,10", 1);
  assert_dirty_after (5 * C, 0, "", 0); /* length 0 is ignored */
  assert_dirty_after (10 * C + 100, 0, "", 0);
}

static void
test_persist_once (void)
{
  g_autoptr (Disk) disk = disk_new ();
  guint8 initial[1] = { 1 << 4 };
  g_autoptr (VbBitmap) bm = vb_bitmap_new (16 * C, C, initial, 1, disk_persist, disk);

  g_assert_cmpint (vb_bitmap_start_write (bm, 0, 1), ==, 0);
  g_assert_cmpuint (disk->total, ==, 1);
  g_assert_true (disk_bit (disk, 0));

  /* Already set and durable: no I/O. */
  g_assert_cmpint (vb_bitmap_start_write (bm, 100, 4096), ==, 0);
  g_assert_cmpuint (disk->total, ==, 1);
  g_assert_cmpint (vb_bitmap_start_write (bm, 4 * C, C), ==, 0); /* loaded from disk */
  g_assert_cmpuint (disk->total, ==, 1);

  g_assert_cmpint (vb_bitmap_start_write (bm, 2 * C + 5, 5), ==, 0);
  g_assert_cmpuint (disk->total, ==, 2);
  g_assert_true (disk_bit (disk, 2));
  g_assert_true (disk_bit (disk, 4));
  g_assert_false (disk_bit (disk, 1));

  vb_bitmap_end_write (bm, 0, 1);
  vb_bitmap_end_write (bm, 100, 4096);
  vb_bitmap_end_write (bm, 4 * C, C);
  vb_bitmap_end_write (bm, 2 * C + 5, 5);
  g_assert_cmpuint (disk->total, ==, 2);
  g_assert_cmpuint (vb_bitmap_count_dirty (bm), ==, 3);
}

static void
test_sweep (void)
{
  g_autoptr (Disk) disk = disk_new ();
  g_autoptr (VbBitmap) bm = vb_bitmap_new (16 * C, C, NULL, 0, disk_persist, disk);
  g_autofree char *list = NULL;

  /* In flight: never cleared. */
  g_assert_cmpint (vb_bitmap_start_write (bm, 3 * C, 10), ==, 0);
  for (int i = 0; i < 4; i++)
    g_assert_cmpuint (vb_bitmap_sweep (bm, TRUE), ==, 0);
  g_assert_true (vb_bitmap_test (bm, 3));
  g_assert_cmpuint (disk->total, ==, 1);

  /* Written since the previous sweep: kept once more; idle: cleared. */
  vb_bitmap_end_write (bm, 3 * C, 10);
  g_assert_cmpuint (vb_bitmap_sweep (bm, TRUE), ==, 0);
  g_assert_true (vb_bitmap_test (bm, 3));
  g_assert_cmpuint (vb_bitmap_sweep (bm, TRUE), ==, 1);
  g_assert_false (vb_bitmap_test (bm, 3));
  g_assert_false (disk_bit (disk, 3));
  g_assert_cmpuint (disk->total, ==, 2);
  g_assert_cmpuint (vb_bitmap_sweep (bm, TRUE), ==, 0);
  g_assert_cmpuint (disk->total, ==, 2);

  /* A write between two sweeps restarts the idle period. */
  g_assert_cmpint (vb_bitmap_start_write (bm, 5 * C, 10), ==, 0);
  vb_bitmap_end_write (bm, 5 * C, 10);
  g_assert_cmpuint (vb_bitmap_sweep (bm, TRUE), ==, 0);
  g_assert_cmpint (vb_bitmap_start_write (bm, 5 * C, 10), ==, 0);
  vb_bitmap_end_write (bm, 5 * C, 10);
  g_assert_cmpuint (vb_bitmap_sweep (bm, TRUE), ==, 0);
  g_assert_true (vb_bitmap_test (bm, 5));
  g_assert_cmpuint (vb_bitmap_sweep (bm, TRUE), ==, 1);
  g_assert_false (disk_bit (disk, 5));

  /* may_clear FALSE: kept however long it stays idle. */
  g_assert_cmpint (vb_bitmap_start_write (bm, 7 * C, 3 * C), ==, 0);
  vb_bitmap_end_write (bm, 7 * C, 3 * C);
  for (int i = 0; i < 5; i++)
    g_assert_cmpuint (vb_bitmap_sweep (bm, FALSE), ==, 0);
  list = dirty_list (bm);
  g_assert_cmpstr (list, ==, "7,8,9");
  g_assert_true (disk_bit (disk, 8));
  g_assert_cmpuint (vb_bitmap_sweep (bm, TRUE), ==, 3);
  g_assert_cmpuint (vb_bitmap_count_dirty (bm), ==, 0);
  g_assert_false (disk_bit (disk, 8));
}

static void
test_initial_snapshot (void)
{
  g_autoptr (Disk) disk = disk_new ();
  g_autofree guint8 *full = g_malloc (3 * BLOCK);
  g_autofree guint8 *out = g_malloc (BLOCK + 100);
  guint8 one = 0xff;

  /* Longer than needed, all set: only the 11 chunks count. */
  memset (full, 0xff, 3 * BLOCK);
  {
    g_autoptr (VbBitmap) bm = vb_bitmap_new (10 * C + 100, C, full, 3 * BLOCK, disk_persist, disk);

    g_assert_cmpuint (vb_bitmap_count_dirty (bm), ==, 11);
    g_assert_true (vb_bitmap_test (bm, 10));
    g_assert_cmpuint (vb_bitmap_next_dirty (bm, 10), ==, 10);
    g_assert_cmpuint (vb_bitmap_next_dirty (bm, 11), ==, G_MAXUINT64);
    memset (out, 0xaa, BLOCK + 100);
    vb_bitmap_snapshot (bm, out, BLOCK + 100);
    g_assert_cmpuint (out[0], ==, 0xff);
    g_assert_cmpuint (out[1], ==, 0x07);
    for (gsize i = 2; i < BLOCK + 100; i++)
      g_assert_cmpuint (out[i], ==, 0);
    /* Shorter output: the first bytes. */
    memset (out, 0, 2);
    vb_bitmap_snapshot (bm, out, 1);
    g_assert_cmpuint (out[0], ==, 0xff);
    g_assert_cmpuint (out[1], ==, 0);
  }
  /* Shorter than needed: the rest is clear. */
  {
    g_autoptr (VbBitmap) bm = vb_bitmap_new (10 * C + 100, C, &one, 1, disk_persist, disk);
    g_autofree char *list = dirty_list (bm);

    g_assert_cmpstr (list, ==, "0,1,2,3,4,5,6,7");
  }
  {
    g_autoptr (VbBitmap) bm = vb_bitmap_new (10 * C + 100, C, NULL, 0, disk_persist, disk);

    g_assert_cmpuint (vb_bitmap_count_dirty (bm), ==, 0);
    g_assert_cmpuint (vb_bitmap_next_dirty (bm, 0), ==, G_MAXUINT64);
  }
  g_assert_cmpuint (disk->total, ==, 0);
}

#define BIG_CHUNKS 40000 /* two blocks */

static void
test_mark_all_clear_chunk (void)
{
  g_autoptr (Disk) disk = disk_new ();
  g_autoptr (VbBitmap) bm = vb_bitmap_new (BIG_CHUNKS * C, C, NULL, 0, disk_persist, disk);
  g_autofree guint8 *snap = g_malloc (2 * BLOCK);

  vb_bitmap_mark_all (bm);
  g_assert_cmpuint (vb_bitmap_count_dirty (bm), ==, BIG_CHUNKS);
  g_assert_cmpuint (disk->calls[0], ==, 1);
  g_assert_cmpuint (disk->calls[1], ==, 1);
  g_assert_cmpuint (disk->total, ==, 2);
  vb_bitmap_snapshot (bm, snap, 2 * BLOCK);
  g_assert_cmpmem (snap, 2 * BLOCK, disk->image, 2 * BLOCK);
  g_assert_true (disk_bit (disk, BIG_CHUNKS - 1));
  g_assert_false (disk_bit (disk, BIG_CHUNKS));
  g_assert_cmpuint (snap[2 * BLOCK - 1], ==, 0);

  g_assert_cmpint (vb_bitmap_clear_chunk (bm, 5), ==, 0);
  g_assert_false (vb_bitmap_test (bm, 5));
  g_assert_false (disk_bit (disk, 5));
  g_assert_cmpuint (disk->calls[0], ==, 2);
  g_assert_cmpuint (vb_bitmap_next_dirty (bm, 4), ==, 4);
  g_assert_cmpuint (vb_bitmap_next_dirty (bm, 5), ==, 6);

  /* Already clear: nothing to persist. */
  g_assert_cmpint (vb_bitmap_clear_chunk (bm, 5), ==, 0);
  g_assert_cmpuint (disk->total, ==, 3);

  /* A write in flight keeps its bit. */
  g_assert_cmpint (vb_bitmap_start_write (bm, 6 * C, 1), ==, 0);
  g_assert_cmpint (vb_bitmap_clear_chunk (bm, 6), ==, 0);
  g_assert_true (vb_bitmap_test (bm, 6));
  vb_bitmap_end_write (bm, 6 * C, 1);

  g_assert_cmpint (vb_bitmap_clear_chunk (bm, 32768), ==, 0);
  g_assert_cmpuint (disk->calls[1], ==, 2);
  g_assert_false (disk_bit (disk, 32768));
  g_assert_cmpuint (vb_bitmap_next_dirty (bm, 32767), ==, 32767);
  g_assert_cmpuint (vb_bitmap_next_dirty (bm, 32768), ==, 32769);
  g_assert_cmpuint (vb_bitmap_next_dirty (bm, BIG_CHUNKS - 1), ==, BIG_CHUNKS - 1);
  g_assert_cmpuint (vb_bitmap_next_dirty (bm, BIG_CHUNKS), ==, G_MAXUINT64);
  g_assert_cmpuint (vb_bitmap_count_dirty (bm), ==, BIG_CHUNKS - 2);

  /* Everything set already: mark_all writes nothing. */
  g_assert_cmpint (vb_bitmap_start_write (bm, 5 * C, 1), ==, 0);
  vb_bitmap_end_write (bm, 5 * C, 1);
  g_assert_cmpint (vb_bitmap_start_write (bm, 32768 * C, 1), ==, 0);
  vb_bitmap_end_write (bm, 32768 * C, 1);
  g_assert_cmpuint (disk->total, ==, 6);
  vb_bitmap_mark_all (bm);
  g_assert_cmpuint (disk->total, ==, 6);
}

static void
test_across_blocks (void)
{
  g_autoptr (Disk) disk = disk_new ();
  g_autoptr (VbBitmap) bm = vb_bitmap_new (BIG_CHUNKS * C, C, NULL, 0, disk_persist, disk);
  g_autofree char *list = NULL;

  g_assert_cmpint (vb_bitmap_start_write (bm, 32767 * C + 1, C), ==, 0);
  g_assert_cmpuint (disk->calls[0], ==, 1);
  g_assert_cmpuint (disk->calls[1], ==, 1);
  g_assert_true (disk_bit (disk, 32767));
  g_assert_true (disk_bit (disk, 32768));
  list = dirty_list (bm);
  g_assert_cmpstr (list, ==, "32767,32768");
  vb_bitmap_end_write (bm, 32767 * C + 1, C);
}

static void
test_persist_error (void)
{
  g_autoptr (Disk) disk = disk_new ();
  g_autoptr (VbBitmap) bm = vb_bitmap_new (16 * C, C, NULL, 0, disk_persist, disk);

  disk->fail = -EIO;
  g_assert_cmpint (vb_bitmap_start_write (bm, 3 * C, 1), ==, -EIO);
  g_assert_true (vb_bitmap_test (bm, 3)); /* stays set in memory: safe */
  g_assert_false (disk_bit (disk, 3));
  g_assert_cmpuint (disk->total, ==, 1);

  /* Set but not durable: the next writer persists it again. */
  disk->fail = 0;
  g_assert_cmpint (vb_bitmap_start_write (bm, 3 * C, 1), ==, 0);
  g_assert_true (disk_bit (disk, 3));
  g_assert_cmpuint (disk->total, ==, 2);
  vb_bitmap_end_write (bm, 3 * C, 1);

  /* The failed write is not in flight: the sweep clears its chunk. */
  disk->fail = -ENOSPC;
  g_assert_cmpint (vb_bitmap_start_write (bm, 9 * C, 1), ==, -ENOSPC);
  disk->fail = 0;
  g_assert_cmpuint (vb_bitmap_sweep (bm, TRUE), ==, 0);
  g_assert_cmpuint (vb_bitmap_sweep (bm, TRUE), ==, 2);
  g_assert_cmpuint (vb_bitmap_count_dirty (bm), ==, 0);
  g_assert_false (disk_bit (disk, 3));

  /* clear_chunk returns the error. */
  g_assert_cmpint (vb_bitmap_start_write (bm, 4 * C, 1), ==, 0);
  vb_bitmap_end_write (bm, 4 * C, 1);
  disk->fail = -EIO;
  g_assert_cmpint (vb_bitmap_clear_chunk (bm, 4), ==, -EIO);
  g_assert_true (disk_bit (disk, 4));
}

static void
on_report (const char *subject, VbReportKind kind, const char *message, gpointer data)
{
  g_ptr_array_add (data, g_strdup_printf ("%s %s: %s", kind == VB_REPORT_WARNING ? "warning" : "info",
                                          subject, message));
}

/* A failing clear: reported (the bitmap does not log), cleared in memory,
 * retried by the next sweep. */
static void
test_sweep_persist_error (void)
{
  g_autoptr (GPtrArray) reports = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (Disk) disk = disk_new ();
  g_autoptr (VbBitmap) bm = vb_bitmap_new (16 * C, C, NULL, 0, disk_persist, disk);

  vb_report_set_func (on_report, reports);
  g_assert_cmpint (vb_bitmap_start_write (bm, 4 * C, 1), ==, 0);
  vb_bitmap_end_write (bm, 4 * C, 1);
  g_assert_cmpuint (vb_bitmap_sweep (bm, TRUE), ==, 0);
  g_assert_cmpuint (reports->len, ==, 0);
  disk->fail = -EIO;
  g_assert_cmpuint (vb_bitmap_sweep (bm, TRUE), ==, 1);
  g_assert_false (vb_bitmap_test (bm, 4));
  g_assert_true (disk_bit (disk, 4));
  g_assert_cmpuint (reports->len, ==, 1);
  g_assert_cmpstr (reports->pdata[0], ==,
                   "warning write-intent bitmap: persisting block 0 failed: Input/output error");
  disk->fail = 0;
  g_assert_cmpuint (vb_bitmap_sweep (bm, TRUE), ==, 0);
  g_assert_false (disk_bit (disk, 4));
  g_assert_cmpuint (disk->total, ==, 3);
  g_assert_cmpuint (reports->len, ==, 1);
  vb_report_set_func (NULL, NULL);
}

/* Concurrent writers and a sweeper. */

#define N_WRITERS 4
#define N_WRITES 1500

typedef struct {
  VbBitmap *bm;
  Disk *disk;
  guint32 seed;
  gint *stop;
} Writer;

static void
assert_durable (Disk *disk, guint64 offset, guint64 length, const char *when)
{
  for (guint64 k = offset / C; k <= (offset + length - 1) / C; k++)
    if (!disk_bit (disk, k))
      g_error ("chunk %" G_GUINT64_FORMAT " not durable %s", k, when);
}

static gpointer
writer_thread (gpointer data)
{
  Writer *w = data;
  g_autoptr (GRand) rand = g_rand_new_with_seed (w->seed);

  for (int i = 0; i < N_WRITES; i++)
    {
      /* Mostly around the boundary between the two blocks, some anywhere. */
      guint64 base = g_rand_boolean (rand) ? 32768 - 40 + (guint64) g_rand_int_range (rand, 0, 80)
                                           : (guint64) g_rand_int_range (rand, 0, BIG_CHUNKS - 4);
      guint64 offset = base * C + (guint64) g_rand_int_range (rand, 0, (gint32) C);
      guint64 length = 1 + (guint64) g_rand_int_range (rand, 0, (gint32) (3 * C));

      g_assert_cmpint (vb_bitmap_start_write (w->bm, offset, length), ==, 0);
      assert_durable (w->disk, offset, length, "after start_write");
      /* Some writes stay in flight across several sweeps. */
      if (g_rand_int_range (rand, 0, 32) == 0)
        g_usleep (g_rand_int_range (rand, 1000, 3000));
      else if (g_rand_int_range (rand, 0, 8) == 0)
        g_usleep (g_rand_int_range (rand, 1, 200));
      assert_durable (w->disk, offset, length, "before end_write");
      vb_bitmap_end_write (w->bm, offset, length);
    }
  return NULL;
}

static gpointer
sweeper_thread (gpointer data)
{
  Writer *w = data;

  while (!g_atomic_int_get (w->stop))
    {
      vb_bitmap_sweep (w->bm, TRUE);
      g_usleep (50);
    }
  return NULL;
}

static void
test_threads (void)
{
  g_autoptr (Disk) disk = disk_new ();
  g_autoptr (VbBitmap) bm = vb_bitmap_new (BIG_CHUNKS * C, C, NULL, 0, disk_persist, disk);
  Writer writers[N_WRITERS];
  Writer sweeper = { bm, disk, 0, NULL };
  GThread *threads[N_WRITERS];
  GThread *sweep;
  gint stop = 0;
  g_autofree guint8 *snap = g_malloc (2 * BLOCK);

  /* Long enough that a writer returning before its bit is durable sees it. */
  disk->max_sleep = 300;
  sweeper.stop = &stop;
  sweep = g_thread_new ("sweeper", sweeper_thread, &sweeper);
  for (int i = 0; i < N_WRITERS; i++)
    {
      writers[i] = (Writer){ bm, disk, (guint32) g_test_rand_int (), &stop };
      threads[i] = g_thread_new ("writer", writer_thread, &writers[i]);
    }
  for (int i = 0; i < N_WRITERS; i++)
    g_thread_join (threads[i]);
  g_atomic_int_set (&stop, 1);
  g_thread_join (sweep);

  g_test_message ("%u persists", disk->total);
  g_assert_cmpuint (disk->total, >, 10);
  vb_bitmap_snapshot (bm, snap, 2 * BLOCK);
  g_assert_cmpmem (snap, 2 * BLOCK, disk->image, 2 * BLOCK);

  /* Nothing left in flight: two sweeps clear everything, on disk too. */
  vb_bitmap_sweep (bm, TRUE);
  vb_bitmap_sweep (bm, TRUE);
  g_assert_cmpuint (vb_bitmap_count_dirty (bm), ==, 0);
  memset (snap, 0, 2 * BLOCK);
  g_assert_cmpmem (snap, 2 * BLOCK, disk->image, 2 * BLOCK);
}

/* The clear function (events_cleared in the engine's superblocks) runs
 * before any cleared bit reaches the disk, once per sweep or batch that
 * clears; when it fails nothing is cleared. */
typedef struct {
  Disk *disk;
  guint calls;
  int fail;
  guint8 image_then[MAX_BLOCKS * BLOCK]; /* the disk when it last ran */
} Recorder;

static int
record_clear (gpointer user_data)
{
  Recorder *r = user_data;

  r->calls++;
  g_mutex_lock (&r->disk->lock);
  memcpy (r->image_then, r->disk->image, sizeof r->image_then);
  g_mutex_unlock (&r->disk->lock);
  return r->fail;
}

static void
test_clear_recorded_first (void)
{
  g_autoptr (Disk) disk = disk_new ();
  g_autoptr (VbBitmap) bm = vb_bitmap_new (100 * C, C, NULL, 0, disk_persist, disk);
  Recorder rec = { disk, 0, 0, { 0 } };
  const guint64 chunks[] = { 3, 7 };

  vb_bitmap_set_clear_func (bm, record_clear, &rec);
  for (guint k = 0; k < 10; k++)
    {
      g_assert_cmpint (vb_bitmap_start_write (bm, k * C, C), ==, 0);
      vb_bitmap_end_write (bm, k * C, C);
    }
  /* nothing idle yet: no record */
  g_assert_cmpuint (vb_bitmap_sweep (bm, TRUE), ==, 0);
  g_assert_cmpuint (rec.calls, ==, 0);

  /* the record fails: every bit stays, in memory and on disk */
  rec.fail = -EIO;
  g_assert_cmpuint (vb_bitmap_sweep (bm, TRUE), ==, 0);
  g_assert_cmpuint (rec.calls, ==, 1);
  g_assert_cmpuint (vb_bitmap_count_dirty (bm), ==, 10);
  g_assert_true (disk_bit (disk, 4));
  g_assert_cmpint (vb_bitmap_clear_chunks (bm, chunks, 2), ==, -EIO);
  g_assert_cmpuint (rec.calls, ==, 2);
  g_assert_true (disk_bit (disk, 3) && disk_bit (disk, 7));

  /* a batch: one record, then both bits go; the disk still had them set
   * when the record ran */
  rec.fail = 0;
  g_assert_cmpint (vb_bitmap_clear_chunks (bm, chunks, 2), ==, 0);
  g_assert_cmpuint (rec.calls, ==, 3);
  g_assert_cmpuint (rec.image_then[0], ==, 0xff);
  g_assert_false (disk_bit (disk, 3) || disk_bit (disk, 7));
  /* nothing left to clear there: no record */
  g_assert_cmpint (vb_bitmap_clear_chunks (bm, chunks, 2), ==, 0);
  g_assert_cmpuint (rec.calls, ==, 3);

  /* a sweep that clears: one record before */
  g_assert_cmpuint (vb_bitmap_sweep (bm, TRUE), ==, 8);
  g_assert_cmpuint (rec.calls, ==, 4);
  g_assert_true ((rec.image_then[0] & 0x77) == 0x77 && (rec.image_then[1] & 3) == 3);
  g_assert_cmpuint (vb_bitmap_count_dirty (bm), ==, 0);
  g_assert_false (disk_bit (disk, 0) || disk_bit (disk, 9));
  g_assert_cmpuint (vb_bitmap_sweep (bm, TRUE), ==, 0);
  g_assert_cmpuint (rec.calls, ==, 4);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/bitmap/bytes-for", test_bytes_for);
  g_test_add_func ("/bitmap/range-math", test_range_math);
  g_test_add_func ("/bitmap/persist-once", test_persist_once);
  g_test_add_func ("/bitmap/sweep", test_sweep);
  g_test_add_func ("/bitmap/initial-snapshot", test_initial_snapshot);
  g_test_add_func ("/bitmap/mark-all-clear-chunk", test_mark_all_clear_chunk);
  g_test_add_func ("/bitmap/across-blocks", test_across_blocks);
  g_test_add_func ("/bitmap/persist-error", test_persist_error);
  g_test_add_func ("/bitmap/sweep-persist-error", test_sweep_persist_error);
  g_test_add_func ("/bitmap/threads", test_threads);
  g_test_add_func ("/bitmap/clear-recorded-first", test_clear_recorded_first);

  return g_test_run ();
}
