/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the engine says is allocated (vb_engine_extents, the NBD export's
 * block status) on sparse files: a raid1 with vblk's metadata (the data
 * area from 1 MiB: the superblock is not what device offset 0 shows), all
 * data until its first resync made the copies equal, then a hole only
 * where every copy a read may take is a hole (a leg with data makes it
 * data, until that leg fails), and raid0's chunks on their legs. */
#include "config.h"

#include "engine.h"
#include "vb-error.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#define LEG_SIZE (8u << 20)
#define DATA_OFFSET (1u << 20)
#define HOLE_ZERO (VB_EXTENT_HOLE | VB_EXTENT_ZERO)

static const char *const device_uuid = "6f1c2b3a-4d5e-4f60-8a71-92b3c4d5e6f7";
static const char *const leg_uuids[]
    = { "b0000000-0000-4000-8000-000000000001", "b0000000-0000-4000-8000-000000000002", NULL };

typedef struct {
  char *dir;
  char *paths[2];
  GMutex lock;
  GCond cond;
  guint ended; /* jobs that ended */
} Fixture;

static void
on_job (VbEngine *engine, const VbEngineJob *job, gpointer data)
{
  Fixture *f = data;

  g_mutex_lock (&f->lock);
  if (job->state != VB_ENGINE_JOB_RUNNING)
    {
      g_assert_cmpint (job->state, ==, VB_ENGINE_JOB_FINISHED);
      f->ended++;
      g_cond_broadcast (&f->cond);
    }
  g_mutex_unlock (&f->lock);
}

static void
wait_job_ended (Fixture *f)
{
  gint64 until = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;

  g_mutex_lock (&f->lock);
  while (f->ended == 0)
    g_assert_true (g_cond_wait_until (&f->cond, &f->lock, until));
  g_mutex_unlock (&f->lock);
}

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_mutex_init (&f->lock);
  g_cond_init (&f->cond);
  f->dir = g_dir_make_tmp ("vblk-engine-extents-XXXXXX", NULL);
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
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  for (guint i = 0; i < 2; i++)
    {
      g_unlink (f->paths[i]);
      g_free (f->paths[i]);
    }
  g_rmdir (f->dir);
  g_free (f->dir);
  g_mutex_clear (&f->lock);
  g_cond_clear (&f->cond);
}

/* @driver over both legs with @attrs (NAME, VALUE, ..., NULL). */
static VbEngine *
engine_new (Fixture *f, const char *driver, guint64 data_size, ...)
{
  g_autoptr (GHashTable) given = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GHashTable) attributes = NULL;
  g_autoptr (GError) error = NULL;
  VbEngineSource sources[2] = { { f->paths[0], NULL, NULL }, { f->paths[1], NULL, NULL } };
  VbComponentInfo infos[2] = { { f->paths[0], VB_COMPONENT_KIND_FILE, data_size },
                               { f->paths[1], VB_COMPONENT_KIND_FILE, data_size } };
  VbEngineIdentity id = { device_uuid, leg_uuids, 0, NULL, NULL };
  const char *name;
  VbEngine *e;
  va_list ap;

  va_start (ap, data_size);
  while ((name = va_arg (ap, const char *)) != NULL)
    g_hash_table_insert (given, (char *) name, va_arg (ap, char *));
  va_end (ap);
  attributes = vb_driver_resolve_attributes (vb_driver_lookup (driver), NULL, given, &error);
  g_assert_no_error (error);
  e = vb_engine_new ("x", vb_driver_lookup (driver), attributes, 2, sources, infos, &id, FALSE,
                     &error);
  g_assert_no_error (error);
  vb_engine_set_job_func (e, on_job, f);
  return e;
}

static void
write_device (VbEngine *e, guint64 offset, gsize length)
{
  g_autofree guint8 *buf = g_malloc (length);

  memset (buf, 0x5c, length);
  g_assert_cmpint (vb_engine_ops.pwrite (e, buf, length, offset, FALSE), ==, 0);
}

/* Data written into a leg's file behind the engine's back. */
static void
write_file (const char *path, guint64 offset, gsize length)
{
  g_autofree guint8 *buf = g_malloc (length);
  int fd = open (path, O_WRONLY | O_CLOEXEC);

  g_assert_cmpint (fd, >=, 0);
  memset (buf, 0xe7, length);
  g_assert_cmpint (pwrite (fd, buf, length, offset), ==, (gssize) length);
  close (fd);
}

/* From @offset, the next @span bytes (of at most @length asked) are of
 * @flags: consecutive answers of one status summed (a piece of the
 * layout ends an answer), then a different one or the end. */
