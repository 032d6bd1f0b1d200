/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The asynchronous engine without a daemon or root: the ring (work posted
 * from other threads runs on the ring's, in order), the write barrier (a
 * write waits as a ring operation while a job's step holds it, and a step
 * waits for the writes in flight), and requests on one ring — many in
 * flight at once complete exactly once each, whatever order their pieces
 * finish in, and leave every leg holding what was written; a read whose
 * copy fails is served from another leg, and the failed one counts as
 * faulty; a flush reaches every healthy leg, and one that fails there
 * makes that leg faulty; the fault injector's delay waits in the ring. */
#include "config.h"

#include "engine-barrier.h"
#include "engine.h"
#include "vb-error.h"
#include "vb-report.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LEG_SIZE (8u << 20)
#define DATA_OFFSET (1u << 20)
#define BLOCK 4096
#define IN_FLIGHT 64

static const char *const device_uuid = "5b8e1f0a-2c3d-4e5f-9a6b-7c8d9e0f1a2b";
static const char *const leg_uuids[]
    = { "b0000000-0000-4000-8000-000000000001", "b0000000-0000-4000-8000-000000000002", NULL };

/* --- the ring and the barrier ----------------------------------------------- */

typedef struct {
  VbRingOp op;
  GThread *ran_on;
  guint order;
  guint *next;
} Posted;

static void
on_posted (VbRingOp *op, int res)
{
  Posted *p = (Posted *) op;

  g_assert_cmpint (res, ==, 7);
  p->ran_on = g_thread_self ();
  p->order = (*p->next)++;
}

typedef struct {
  VbRing *ring;
  Posted *posted;
  guint n;
} PostJob;

static gpointer
post_all (gpointer data)
{
  PostJob *job = data;

  for (guint i = 0; i < job->n; i++)
    vb_ring_post (job->ring, &job->posted[i].op, 7);
  return NULL;
}

static void
test_ring_post (void)
{
  g_autoptr (GError) error = NULL;
  VbRing *ring = vb_ring_new (8, &error);
  Posted posted[32];
  guint next = 0;
  PostJob job = { ring, posted, G_N_ELEMENTS (posted) };
  GThread *other;

  g_assert_no_error (error);
  for (guint i = 0; i < G_N_ELEMENTS (posted); i++)
    posted[i] = (Posted){ .op.func = on_posted, .next = &next };
  other = g_thread_new ("poster", post_all, &job);
  while (next < G_N_ELEMENTS (posted))
    g_assert_cmpint (vb_ring_run (ring, TRUE), >=, 0);
  g_thread_join (other);
  for (guint i = 0; i < G_N_ELEMENTS (posted); i++)
    {
      g_assert_true (posted[i].ran_on == g_thread_self ());
      g_assert_cmpuint (posted[i].order, ==, i);
    }
  vb_ring_free (ring);
}

typedef struct {
  EngineBarrier *b;
  gint closed; /* atomic */
  gint opened; /* atomic */
} Closer;

static gpointer
close_then_open (gpointer data)
{
  Closer *c = data;

  engine_barrier_close (c->b);
  g_atomic_int_set (&c->closed, 1);
  g_usleep (G_USEC_PER_SEC / 10);
  g_atomic_int_set (&c->opened, 1);
  engine_barrier_open (c->b);
  return NULL;
}

typedef struct {
  EngineBarrierWaiter w;
  gboolean woken;
} Waiter;

static void
on_barrier_open (VbRingOp *op, int res)
{
  ((Waiter *) op)->woken = TRUE;
}

static void
test_barrier (void)
{
  VbRing *ring = vb_ring_new (8, NULL);
  EngineBarrier b;
  Closer c = { &b };
  Waiter waiter = { { .op.func = on_barrier_open, .ring = ring }, FALSE };
  GThread *t;

  engine_barrier_init (&b);
  /* a step waits for the write in flight */
  g_assert_true (engine_barrier_try_enter (&b, &waiter.w));
  t = g_thread_new ("closer", close_then_open, &c);
  g_usleep (G_USEC_PER_SEC / 20);
  g_assert_cmpint (g_atomic_int_get (&c.closed), ==, 0);
  engine_barrier_leave (&b);
  while (!g_atomic_int_get (&c.closed))
    g_usleep (1000);
  /* a write arriving now waits as a ring operation, run once it opens
   * with the barrier entered on its behalf: a step closing it again at
   * once waits for it */
  if (engine_barrier_try_enter (&b, &waiter.w))
    g_assert_true (g_atomic_int_get (&c.opened));
  else
    {
      while (!waiter.woken)
        g_assert_cmpint (vb_ring_run (ring, TRUE), >=, 0);
      g_assert_true (g_atomic_int_get (&c.opened));
      g_mutex_lock (&b.lock);
      g_assert_cmpuint (b.writers, ==, 1);
      g_mutex_unlock (&b.lock);
    }
  engine_barrier_leave (&b);
  g_thread_join (t);
  engine_barrier_clear (&b);
  vb_ring_free (ring);
}

