/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine's jobs without a bitmap: after an unclean stop nothing says
 * where the copies differ, so whichever job runs next must make every copy
 * equal, not only fill the slot it rebuilds. Two ways a rebuild comes
 * first: the power went while a slot was being rebuilt (the next start
 * rebuilds it, and that rebuild is the only job), and a re-add cuts the
 * start's resync short. Each on raid1 (three legs) and raid10 (four legs,
 * two copies), whose legs 0 and 1 hold the same data at the same place.
 * A copy differing between legs 0 and 1 is made by hand, as a write that
 * reached one leg when the power went; when the job ends, the two legs
 * must be equal (the torture test found the rebuild leaving them apart:
 * seed 1050607067, raid10, bitmap none). */
#include "config.h"

#include "engine.h"
#include "vb-error.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LEG_SIZE (8u << 20)
#define DATA_OFFSET (1u << 20)
#define MAX_LEGS 4
#define PIECE 65536

static const char *const device_uuid = "3d2e6a91-5c0b-4f7e-8a21-7b9c4d0e1f52";
static const char *const leg_uuids[]
    = { "a0000000-0000-4000-8000-000000000001", "a0000000-0000-4000-8000-000000000002",
        "a0000000-0000-4000-8000-000000000003", "a0000000-0000-4000-8000-000000000004", NULL };

typedef struct {
  const char *driver;
  guint n;
} Layout;

static const Layout raid1 = { "raid1", 3 };
static const Layout raid10 = { "raid10", 4 };

typedef struct {
  const Layout *layout;
  char *dir;
  char *paths[MAX_LEGS];
  GMutex lock;
  GCond cond;
  VbEngineJobState state;
  char operation[16];
} Fixture;

static void
on_job (VbEngine *engine, const VbEngineJob *job, gpointer data)
{
  Fixture *f = data;

  g_mutex_lock (&f->lock);
  f->state = job->state;
  g_strlcpy (f->operation, job->operation, sizeof f->operation);
  g_cond_broadcast (&f->cond);
  g_mutex_unlock (&f->lock);
}

/* Waits for the last job reported to end; asserts that it was @operation
 * and that it ran to its end. */
static void
wait_finished (Fixture *f, const char *operation)
{
  gint64 until = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;

  g_mutex_lock (&f->lock);
  while (f->state == VB_ENGINE_JOB_RUNNING)
    g_assert_true (g_cond_wait_until (&f->cond, &f->lock, until));
  g_assert_cmpstr (f->operation, ==, operation);
  g_assert_cmpint (f->state, ==, VB_ENGINE_JOB_FINISHED);
  g_mutex_unlock (&f->lock);
}

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  f->layout = data;
  f->dir = g_dir_make_tmp ("vblk-engine-sync-XXXXXX", NULL);
  g_assert_nonnull (f->dir);
  for (guint i = 0; i < f->layout->n; i++)
    {
      int fd;
      f->paths[i] = g_strdup_printf ("%s/leg%u.img", f->dir, i);
      fd = open (f->paths[i], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      g_assert_cmpint (fd, >=, 0);
      g_assert_cmpint (ftruncate (fd, LEG_SIZE), ==, 0);
      close (fd);
    }
  g_mutex_init (&f->lock);
  g_cond_init (&f->cond);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  for (guint i = 0; i < f->layout->n; i++)
    {
      g_unlink (f->paths[i]);
      g_free (f->paths[i]);
    }
  g_rmdir (f->dir);
  g_free (f->dir);
  g_mutex_clear (&f->lock);
  g_cond_clear (&f->cond);
}

/* No bitmap; @speed: sync_speed_max ("0": no limit). */
static GHashTable *
attributes (Fixture *f, const char *speed)
{
  g_autoptr (GHashTable) given = g_hash_table_new (g_str_hash, g_str_equal);
  GHashTable *out;

  g_hash_table_insert (given, "bitmap", "none");
  g_hash_table_insert (given, "sync_speed_max", (char *) speed);
  if (strcmp (f->layout->driver, "raid10") == 0)
    g_hash_table_insert (given, "chunk_size", "64K");
  out = vb_driver_resolve_attributes (vb_driver_lookup (f->layout->driver), NULL, given, NULL);
  g_assert_nonnull (out);
  return out;
}

static VbEngine *
engine_new (Fixture *f, const char *speed)
{
  g_autoptr (GHashTable) attrs = attributes (f, speed);
  g_autoptr (GError) error = NULL;
  VbEngineSource sources[MAX_LEGS] = { 0 };
  VbComponentInfo infos[MAX_LEGS] = { 0 };
  VbEngineIdentity id = { device_uuid, leg_uuids, 0, NULL, NULL };
  VbEngine *e;

  for (guint i = 0; i < f->layout->n; i++)
    {
      sources[i].path = f->paths[i];
      infos[i] = (VbComponentInfo){ f->paths[i], VB_COMPONENT_KIND_FILE, LEG_SIZE - DATA_OFFSET };
    }
  e = vb_engine_new ("s", vb_driver_lookup (f->layout->driver), attrs, f->layout->n, sources, infos,
                     &id, FALSE, &error);
  g_assert_no_error (error);
  vb_engine_set_job_func (e, on_job, f);
  g_mutex_lock (&f->lock);
  f->state = VB_ENGINE_JOB_FINISHED;
  f->operation[0] = '\0';
  g_mutex_unlock (&f->lock);
  return e;
}