static void
assert_extent (VbEngine *e, guint64 offset, guint64 length, guint64 span, guint32 flags)
{
  guint64 at = offset, end = offset + length;

  while (at < end)
    {
      guint64 run = 0;
      guint32 got = 99;
      g_assert_cmpint (vb_engine_extents (e, at, end - at, &run, &got), ==, 0);
      g_assert_cmpuint (run, >, 0);
      g_assert_cmpuint (run, <=, end - at);
      if (at == offset)
        g_assert_cmpuint (got, ==, flags);
      if (got != flags)
        break;
      at += run;
    }
  g_assert_cmpuint (at - offset, ==, span);
}

static void
test_raid1 (Fixture *f, gconstpointer data)
{
  VbEngine *e = engine_new (f, "raid1", LEG_SIZE - DATA_OFFSET, "bitmap_chunk", "1M", NULL);
  guint64 size = vb_engine_ops.size (e);
  guint64 run;
  guint32 flags;

  g_assert_cmpuint (size, ==, LEG_SIZE - DATA_OFFSET);
  /* new, its first resync not run: nothing says the copies are equal */
  assert_extent (e, 0, size, size, 0);
  vb_engine_activate (e);
  wait_job_ended (f);
  /* then one hole, though the legs' first MiB holds metadata: the resync
   * left the pieces that are holes on both legs alone */
  for (guint i = 0; i < 2; i++)
    {
      int fd = open (f->paths[i], O_RDONLY | O_CLOEXEC);
      g_assert_cmpint (fd, >=, 0);
      g_assert_cmpint (lseek (fd, DATA_OFFSET, SEEK_DATA), ==, -1);
      close (fd);
    }
  assert_extent (e, 0, size, size, HOLE_ZERO);
  write_device (e, 2u << 20, 64u << 10);
  assert_extent (e, 0, size, 2u << 20, HOLE_ZERO);
  assert_extent (e, 2u << 20, size - (2u << 20), 64u << 10, 0);
  assert_extent (e, (2u << 20) + (64u << 10), 1u << 20, 1u << 20, HOLE_ZERO);
  /* data in one leg only (leg 1, 4 MiB into the device): not a hole */
  write_file (f->paths[1], DATA_OFFSET + (4u << 20), 8192);
  assert_extent (e, 4u << 20, 1u << 20, 8192, 0);
  assert_extent (e, 3u << 20, 2u << 20, 1u << 20, HOLE_ZERO);
  /* once leg 1 failed, reads take leg 0 alone, and it has a hole there */
  g_assert_cmpint (vb_engine_set_faulty (e, 1), ==, 0);
  assert_extent (e, 4u << 20, 1u << 20, 1u << 20, HOLE_ZERO);
  assert_extent (e, 2u << 20, 1u << 20, 64u << 10, 0);
  /* refused: nothing, past the end */
  g_assert_cmpint (vb_engine_extents (e, 0, 0, &run, &flags), ==, -EINVAL);
  g_assert_cmpint (vb_engine_extents (e, size - 4096, 8192, &run, &flags), ==, -EINVAL);
  vb_engine_free (e);
}

/* raid0, no metadata, chunks of 64K: device chunk 1 is leg 1's first */
static void
test_raid0 (Fixture *f, gconstpointer data)
{
  VbEngine *e = engine_new (f, "raid0", LEG_SIZE, "chunk_size", "64K", "metadata", "none", NULL);
  guint64 size = vb_engine_ops.size (e);

  g_assert_cmpuint (size, ==, 2 * LEG_SIZE);
  write_device (e, 64u << 10, 4096);
  assert_extent (e, 0, size, 64u << 10, HOLE_ZERO);
  assert_extent (e, 64u << 10, size - (64u << 10), 4096, 0);
  assert_extent (e, 68u << 10, size - (68u << 10), size - (68u << 10), HOLE_ZERO);
  /* leg 0's second chunk (device chunk 2) is written behind the engine */
  write_file (f->paths[0], 64u << 10, 64u << 10);
  assert_extent (e, 68u << 10, size - (68u << 10), 60u << 10, HOLE_ZERO);
  assert_extent (e, 128u << 10, size - (128u << 10), 64u << 10, 0);
  assert_extent (e, 192u << 10, size - (192u << 10), size - (192u << 10), HOLE_ZERO);
  vb_engine_free (e);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/engine-extents/raid1", Fixture, NULL, fixture_set_up, test_raid1,
              fixture_tear_down);
  g_test_add ("/engine-extents/raid0", Fixture, NULL, fixture_set_up, test_raid0,
              fixture_tear_down);
  return g_test_run ();
}