/* --- requests on one ring --------------------------------------------------- */

/* Leg 1 may be served in process, its flushes failing on demand. */
typedef struct {
  int fd;
  gint fail_flush; /* atomic */
  gint flushes;    /* atomic */
} InProcessLeg;

static guint64
ip_size (void *handle)
{
  return LEG_SIZE;
}

static guint32
ip_block_size (void *handle)
{
  return 512;
}

static gboolean
ip_false (void *handle)
{
  return FALSE;
}

static int
ip_pread (void *handle, void *buf, guint64 length, guint64 offset)
{
  InProcessLeg *leg = handle;
  return pread (leg->fd, buf, length, offset) == (gssize) length ? 0 : -EIO;
}

static int
ip_pwrite (void *handle, const void *buf, guint64 length, guint64 offset, gboolean fua)
{
  InProcessLeg *leg = handle;
  return pwrite (leg->fd, buf, length, offset) == (gssize) length ? 0 : -EIO;
}

static int
ip_flush (void *handle)
{
  InProcessLeg *leg = handle;
  g_atomic_int_inc (&leg->flushes);
  return g_atomic_int_get (&leg->fail_flush) ? -EIO : 0;
}

static const VbBlockOps in_process_ops = {
  .size = ip_size,
  .block_size = ip_block_size,
  .read_only = ip_false,
  .can_multi_conn = ip_false,
  .pread = ip_pread,
  .pwrite = ip_pwrite,
  .flush = ip_flush,
};

typedef struct {
  char *dir;
  char *paths[2];
  InProcessLeg leg1;
  VbRing *ring;
  void *registered; /* memory registered with the ring: freed after it */
} Fixture;

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  f->dir = g_dir_make_tmp ("vblk-engine-async-XXXXXX", NULL);
  g_assert_nonnull (f->dir);
  for (guint i = 0; i < 2; i++)
    {
      int fd;
      f->paths[i] = g_strdup_printf ("%s/leg%u.img", f->dir, i);
      fd = open (f->paths[i], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      g_assert_cmpint (fd, >=, 0);
      g_assert_cmpint (ftruncate (fd, LEG_SIZE), ==, 0);
      close (fd);
    }
  f->leg1.fd = open (f->paths[1], O_RDWR | O_CLOEXEC);
  g_assert_cmpint (f->leg1.fd, >=, 0);
  f->ring = vb_ring_new (32, NULL);
  g_assert_nonnull (f->ring);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  vb_ring_free (f->ring);
  free (f->registered);
  close (f->leg1.fd);
  for (guint i = 0; i < 2; i++)
    {
      g_unlink (f->paths[i]);
      g_free (f->paths[i]);
    }
  g_rmdir (f->dir);
  g_free (f->dir);
}

/* A raid1 of the two legs (leg 1 in process when @in_process), with the
 * superblocks and a bitmap of 1 MiB chunks: the first write to a chunk
 * goes through the slow lane, the next ones not. */
static VbEngine *
raid1_new (Fixture *f, gboolean in_process)
{
  g_autoptr (GHashTable) given = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GHashTable) attributes = NULL;
  g_autoptr (GError) error = NULL;
  VbEngineSource sources[2] = { { f->paths[0], NULL, NULL }, { f->paths[1], NULL, NULL } };
  VbComponentInfo infos[2] = { { f->paths[0], VB_COMPONENT_KIND_FILE, LEG_SIZE - DATA_OFFSET },
                               { f->paths[1], VB_COMPONENT_KIND_FILE, LEG_SIZE - DATA_OFFSET } };
  VbEngineIdentity id = { device_uuid, leg_uuids, 0, NULL, NULL };
  VbEngine *e;

  if (in_process)
    sources[1] = (VbEngineSource){ f->paths[1], &in_process_ops, &f->leg1 };
  g_hash_table_insert (given, "bitmap_chunk", "1M");
  attributes = vb_driver_resolve_attributes (vb_driver_lookup ("raid1"), NULL, given, NULL);
  e = vb_engine_new ("a", vb_driver_lookup ("raid1"), attributes, 2, sources, infos, &id, FALSE,
                     &error);
  g_assert_no_error (error);
  /* (the initial resync is not started: nothing was written yet) */
  return e;
}