static void
set_speed (VbEngine *e, Fixture *f, const char *speed)
{
  g_autoptr (GHashTable) attrs = attributes (f, speed);

  vb_engine_update (e, attrs);
}

/* The last slot put back (failed first when @fail): a full rebuild, no
 * bitmap saying otherwise. */
static void
readd_last (VbEngine *e, Fixture *f, gboolean fail)
{
  guint last = f->layout->n - 1;
  VbEngineSource source = { f->paths[last], NULL, NULL };
  g_autoptr (GError) error = NULL;

  if (fail)
    g_assert_cmpint (vb_engine_set_faulty (e, last), ==, 0);
  g_assert_true (vb_engine_component_faulty (e, last));
  g_assert_cmpint (vb_engine_readd (e, last, &source, NULL, &error), ==, 0);
  g_assert_no_error (error);
  g_assert_true (vb_engine_component_rebuilding (e, last));
}

static void
put (const char *path, guint64 offset, int byte)
{
  char buf[PIECE];
  int fd = open (path, O_WRONLY | O_CLOEXEC);

  g_assert_cmpint (fd, >=, 0);
  memset (buf, byte, sizeof buf);
  g_assert_cmpint (pwrite (fd, buf, sizeof buf, DATA_OFFSET + offset), ==, sizeof buf);
  g_assert_cmpint (fsync (fd), ==, 0);
  close (fd);
}

/* What a write cut by the power left: legs 0 and 1 (copies of one
 * another in both layouts) differ at @offset of their data areas. */
static void
make_copies_differ (Fixture *f, guint64 offset)
{
  put (f->paths[0], offset, 0xa1);
  put (f->paths[1], offset, 0xb2);
}

static void
assert_copies_equal (Fixture *f)
{
  gsize l0, l1;
  g_autofree char *leg0 = NULL;
  g_autofree char *leg1 = NULL;

  g_assert_true (g_file_get_contents (f->paths[0], &leg0, &l0, NULL));
  g_assert_true (g_file_get_contents (f->paths[1], &leg1, &l1, NULL));
  g_assert_cmpuint (l0, ==, LEG_SIZE);
  g_assert_cmpuint (l1, ==, LEG_SIZE);
  /* (superblocks differ: each names its own component) */
  g_assert_cmpmem (leg0 + DATA_OFFSET, l0 - DATA_OFFSET, leg1 + DATA_OFFSET, l1 - DATA_OFFSET);
}

/* The power goes while the last slot is being rebuilt, after a write
 * reached leg 0 and not leg 1: the next start's rebuild is its only job. */
static void
test_rebuild_after_unclean_stop (Fixture *f, gconstpointer data)
{
  VbEngine *e = engine_new (f, "0");

  vb_engine_activate (e);
  wait_finished (f, "resync");
  set_speed (e, f, "256K");
  readd_last (e, f, TRUE);
  vb_engine_free_unclean (e);
  make_copies_differ (f, 0);

  e = engine_new (f, "0");
  g_assert_true (vb_engine_component_rebuilding (e, f->layout->n - 1));
  vb_engine_activate (e);
  wait_finished (f, "rebuild");
  vb_engine_free (e);
  assert_copies_equal (f);
}

/* The start after an unclean stop resyncs (slowly); a re-add stops that
 * resync before it reaches where legs 0 and 1 differ, and the rebuild it
 * starts takes over. */
static void
test_readd_cuts_resync_short (Fixture *f, gconstpointer data)
{
  VbEngine *e = engine_new (f, "0");

  vb_engine_activate (e);
  wait_finished (f, "resync");
  g_assert_cmpint (vb_engine_set_faulty (e, f->layout->n - 1), ==, 0);
  vb_engine_free_unclean (e);
  make_copies_differ (f, LEG_SIZE - DATA_OFFSET - 2 * PIECE);

  e = engine_new (f, "256K");
  vb_engine_activate (e);
  g_mutex_lock (&f->lock);
  g_assert_cmpstr (f->operation, ==, "resync");
  g_assert_cmpint (f->state, ==, VB_ENGINE_JOB_RUNNING);
  g_mutex_unlock (&f->lock);
  readd_last (e, f, FALSE);
  set_speed (e, f, "0");
  wait_finished (f, "rebuild");
  vb_engine_free (e);
  assert_copies_equal (f);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(path, layout, fn)                                                                      \
  g_test_add (path, Fixture, &layout, fixture_set_up, fn, fixture_tear_down)
  ADD ("/engine-sync/raid1/rebuild-after-unclean-stop", raid1, test_rebuild_after_unclean_stop);
  ADD ("/engine-sync/raid10/rebuild-after-unclean-stop", raid10, test_rebuild_after_unclean_stop);
  ADD ("/engine-sync/raid1/readd-cuts-resync-short", raid1, test_readd_cuts_resync_short);
  ADD ("/engine-sync/raid10/readd-cuts-resync-short", raid10, test_readd_cuts_resync_short);
  return g_test_run ();
}
