/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine switch (suspend / swap / resume) without a daemon or root:
 * engines over components served in process whose requests can be held
 * at a gate and whose flushes can fail. Checks that a suspend waits for
 * requests in flight and gives up after its timeout (nothing changed,
 * requests go on), that it flushes what was acknowledged before the swap
 * (and a failed flush leaves the old engine running), that requests
 * arriving while suspended are held and then go to the new engine (while
 * the size and block size are answered at once), and
 * that writers running through many swaps lose or misplace nothing. */
#include "config.h"

#include "engine-switch.h"
#include "engine.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#define SIZE (4u << 20)
#define BLOCK 4096u

/* A component in process over a file: requests wait while the gate is
 * closed; flushes are counted and fail on demand. */
typedef struct {
  int fd;
  GMutex lock;
  GCond cond;
  gboolean closed;
  guint waiting;
  gint flushes;    /* atomic */
  gint fail_flush; /* atomic */
} Gate;

static void
gate_pass (Gate *g)
{
  g_mutex_lock (&g->lock);
  g->waiting++;
  g_cond_broadcast (&g->cond);
  while (g->closed)
    g_cond_wait (&g->cond, &g->lock);
  g->waiting--;
  g_mutex_unlock (&g->lock);
}

static void
gate_set (Gate *g, gboolean closed)
{
  g_mutex_lock (&g->lock);
  g->closed = closed;
  g_cond_broadcast (&g->cond);
  g_mutex_unlock (&g->lock);
}

static void
gate_wait_waiting (Gate *g)
{
  g_mutex_lock (&g->lock);
  while (g->waiting == 0)
    g_cond_wait (&g->cond, &g->lock);
  g_mutex_unlock (&g->lock);
}

static guint64
gate_size (void *handle)
{
  return SIZE;
}

static guint32
gate_block_size (void *handle)
{
  return 512;
}

static gboolean
gate_read_only (void *handle)
{
  return FALSE;
}

static gboolean
gate_multi_conn (void *handle)
{
  return TRUE;
}

static int
gate_pread (void *handle, void *buf, guint64 length, guint64 offset)
{
  Gate *g = handle;
  gate_pass (g);
  return pread (g->fd, buf, length, offset) == (gssize) length ? 0 : -EIO;
}

static int
gate_pwrite (void *handle, const void *buf, guint64 length, guint64 offset, gboolean fua)
{
  Gate *g = handle;
  gate_pass (g);
  return pwrite (g->fd, buf, length, offset) == (gssize) length ? 0 : -EIO;
}

static int
gate_flush (void *handle)
{
  Gate *g = handle;
  g_atomic_int_inc (&g->flushes);
  return g_atomic_int_get (&g->fail_flush) ? -EIO : 0;
}

static int
gate_discard (void *handle, guint64 length, guint64 offset)
{
  return -EOPNOTSUPP;
}

static const VbBlockOps gate_ops = {
  .size = gate_size,
  .block_size = gate_block_size,
  .read_only = gate_read_only,
  .can_multi_conn = gate_multi_conn,
  .pread = gate_pread,
  .pwrite = gate_pwrite,
  .flush = gate_flush,
  .discard = gate_discard,
  .write_zeroes = NULL,
};

typedef struct {
  char *dir;
  char *paths[2];
  Gate gates[2];
} Fixture;

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  f->dir = g_dir_make_tmp ("vblk-switch-XXXXXX", &error);
  g_assert_no_error (error);
  for (guint i = 0; i < 2; i++)
    {
      f->paths[i] = g_strdup_printf ("%s/c%u", f->dir, i);
      f->gates[i].fd = open (f->paths[i], O_RDWR | O_CREAT | O_CLOEXEC, 0600);
      g_assert_cmpint (f->gates[i].fd, >=, 0);
      g_assert_cmpint (ftruncate (f->gates[i].fd, SIZE), ==, 0);
      g_mutex_init (&f->gates[i].lock);
      g_cond_init (&f->gates[i].cond);
    }
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  for (guint i = 0; i < 2; i++)
    {
      close (f->gates[i].fd);
      g_unlink (f->paths[i]);
      g_free (f->paths[i]);
      g_mutex_clear (&f->gates[i].lock);
      g_cond_clear (&f->gates[i].cond);
    }
  g_rmdir (f->dir);
  g_free (f->dir);
}