typedef struct {
  VbEngineIo io;
  guint completions;
  int res;
  guint8 *buf;
} Request;

static void
on_done (VbEngineIo *io, int res)
{
  Request *r = (Request *) io;

  r->completions++;
  r->res = res;
}

static void
request_init (Request *r, VbEngineIoKind kind, guint64 offset, guint64 length)
{
  vb_engine_io_init (&r->io);
  r->io.kind = kind;
  r->io.offset = offset;
  r->io.length = length;
  r->io.done = on_done;
  r->completions = 0;
  r->res = 1;
  if (length > 0 && r->buf == NULL)
    g_assert_cmpint (posix_memalign ((void **) &r->buf, 4096, length), ==, 0);
  r->io.buf = r->buf;
}

static void
request_clear (Request *r)
{
  vb_engine_io_clear (&r->io);
  free (r->buf);
  r->buf = NULL;
}

/* Runs the ring until every request of @rs has completed once. */
static void
run_until_done (Fixture *f, Request *rs, guint n)
{
  gint64 until = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;

  for (;;)
    {
      guint finished = 0;
      for (guint i = 0; i < n; i++)
        {
          g_assert_cmpuint (rs[i].completions, <=, 1);
          finished += rs[i].completions;
        }
      if (finished == n)
        break;
      g_assert_cmpint (g_get_monotonic_time (), <, until);
      g_assert_cmpint (vb_ring_run (f->ring, TRUE), >=, 0);
    }
  /* nothing completes twice, even later */
  g_assert_cmpint (vb_ring_run (f->ring, FALSE), ==, 0);
  for (guint i = 0; i < n; i++)
    g_assert_cmpuint (rs[i].completions, ==, 1);
}

/* Block @i's place: spread over the device, two per bitmap chunk. */
static guint64
block_offset (guint i)
{
  return (guint64) (i % 7) * (1u << 20) + (guint64) i * 3 * BLOCK;
}

static void
test_many_in_flight (Fixture *f, gconstpointer data)
{
  VbEngine *e = raid1_new (f, FALSE);
  Request writes[IN_FLIGHT] = { 0 }, reads[IN_FLIGHT] = { 0 };

  for (guint i = 0; i < IN_FLIGHT; i++)
    {
      request_init (&writes[i], VB_ENGINE_IO_WRITE, block_offset (i), 2 * BLOCK);
      memset (writes[i].buf, 0x40 + i, 2 * BLOCK);
      vb_engine_submit (e, f->ring, &writes[i].io);
    }
  run_until_done (f, writes, IN_FLIGHT);
  for (guint i = 0; i < IN_FLIGHT; i++)
    {
      g_assert_cmpint (writes[i].res, ==, 0);
      request_init (&reads[i], VB_ENGINE_IO_READ, block_offset (i), 2 * BLOCK);
      vb_engine_submit (e, f->ring, &reads[i].io);
    }
  run_until_done (f, reads, IN_FLIGHT);
  for (guint i = 0; i < IN_FLIGHT; i++)
    {
      g_assert_cmpint (reads[i].res, ==, 0);
      g_assert_cmpmem (reads[i].buf, 2 * BLOCK, writes[i].buf, 2 * BLOCK);
    }
  vb_engine_free (e);
  /* both legs hold every write */
  for (guint leg = 0; leg < 2; leg++)
    {
      int fd = open (f->paths[leg], O_RDONLY | O_CLOEXEC);
      g_autofree guint8 *back = g_malloc (2 * BLOCK);
      for (guint i = 0; i < IN_FLIGHT; i++)
        {
          g_assert_cmpint (pread (fd, back, 2 * BLOCK, DATA_OFFSET + block_offset (i)), ==,
                           2 * BLOCK);
          g_assert_cmpmem (back, 2 * BLOCK, writes[i].buf, 2 * BLOCK);
        }
      close (fd);
    }
  for (guint i = 0; i < IN_FLIGHT; i++)
    {
      request_clear (&writes[i]);
      request_clear (&reads[i]);
    }
}

/* The serving thread's registered buffer (io_uring's fixed buffers): I/O
 * whose data lies in it goes as READ_FIXED/WRITE_FIXED (counted by the
 * ring), data outside it as plain reads and writes, and both land on
 * both legs unchanged. */
static void
test_registered_buffer (Fixture *f, gconstpointer data)
{
  enum { N = 16, LEN = 2 * BLOCK };
  VbEngine *e = raid1_new (f, FALSE);
  Request writes[N] = { 0 }, reads[N] = { 0 }, outside = { 0 };
  guint8 *region = NULL;
  int r;

  g_assert_cmpint (posix_memalign ((void **) &region, 4096, 2 * N * LEN), ==, 0);
  f->registered = region;
  /* not registered yet: nothing is fixed */
  g_assert_cmpint (vb_ring_buffer_index (f->ring, region, LEN), ==, -1);
  r = vb_ring_register_buffer (f->ring, region, 2 * N * LEN);
  if (r == -ENOMEM || r == -EPERM)
    {
      /* a memlock limit below 256 KiB */
      g_test_skip ("io_uring cannot register 256 KiB here");
      vb_engine_free (e);
      return;
    }
  g_assert_cmpint (r, ==, 0);
  /* the bounds: all of the range inside, or not fixed */
  g_assert_cmpint (vb_ring_buffer_index (f->ring, region + 2 * N * LEN - LEN, LEN), ==, 0);
  g_assert_cmpint (vb_ring_buffer_index (f->ring, region + 2 * N * LEN - LEN + 1, LEN), ==, -1);
  g_assert_cmpint (vb_ring_buffer_index (f->ring, region - 1, LEN), ==, -1);
  g_assert_cmpint (vb_ring_buffer_index (f->ring, region, 2 * N * LEN + 1), ==, -1);
  g_assert_cmpuint (vb_ring_fixed_count (f->ring), ==, 1);

  for (guint i = 0; i < N; i++)
    {
      writes[i].buf = region + (gsize) i * LEN;
      request_init (&writes[i], VB_ENGINE_IO_WRITE, block_offset (i), LEN);
      memset (writes[i].buf, 0x20 + i, LEN);
      vb_engine_submit (e, f->ring, &writes[i].io);
    }
  run_until_done (f, writes, N);
  for (guint i = 0; i < N; i++)
    {
      g_assert_cmpint (writes[i].res, ==, 0);
      reads[i].buf = region + (gsize) (N + i) * LEN;
      request_init (&reads[i], VB_ENGINE_IO_READ, block_offset (i), LEN);
      memset (reads[i].buf, 0, LEN);
      vb_engine_submit (e, f->ring, &reads[i].io);
    }
  run_until_done (f, reads, N);
  /* a write to each leg and a read, each through the registered buffer */
  g_assert_cmpuint (vb_ring_fixed_count (f->ring), ==, 1 + 3 * N);
  for (guint i = 0; i < N; i++)
    {
      g_assert_cmpint (reads[i].res, ==, 0);
      g_assert_cmpmem (reads[i].buf, LEN, writes[i].buf, LEN);
    }
  /* memory of the caller's own, outside the registered buffer */
  request_init (&outside, VB_ENGINE_IO_READ, block_offset (3), LEN);
  vb_engine_submit (e, f->ring, &outside.io);
  run_until_done (f, &outside, 1);
  g_assert_cmpint (outside.res, ==, 0);
  g_assert_cmpmem (outside.buf, LEN, writes[3].buf, LEN);
  g_assert_cmpuint (vb_ring_fixed_count (f->ring), ==, 1 + 3 * N);
  vb_engine_free (e);
  for (guint leg = 0; leg < 2; leg++)
    {
      int fd = open (f->paths[leg], O_RDONLY | O_CLOEXEC);
      g_autofree guint8 *back = g_malloc (LEN);
      for (guint i = 0; i < N; i++)
        {
          g_assert_cmpint (pread (fd, back, LEN, DATA_OFFSET + block_offset (i)), ==, LEN);
          g_assert_cmpmem (back, LEN, writes[i].buf, LEN);
        }
      close (fd);
    }
  for (guint i = 0; i < N; i++)
    {
      writes[i].buf = reads[i].buf = NULL;
      request_clear (&writes[i]);
      request_clear (&reads[i]);
    }
  request_clear (&outside);
}