/* An engine of driver linear over one gated component. */
static VbEngine *
engine_over (Fixture *f, guint which)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GHashTable) attributes = g_hash_table_new (g_str_hash, g_str_equal);
  VbEngineSource source = { f->paths[which], &gate_ops, &f->gates[which] };
  VbComponentInfo info = { f->paths[which], VB_COMPONENT_KIND_DEVICE, SIZE, FALSE };
  VbEngineIdentity identity = { .uuid = "8d3f1c2e-6a5b-4c7d-8e9f-0a1b2c3d4e5f" };
  VbEngine *e = vb_engine_new ("switched", vb_driver_lookup ("linear"), attributes, 1, &source,
                               &info, &identity, FALSE, &error);

  g_assert_no_error (error);
  g_assert_nonnull (e);
  return e;
}

typedef struct {
  VbEngineSwitch *sw;
  guint64 offset;
  guint8 byte;
  int result;
  gint done; /* atomic */
} Write;

static gpointer
write_thread (gpointer data)
{
  Write *w = data;
  guint8 *buf = g_malloc (BLOCK);

  memset (buf, w->byte, BLOCK);
  w->result = vb_engine_switch_ops.pwrite (w->sw, buf, BLOCK, w->offset, FALSE);
  g_atomic_int_set (&w->done, 1);
  g_free (buf);
  return NULL;
}

typedef struct {
  VbEngineSwitch *sw;
  guint64 size;
  gint done; /* atomic */
} Ask;

static gpointer
ask_thread (gpointer data)
{
  Ask *a = data;

  a->size = vb_engine_switch_ops.size (a->sw);
  g_assert_cmpuint (vb_engine_switch_ops.block_size (a->sw), ==, 512);
  g_assert_false (vb_engine_switch_ops.read_only (a->sw));
  g_atomic_int_set (&a->done, 1);
  return NULL;
}

static guint8
byte_at (int fd, guint64 offset)
{
  guint8 b = 0;
  g_assert_cmpint (pread (fd, &b, 1, offset), ==, 1);
  return b;
}

/* A request in flight holds a suspend until its timeout; one arriving
 * while suspended waits and then goes to the new engine. */
static void
test_drain_hold_swap (Fixture *f, gconstpointer data)
{
  VbEngineSwitch *sw = vb_engine_switch_new (engine_over (f, 0));
  Write w1 = { sw, 0, 0x11, 1, 0 }, w2 = { sw, BLOCK, 0x22, 1, 0 };
  Ask a = { sw, 0, 0 };
  GThread *t1, *t2, *ask;
  VbEngine *old;
  gint flushes;
  gint64 held;

  /* a write stuck inside the component: the drain cannot finish */
  gate_set (&f->gates[0], TRUE);
  t1 = g_thread_new ("w1", write_thread, &w1);
  gate_wait_waiting (&f->gates[0]);
  g_assert_cmpint (vb_engine_switch_suspend (sw, 100), ==, -ETIMEDOUT);
  /* abandoned: nothing changed, and the write completes */
  gate_set (&f->gates[0], FALSE);
  g_thread_join (t1);
  g_assert_cmpint (w1.result, ==, 0);
  g_assert_cmpuint (byte_at (f->gates[0].fd, 0), ==, 0x11);

  /* drained: what was acknowledged is flushed before the swap */
  flushes = g_atomic_int_get (&f->gates[0].flushes);
  g_assert_cmpint (vb_engine_switch_suspend (sw, 1000), ==, 0);
  g_assert_cmpint (g_atomic_int_get (&f->gates[0].flushes), >, flushes);
  t2 = g_thread_new ("w2", write_thread, &w2);
  g_usleep (100000);
  g_assert_false (g_atomic_int_get (&w2.done)); /* held */
  /* what a serving thread asks of each request is answered meanwhile:
   * waiting would keep it from completing what the suspend waits for */
  ask = g_thread_new ("ask", ask_thread, &a);
  for (guint i = 0; i < 200 && !g_atomic_int_get (&a.done); i++)
    g_usleep (10000);
  g_assert_true (g_atomic_int_get (&a.done));
  g_thread_join (ask);
  g_assert_cmpuint (a.size, ==, SIZE);
  old = vb_engine_switch_replace (sw, engine_over (f, 1));
  held = vb_engine_switch_resume (sw);
  g_thread_join (t2);
  g_assert_cmpint (w2.result, ==, 0);
  g_assert_cmpint (held, >=, 100000);
  /* the held write went to the new engine's component only */
  g_assert_cmpuint (byte_at (f->gates[1].fd, BLOCK), ==, 0x22);
  g_assert_cmpuint (byte_at (f->gates[0].fd, BLOCK), ==, 0);
  vb_engine_free (old);
  vb_engine_switch_free (sw);
}

/* A flush that fails before the swap: the suspend fails, the old engine
 * goes on and requests are not held. */