/* The last warning the engine reported. */
static char *last_warning;

static void
keep_warning (const char *subject, VbReportKind kind, const char *message, gpointer user_data)
{
  /* (and to the debug log, where reports go without a function) */
  g_debug ("%s: %s", subject, message);
  if (kind != VB_REPORT_WARNING)
    return;
  g_free (last_warning);
  last_warning = g_strdup_printf ("%s: %s", subject, message);
}

/* A request whose data is a kernel buffer (ublk zero copy) on an engine
 * with a component served in process, whose functions take memory: it is
 * refused whole, nothing is written and no leg fails; an engine of files
 * alone can take it. */
static void
test_kernel_buffer_refused (Fixture *f, gconstpointer data)
{
  VbEngine *files = raid1_new (f, FALSE);
  VbEngine *e;
  Request w = { 0 };
  guint8 back[BLOCK];
  int fd;

  g_assert_true (vb_engine_zero_copy_ok (files));
  vb_engine_free (files);
  e = raid1_new (f, TRUE);
  g_assert_false (vb_engine_zero_copy_ok (e));
  request_init (&w, VB_ENGINE_IO_WRITE, 1 << 20, BLOCK);
  w.io.kernel_buf = TRUE;
  w.io.kernel_buf_index = 0;
  g_clear_pointer (&last_warning, g_free);
  vb_engine_submit (e, f->ring, &w.io);
  run_until_done (f, &w, 1);
  g_assert_cmpint (w.res, ==, -EIO);
  g_assert_nonnull (last_warning);
  g_assert_nonnull (strstr (last_warning, "a: a request in a kernel buffer (zero copy)"));
  for (guint leg = 0; leg < 2; leg++)
    {
      g_assert_false (vb_engine_component_faulty (e, leg));
      g_assert_cmpuint (vb_engine_component_errors (e, leg), ==, 0);
    }
  vb_engine_free (e);
  for (guint leg = 0; leg < 2; leg++)
    {
      static const guint8 zero[BLOCK];
      fd = open (f->paths[leg], O_RDONLY | O_CLOEXEC);
      g_assert_cmpint (pread (fd, back, BLOCK, DATA_OFFSET + (1 << 20)), ==, BLOCK);
      g_assert_cmpmem (back, BLOCK, zero, BLOCK);
      close (fd);
    }
  request_clear (&w);
}

/* Leg 0's file cut short under its data: each read that goes to it comes
 * back short, is served from leg 1, and leg 0 counts as faulty from the
 * first one on. */
static void
test_read_fails_over (Fixture *f, gconstpointer data)
{
  VbEngine *e = raid1_new (f, FALSE);
  Request w = { 0 }, reads[8] = { 0 };

  request_init (&w, VB_ENGINE_IO_WRITE, 2 << 20, 8 * BLOCK);
  memset (w.buf, 0x6d, 8 * BLOCK);
  vb_engine_submit (e, f->ring, &w.io);
  run_until_done (f, &w, 1);
  g_assert_cmpint (w.res, ==, 0);
  g_assert_cmpint (truncate (f->paths[0], DATA_OFFSET + (2 << 20)), ==, 0);

  for (guint i = 0; i < G_N_ELEMENTS (reads); i++)
    {
      request_init (&reads[i], VB_ENGINE_IO_READ, (2 << 20) + i * BLOCK, BLOCK);
      vb_engine_submit (e, f->ring, &reads[i].io);
    }
  run_until_done (f, reads, G_N_ELEMENTS (reads));
  for (guint i = 0; i < G_N_ELEMENTS (reads); i++)
    {
      g_assert_cmpint (reads[i].res, ==, 0);
      g_assert_cmpmem (reads[i].buf, BLOCK, w.buf, BLOCK);
    }
  g_assert_true (vb_engine_component_faulty (e, 0));
  g_assert_false (vb_engine_component_faulty (e, 1));
  g_assert_cmpuint (vb_engine_component_errors (e, 0), >=, 1);
  vb_engine_free (e);
  request_clear (&w);
  for (guint i = 0; i < G_N_ELEMENTS (reads); i++)
    request_clear (&reads[i]);
}

/* A flush reaches the leg served in process too; its failure makes that
 * leg faulty and the flush still succeeds (leg 0 holds a copy); a faulty
 * leg is flushed no more. */
static void
test_flush (Fixture *f, gconstpointer data)
{
  VbEngine *e = raid1_new (f, TRUE);
  Request r = { 0 };
  /* (assembly flushed it too) */
  gint before = g_atomic_int_get (&f->leg1.flushes);

  request_init (&r, VB_ENGINE_IO_FLUSH, 0, 0);
  vb_engine_submit (e, f->ring, &r.io);
  run_until_done (f, &r, 1);
  g_assert_cmpint (r.res, ==, 0);
  g_assert_cmpint (g_atomic_int_get (&f->leg1.flushes), ==, before + 1);

  g_atomic_int_set (&f->leg1.fail_flush, 1);
  request_init (&r, VB_ENGINE_IO_FLUSH, 0, 0);
  vb_engine_submit (e, f->ring, &r.io);
  run_until_done (f, &r, 1);
  g_assert_cmpint (r.res, ==, 0);
  g_assert_true (vb_engine_component_faulty (e, 1));
  g_assert_false (vb_engine_component_faulty (e, 0));

  /* the last copy is not failed on request; a faulty leg is not flushed */
  g_assert_cmpint (vb_engine_set_faulty (e, 0), ==, -EBUSY);
  request_init (&r, VB_ENGINE_IO_FLUSH, 0, 0);
  vb_engine_submit (e, f->ring, &r.io);
  run_until_done (f, &r, 1);
  g_assert_cmpint (r.res, ==, 0);
  g_assert_cmpint (g_atomic_int_get (&f->leg1.flushes), ==, before + 2);
  vb_engine_free (e);
  request_clear (&r);
}

/* The fault injector's delay waits in the ring: every request is
 * submitted at once and they wait together, none sleeping the thread. */
#define DELAY_US 300000

static void
test_delay_in_ring (Fixture *f, gconstpointer data)
{
  g_autoptr (GHashTable) given = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GHashTable) attributes = NULL;
  g_autoptr (GError) error = NULL;
  VbEngineSource source = { f->paths[0], NULL, NULL };
  VbComponentInfo info = { f->paths[0], VB_COMPONENT_KIND_FILE, LEG_SIZE };
  Request reads[IN_FLIGHT] = { 0 };
  gint64 start, submitted;
  VbEngine *e;

  g_hash_table_insert (given, "delay_us", G_STRINGIFY (DELAY_US));
  attributes = vb_driver_resolve_attributes (vb_driver_lookup ("faulty"), NULL, given, &error);
  g_assert_no_error (error);
  e = vb_engine_new ("slow", vb_driver_lookup ("faulty"), attributes, 1, &source, &info, NULL,
                     FALSE, &error);
  g_assert_no_error (error);
  start = g_get_monotonic_time ();
  for (guint i = 0; i < IN_FLIGHT; i++)
    {
      request_init (&reads[i], VB_ENGINE_IO_READ, block_offset (i), BLOCK);
      vb_engine_submit (e, f->ring, &reads[i].io);
    }
  submitted = g_get_monotonic_time ();
  run_until_done (f, reads, IN_FLIGHT);
  /* one delay for all (sleeping would have taken IN_FLIGHT of them before
   * the last submission returned), and none cut short */
  g_assert_cmpint (submitted - start, <, DELAY_US);
  g_assert_cmpint (g_get_monotonic_time () - start, >=, DELAY_US);
  for (guint i = 0; i < IN_FLIGHT; i++)
    {
      g_assert_cmpint (reads[i].res, ==, 0);
      request_clear (&reads[i]);
    }
  vb_engine_free (e);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  vb_report_set_func (keep_warning, NULL);
  g_test_add_func ("/engine-async/ring/post", test_ring_post);
  g_test_add_func ("/engine-async/barrier", test_barrier);
#define ADD(path, fn) g_test_add (path, Fixture, NULL, fixture_set_up, fn, fixture_tear_down)
  ADD ("/engine-async/many-in-flight", test_many_in_flight);
  ADD ("/engine-async/registered-buffer", test_registered_buffer);
  ADD ("/engine-async/kernel-buffer-refused", test_kernel_buffer_refused);
  ADD ("/engine-async/read-fails-over", test_read_fails_over);
  ADD ("/engine-async/flush", test_flush);
  ADD ("/engine-async/delay-in-ring", test_delay_in_ring);
  return g_test_run ();
}