static void
test_flush_fails (Fixture *f, gconstpointer data)
{
  VbEngineSwitch *sw = vb_engine_switch_new (engine_over (f, 0));
  Write w = { sw, 0, 0x33, 1, 0 };
  GThread *t;

  g_atomic_int_set (&f->gates[0].fail_flush, 1);
  g_assert_cmpint (vb_engine_switch_suspend (sw, 1000), ==, -EIO);
  g_atomic_int_set (&f->gates[0].fail_flush, 0);
  t = g_thread_new ("w", write_thread, &w);
  g_thread_join (t);
  g_assert_cmpint (w.result, ==, 0);
  g_assert_cmpuint (byte_at (f->gates[0].fd, 0), ==, 0x33);
  /* a later suspend works */
  g_assert_cmpint (vb_engine_switch_suspend (sw, 1000), ==, 0);
  g_assert_cmpint (vb_engine_switch_resume (sw), >=, 0);
  vb_engine_switch_free (sw);
}

/* Writers through 50 swaps between two engines over the same file: every
 * block holds what was last written to it. */
#define WRITERS 4
#define ROUNDS 400

typedef struct {
  VbEngineSwitch *sw;
  guint id;
  guint8 last[SIZE / BLOCK / WRITERS];
  int errors;
} Writer;

static gpointer
writer_thread (gpointer data)
{
  Writer *w = data;
  guint8 *buf = g_malloc (BLOCK);
  GRand *rand = g_rand_new_with_seed (w->id);
  guint blocks = G_N_ELEMENTS (w->last);

  for (guint r = 0; r < ROUNDS; r++)
    {
      guint i = g_rand_int_range (rand, 0, blocks);
      guint8 value = (guint8) g_rand_int_range (rand, 1, 256);
      guint64 offset = ((guint64) i * WRITERS + w->id) * BLOCK;
      memset (buf, value, BLOCK);
      if (vb_engine_switch_ops.pwrite (w->sw, buf, BLOCK, offset, r % 7 == 0) < 0)
        w->errors++;
      else
        w->last[i] = value;
      if (r % 50 == 0 && vb_engine_switch_ops.flush (w->sw) < 0)
        w->errors++;
    }
  g_rand_free (rand);
  g_free (buf);
  return NULL;
}

static void
test_writers_through_swaps (Fixture *f, gconstpointer data)
{
  VbEngineSwitch *sw;
  Writer writers[WRITERS];
  GThread *threads[WRITERS];
  guint8 *buf = g_malloc (BLOCK);
  guint swaps = 0;

  /* both gates over the first file: two engines, one component */
  close (f->gates[1].fd);
  f->gates[1].fd = dup (f->gates[0].fd);
  sw = vb_engine_switch_new (engine_over (f, 0));
  for (guint i = 0; i < WRITERS; i++)
    {
      memset (&writers[i], 0, sizeof writers[i]);
      writers[i].sw = sw;
      writers[i].id = i;
      threads[i] = g_thread_new ("writer", writer_thread, &writers[i]);
    }
  for (; swaps < 50; swaps++)
    {
      g_assert_cmpint (vb_engine_switch_suspend (sw, 5000), ==, 0);
      vb_engine_free (vb_engine_switch_replace (sw, engine_over (f, (swaps + 1) % 2)));
      vb_engine_switch_resume (sw);
      g_usleep (1000);
    }
  for (guint i = 0; i < WRITERS; i++)
    g_thread_join (threads[i]);
  for (guint i = 0; i < WRITERS; i++)
    {
      g_assert_cmpint (writers[i].errors, ==, 0);
      for (guint b = 0; b < G_N_ELEMENTS (writers[i].last); b++)
        {
          guint64 offset = ((guint64) b * WRITERS + i) * BLOCK;
          g_assert_cmpint (vb_engine_switch_ops.pread (sw, buf, BLOCK, offset), ==, 0);
          g_assert_cmpuint (buf[0], ==, writers[i].last[b]);
          g_assert_cmpuint (buf[BLOCK - 1], ==, writers[i].last[b]);
        }
    }
  g_free (buf);
  vb_engine_switch_free (sw);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/engine-switch/drain-hold-swap", Fixture, NULL, fixture_set_up, test_drain_hold_swap,
              fixture_tear_down);
  g_test_add ("/engine-switch/flush-fails", Fixture, NULL, fixture_set_up, test_flush_fails,
              fixture_tear_down);
  g_test_add ("/engine-switch/writers-through-swaps", Fixture, NULL, fixture_set_up,
              test_writers_through_swaps, fixture_tear_down);
  return g_test_run ();
}
