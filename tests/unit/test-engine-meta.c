/* The engine's on-component metadata without a daemon or root: a raid1
 * over temporary files (and one leg served in process, so that its writes
 * can be made to fail). Checks the ordering rule — a failed leg is in the
 * survivor's superblock before the write that found the failure returns —
 * that a stale leg is never read, that its re-add copies only the bitmap's
 * dirty chunks, and that a damaged superblock refuses assembly and leaves
 * every component as it was. Then raid0 and linear (one copy of the data):
 * superblocks written at start and stop, every slot present and current or
 * the start refused naming it with nothing written, a linear grown online,
 * and metadata=none writing nothing but data. */
#include "config.h"

#include "engine/engine.h"
#include "superblock.h"
#include "vb-error.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LEG_SIZE (8u << 20)
#define DATA_OFFSET (1u << 20)

static const char *const device_uuid = "6f1c2a5e-0b7d-4c1e-9a43-2d5b8e7f0a11";
static const char *const leg_uuids[]
    = { "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "1b2c3d4e-5f6a-4b7c-9d8e-0f1a2b3c4d5e", NULL };

/* A leg served in process over a file, whose writes fail on demand. */
typedef struct {
  int fd;
  gint fail_writes; /* atomic */
} FlakyLeg;

static guint64 flaky_leg_size = LEG_SIZE;

static guint64
flaky_size (void *handle)
{
  return flaky_leg_size;
}

static guint32
flaky_block_size (void *handle)
{
  return 512;
}

static gboolean
flaky_read_only (void *handle)
{
  return FALSE;
}

static gboolean
flaky_multi_conn (void *handle)
{
  return TRUE;
}

static int
flaky_pread (void *handle, void *buf, guint64 length, guint64 offset)
{
  FlakyLeg *leg = handle;
  return pread (leg->fd, buf, length, offset) == (gssize) length ? 0 : -EIO;
}

static int
flaky_pwrite (void *handle, const void *buf, guint64 length, guint64 offset, gboolean fua)
{
  FlakyLeg *leg = handle;
  if (g_atomic_int_get (&leg->fail_writes))
    return -EIO;
  return pwrite (leg->fd, buf, length, offset) == (gssize) length ? 0 : -EIO;
}

static int
flaky_flush (void *handle)
{
  FlakyLeg *leg = handle;
  if (g_atomic_int_get (&leg->fail_writes))
    return -EIO;
  return fdatasync (leg->fd) == 0 ? 0 : -errno;
}

static int
flaky_trim (void *handle, guint64 length, guint64 offset)
{
  return 0;
}

static int
flaky_zero (void *handle, guint64 length, guint64 offset, gboolean fua)
{
  return -ENOTSUP;
}

static const VbBlockOps flaky_ops = {
  .size = flaky_size,
  .block_size = flaky_block_size,
  .read_only = flaky_read_only,
  .can_multi_conn = flaky_multi_conn,
  .pread = flaky_pread,
  .pwrite = flaky_pwrite,
  .flush = flaky_flush,
  .discard = flaky_trim,
  .write_zeroes = flaky_zero,
};

typedef struct {
  char *dir;
  char *paths[2];
  FlakyLeg leg1;
  GHashTable *attributes;
  /* jobs */
  GMutex lock;
  GCond cond;
  VbEngineJob last; /* the last report */
  char operation[16];
  guint failures;
  guint64 leg_size; /* what the engine is told each leg holds */
} Fixture;

static void
on_job (VbEngine *engine, const VbEngineJob *job, gpointer data)
{
  Fixture *f = data;

  g_mutex_lock (&f->lock);
  f->last = *job;
  g_strlcpy (f->operation, job->operation, sizeof f->operation);
  f->last.operation = f->operation;
  f->last.message = NULL;
  f->last.component_uuid = NULL;
  g_cond_broadcast (&f->cond);
  g_mutex_unlock (&f->lock);
}

static void
on_failure (VbEngine *engine, guint component, int error, gpointer data)
{
  Fixture *f = data;

  g_atomic_int_inc ((gint *) &f->failures);
}

/* Waits for the job with the highest id to end; returns its last report. */
static VbEngineJob
wait_job (Fixture *f)
{
  VbEngineJob job;
  gint64 until = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;

  g_mutex_lock (&f->lock);
  while (f->last.state == VB_ENGINE_JOB_RUNNING)
    g_assert_true (g_cond_wait_until (&f->cond, &f->lock, until));
  job = f->last;
  g_mutex_unlock (&f->lock);
  return job;
}

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr (GHashTable) given = g_hash_table_new (g_str_hash, g_str_equal);

  f->dir = g_dir_make_tmp ("vblk-engine-meta-XXXXXX", NULL);
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
  f->leg_size = LEG_SIZE;
  flaky_leg_size = LEG_SIZE;
  f->leg1.fd = open (f->paths[1], O_RDWR | O_CLOEXEC);
  g_assert_cmpint (f->leg1.fd, >=, 0);
  g_hash_table_insert (given, "bitmap_chunk", "1M");
  f->attributes = vb_driver_resolve_attributes (vb_driver_lookup ("raid1"), NULL, given, NULL);
  g_assert_nonnull (f->attributes);
  g_mutex_init (&f->lock);
  g_cond_init (&f->cond);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  for (guint i = 0; i < 2; i++)
    {
      g_unlink (f->paths[i]);
      g_free (f->paths[i]);
    }
  close (f->leg1.fd);
  g_rmdir (f->dir);
  g_free (f->dir);
  g_hash_table_unref (f->attributes);
  g_mutex_clear (&f->lock);
  g_cond_clear (&f->cond);
}

/* Leg 0 a file, leg 1 the flaky in-process leg over its file. */
static VbEngine *
engine_new (Fixture *f, GError **error)
{
  VbEngineSource sources[2]
      = { { f->paths[0], NULL, NULL }, { f->paths[1], &flaky_ops, &f->leg1 } };
  VbComponentInfo infos[2] = { { f->paths[0], VB_COMPONENT_KIND_FILE, f->leg_size - DATA_OFFSET },
                               { f->paths[1], VB_COMPONENT_KIND_FILE, f->leg_size - DATA_OFFSET } };
  VbEngineIdentity id = { device_uuid, leg_uuids, 0, NULL, NULL };
  VbEngine *e = vb_engine_new ("m", vb_driver_lookup ("raid1"), f->attributes, 2, sources, infos,
                               &id, FALSE, error);

  if (e)
    {
      vb_engine_set_job_func (e, on_job, f);
      vb_engine_set_failure_func (e, on_failure, f);
      g_mutex_lock (&f->lock);
      f->last.state = VB_ENGINE_JOB_FINISHED;
      f->last.id = 0;
      g_mutex_unlock (&f->lock);
    }
  return e;
}

static VbSuperblock
superblock_of (const char *path)
{
  g_autoptr (GError) error = NULL;
  VbSuperblock sb;

  g_assert_true (vb_superblock_read (-1, path, &sb, &error));
  g_assert_no_error (error);
  return sb;
}

static void *
aligned (gsize size, int byte)
{
  void *buf = NULL;

  g_assert_cmpint (posix_memalign (&buf, 4096, size), ==, 0);
  memset (buf, byte, size);
  return buf;
}

/* Makes a started device whose legs are in sync (initial resync done). */
static VbEngine *
started (Fixture *f)
{
  g_autoptr (GError) error = NULL;
  VbEngine *e = engine_new (f, &error);
  VbEngineJob job;

  g_assert_no_error (error);
  vb_engine_activate (e);
  job = wait_job (f);
  g_assert_cmpstr (job.operation, ==, "resync");
  g_assert_cmpint (job.state, ==, VB_ENGINE_JOB_FINISHED);
  g_assert_cmpuint (job.done, ==, job.bytes);
  return e;
}

static void
test_fresh (Fixture *f, gconstpointer data)
{
  VbEngine *e = started (f);
  VbSuperblock sb0 = superblock_of (f->paths[0]);
  VbSuperblock sb1 = superblock_of (f->paths[1]);

  g_assert_cmpstr (sb0.device_uuid, ==, device_uuid);
  g_assert_cmpstr (sb0.component_uuid, ==, leg_uuids[0]);
  g_assert_cmpstr (sb1.component_uuid, ==, leg_uuids[1]);
  g_assert_cmpint (sb0.role, ==, 0);
  g_assert_cmpint (sb1.role, ==, 1);
  g_assert_cmpuint (sb0.events, ==, sb1.events);
  g_assert_false (sb0.clean);
  g_assert_cmpuint (sb0.roles[1].state, ==, VB_ROLE_IN_SYNC);
  g_assert_cmpuint (sb0.data_offset, ==, DATA_OFFSET);
  g_assert_cmpuint (sb0.bitmap_chunk, ==, 1 << 20);
  vb_engine_free (e);
  sb0 = superblock_of (f->paths[0]);
  g_assert_true (sb0.clean);
}

static void
test_failure_recorded_first (Fixture *f, gconstpointer data)
{
  VbEngine *e = started (f);
  guint64 before = superblock_of (f->paths[0]).events;
  g_autofree void *buf = aligned (65536, 0x5a);
  VbSuperblock sb;

  g_atomic_int_set (&f->leg1.fail_writes, 1);
  g_assert_cmpint (vb_engine_ops.pwrite (e, buf, 65536, 0, FALSE), ==, 0);
  /* the write has returned: the survivor already says leg 1 failed */
  sb = superblock_of (f->paths[0]);
  g_assert_cmpuint (sb.roles[1].state, ==, VB_ROLE_FAULTY);
  g_assert_cmpuint (sb.events, >, before);
  g_assert_cmpuint (g_atomic_int_get ((gint *) &f->failures), ==, 1);
  g_assert_true (vb_engine_component_faulty (e, 1));
  /* the failed leg's own superblock is older */
  g_assert_cmpuint (superblock_of (f->paths[1]).events, <, sb.events);
  vb_engine_free (e);
}

static void
test_stale_never_read (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  VbEngine *e = started (f);
  g_autofree void *good = aligned (65536, 0x11);
  g_autofree void *stale = aligned (65536, 0x22);
  g_autofree void *back = aligned (65536, 0);
  g_autofree char *a = NULL;
  g_autofree char *b = NULL;
  gsize la, lb;
  VbEngineJob job;

  /* leg 1 fails; chunk 2 (2..3 MiB) is written while it is out */
  g_atomic_int_set (&f->leg1.fail_writes, 1);
  g_assert_cmpint (vb_engine_ops.pwrite (e, good, 65536, 2 << 20, FALSE), ==, 0);
  vb_engine_free (e);
  /* and holds something else there */
  g_assert_cmpint (pwrite (f->leg1.fd, stale, 65536, DATA_OFFSET + (2 << 20)), ==, 65536);
  g_atomic_int_set (&f->leg1.fail_writes, 0);

  e = engine_new (f, &error);
  g_assert_no_error (error);
  g_assert_true (vb_engine_component_rebuilding (e, 1));
  for (guint i = 0; i < 8; i++)
    {
      g_assert_cmpint (vb_engine_ops.pread (e, back, 65536, 2 << 20), ==, 0);
      g_assert_cmpmem (back, 65536, good, 65536);
    }
  vb_engine_activate (e);
  job = wait_job (f);
  g_assert_cmpstr (job.operation, ==, "rebuild");
  g_assert_cmpint (job.state, ==, VB_ENGINE_JOB_FINISHED);
  /* only the chunk written while the leg was out */
  g_assert_cmpuint (job.bytes, ==, 1 << 20);
  g_assert_false (vb_engine_component_rebuilding (e, 1));
  vb_engine_free (e);
  g_assert_true (g_file_get_contents (f->paths[0], &a, &la, NULL));
  g_assert_true (g_file_get_contents (f->paths[1], &b, &lb, NULL));
  g_assert_cmpmem (a + DATA_OFFSET, la - DATA_OFFSET, b + DATA_OFFSET, lb - DATA_OFFSET);
  g_assert_cmpuint (superblock_of (f->paths[1]).roles[1].state, ==, VB_ROLE_IN_SYNC);
}

static void
test_bad_superblock_refused (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  VbEngine *e = started (f);
  g_autofree char *before0 = NULL;
  g_autofree char *before1 = NULL;
  g_autofree char *after0 = NULL;
  g_autofree char *after1 = NULL;
  gsize l0, l1, m0, m1;
  guint8 byte = 0x77;

  vb_engine_free (e);
  g_assert_cmpint (pwrite (f->leg1.fd, &byte, 1, 4096 + 500), ==, 1);
  g_assert_true (g_file_get_contents (f->paths[0], &before0, &l0, NULL));
  g_assert_true (g_file_get_contents (f->paths[1], &before1, &l1, NULL));
  e = engine_new (f, &error);
  g_assert_null (e);
  g_assert_error (error, VB_ERROR, VB_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, f->paths[1]));
  g_assert_nonnull (strstr (error->message, "checksum"));
  /* nothing was written anywhere */
  g_assert_true (g_file_get_contents (f->paths[0], &after0, &m0, NULL));
  g_assert_true (g_file_get_contents (f->paths[1], &after1, &m1, NULL));
  g_assert_cmpmem (before0, l0, after0, m0);
  g_assert_cmpmem (before1, l1, after1, m1);
}

static void
test_foreign_refused (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  VbEngine *e = started (f);
  VbSuperblock sb = superblock_of (f->paths[1]);

  vb_engine_free (e);
  /* leg 1 now says it belongs to another device */
  g_strlcpy (sb.device_uuid, "7a7a7a7a-1111-4222-8333-444455556666", sizeof sb.device_uuid);
  g_assert_true (vb_superblock_write (-1, f->paths[1], &sb, NULL));
  e = engine_new (f, &error);
  g_assert_null (e);
  g_assert_nonnull (strstr (error->message, "belongs to device"));
  g_assert_nonnull (strstr (error->message, f->paths[1]));
}

static void
resize (Fixture *f, guint64 size)
{
  for (guint i = 0; i < 2; i++)
    g_assert_cmpint (truncate (f->paths[i], size), ==, 0);
  f->leg_size = size;
  flaky_leg_size = size;
}

static void
test_sizes (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  VbEngine *e = started (f);
  VbEngineJob job;
  g_autofree char *before = NULL;
  g_autofree char *after = NULL;
  gsize lb, la;

  vb_engine_free (e);
  /* smaller legs would cut the device short: refused, nothing written */
  resize (f, LEG_SIZE / 2);
  g_assert_true (g_file_get_contents (f->paths[0], &before, &lb, NULL));
  e = engine_new (f, &error);
  g_assert_null (e);
  g_assert_nonnull (strstr (error->message, "bytes of data per component"));
  g_assert_true (g_file_get_contents (f->paths[0], &after, &la, NULL));
  g_assert_cmpmem (before, lb, after, la);
  g_clear_error (&error);

  /* larger legs: the device grows and every copy is made equal */
  resize (f, LEG_SIZE * 2);
  e = engine_new (f, &error);
  g_assert_no_error (error);
  vb_engine_activate (e);
  job = wait_job (f);
  g_assert_cmpstr (job.operation, ==, "resync");
  g_assert_cmpuint (job.bytes, ==, 2 * LEG_SIZE - DATA_OFFSET);
  g_assert_cmpuint (superblock_of (f->paths[0]).data_size, ==, 2 * LEG_SIZE - DATA_OFFSET);
  vb_engine_free (e);
}

/* raid0 and linear: one copy of the data */

/* The two files as a device of @driver with @metadata; @reconfigure and
 * @n as for a reconfiguration that appends components. */
static VbEngine *
single_new_n (Fixture *f, const char *driver, const char *metadata, guint n, gboolean reconfigure,
              gboolean missing1, GError **error)
{
  g_autoptr (GHashTable) given = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GHashTable) attributes = NULL;
  guint64 offset = strcmp (metadata, "vblk") == 0 ? DATA_OFFSET : 0;
  VbEngineSource sources[2] = { { f->paths[0], NULL, NULL }, { f->paths[1], NULL, NULL } };
  VbComponentInfo infos[2] = { { f->paths[0], VB_COMPONENT_KIND_FILE, f->leg_size - offset },
                               { f->paths[1], VB_COMPONENT_KIND_FILE, f->leg_size - offset } };
  VbEngineIdentity id = { device_uuid, leg_uuids, 0, NULL, NULL, reconfigure, NULL };

  g_hash_table_insert (given, "metadata", (gpointer) metadata);
  if (strcmp (driver, "raid0") == 0)
    g_hash_table_insert (given, "chunk_size", "64K");
  attributes = vb_driver_resolve_attributes (vb_driver_lookup (driver), NULL, given, NULL);
  g_assert_nonnull (attributes);
  infos[1].missing = missing1;
  return vb_engine_new ("s", vb_driver_lookup (driver), attributes, n, sources, infos, &id, FALSE,
                        error);
}

static VbEngine *
single_new (Fixture *f, const char *driver, GError **error)
{
  return single_new_n (f, driver, "vblk", 2, FALSE, FALSE, error);
}

static char *
contents (const char *path, gsize *length)
{
  char *text = NULL;

  g_assert_true (g_file_get_contents (path, &text, length, NULL));
  return text;
}

/* A refused start left every component as it was. */
typedef struct {
  char *before[2];
  gsize length[2];
} Snapshot;

static void
snapshot_take (Fixture *f, Snapshot *snap)
{
  for (guint i = 0; i < 2; i++)
    snap->before[i] = contents (f->paths[i], &snap->length[i]);
}

static void
snapshot_assert_unchanged (Fixture *f, Snapshot *snap)
{
  for (guint i = 0; i < 2; i++)
    {
      gsize length;
      g_autofree char *now = contents (f->paths[i], &length);
      g_assert_cmpmem (snap->before[i], snap->length[i], now, length);
      g_clear_pointer (&snap->before[i], g_free);
    }
}

/* Starting refuses, naming @path and saying @why, and writes nothing. */
static void
assert_single_refused (Fixture *f, const char *driver, gboolean missing1, const char *path,
                       const char *why)
{
  g_autoptr (GError) error = NULL;
  Snapshot snap;
  VbEngine *e;

  snapshot_take (f, &snap);
  e = single_new_n (f, driver, "vblk", 2, FALSE, missing1, &error);
  g_assert_null (e);
  g_assert_error (error, VB_ERROR, VB_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, path));
  if (strstr (error->message, why) == NULL)
    g_error ("'%s' does not say '%s'", error->message, why);
  g_assert_nonnull (strstr (error->message, "nothing was written"));
  snapshot_assert_unchanged (f, &snap);
}

static void
test_single_fresh (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  VbEngine *e = single_new (f, "raid0", &error);
  g_autofree void *buf = aligned (65536, 0x3c);
  g_autofree void *back = aligned (65536, 0);
  VbSuperblock sb0, sb1;
  guint64 events;

  g_assert_no_error (error);
  sb0 = superblock_of (f->paths[0]);
  sb1 = superblock_of (f->paths[1]);
  g_assert_cmpstr (sb0.driver, ==, "raid0");
  g_assert_cmpstr (sb1.component_uuid, ==, leg_uuids[1]);
  g_assert_cmpint (sb1.role, ==, 1);
  g_assert_cmpuint (sb0.events, ==, sb1.events);
  g_assert_false (sb0.clean);
  g_assert_cmpuint (sb0.features & VB_SB_FEATURE_BITMAP, ==, 0);
  g_assert_cmpuint (sb0.data_offset, ==, DATA_OFFSET);
  g_assert_cmpuint (sb0.roles[1].state, ==, VB_ROLE_IN_SYNC);
  g_assert_nonnull (strstr (sb0.attributes, "metadata=vblk"));
  events = sb0.events;
  /* no job: nothing to resync, nothing to rebuild */
  vb_engine_activate (e);
  g_assert_false (vb_engine_component_rebuilding (e, 0));
  g_assert_false (vb_engine_component_rebuilding (e, 1));
  /* chunk 1 (64K..128K) is the second component's first, past its superblocks */
  g_assert_cmpint (vb_engine_ops.pwrite (e, buf, 65536, 65536, FALSE), ==, 0);
  g_assert_cmpint (pread (f->leg1.fd, back, 65536, DATA_OFFSET), ==, 65536);
  g_assert_cmpmem (back, 65536, buf, 65536);
  vb_engine_free (e);
  sb1 = superblock_of (f->paths[1]);
  g_assert_true (sb1.clean);
  g_assert_cmpuint (sb1.events, ==, events + 1);

  /* started again: the same data, events on */
  e = single_new (f, "raid0", &error);
  g_assert_no_error (error);
  g_assert_cmpint (vb_engine_ops.pread (e, back, 65536, 65536), ==, 0);
  g_assert_cmpmem (back, 65536, buf, 65536);
  g_assert_cmpuint (superblock_of (f->paths[0]).events, ==, events + 2);
  vb_engine_free (e);
}

static void
test_single_stale_refused (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *old = NULL;
  gsize old_length;
  VbSuperblock sb;
  VbEngine *e;

  vb_engine_free (single_new (f, "raid0", &error));
  g_assert_no_error (error);
  old = contents (f->paths[1], &old_length);
  /* a session the copy does not have */
  e = single_new (f, "raid0", &error);
  g_assert_no_error (error);
  vb_engine_free (e);
  g_assert_true (g_file_set_contents (f->paths[1], old, old_length, NULL));
  assert_single_refused (f, "raid0", FALSE, f->paths[1], "stale");

  /* one event behind: a superblock write cut short between components,
   * which md accepts too */
  sb = superblock_of (f->paths[0]);
  sb.events--;
  g_strlcpy (sb.component_uuid, leg_uuids[1], sizeof sb.component_uuid);
  sb.role = 1;
  g_assert_true (vb_superblock_write (-1, f->paths[1], &sb, NULL));
  e = single_new (f, "raid0", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (superblock_of (f->paths[1]).events, ==, superblock_of (f->paths[0]).events);
  vb_engine_free (e);
}

static void
test_single_refusals (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  VbSuperblock sb0, sb1;
  guint8 byte = 0x77;
  g_autofree void *zero = aligned (4096, 0);

  vb_engine_free (single_new (f, "linear", &error));
  g_assert_no_error (error);
  sb0 = superblock_of (f->paths[0]);
  sb1 = superblock_of (f->paths[1]);

  /* missing: there is no other copy of what it holds */
  assert_single_refused (f, "linear", TRUE, f->paths[1], "missing");

  /* another device's */
  {
    VbSuperblock other = sb1;
    g_strlcpy (other.device_uuid, "7a7a7a7a-1111-4222-8333-444455556666", sizeof other.device_uuid);
    g_assert_true (vb_superblock_write (-1, f->paths[1], &other, NULL));
    assert_single_refused (f, "linear", FALSE, f->paths[1], "belongs to device");
  }

  /* the two swapped: each holds the other slot's data */
  g_assert_true (vb_superblock_write (-1, f->paths[0], &sb1, NULL));
  g_assert_true (vb_superblock_write (-1, f->paths[1], &sb0, NULL));
  assert_single_refused (f, "linear", FALSE, f->paths[0], "not the one of slot 0");
  g_assert_true (vb_superblock_write (-1, f->paths[0], &sb0, NULL));
  g_assert_true (vb_superblock_write (-1, f->paths[1], &sb1, NULL));

  /* a bad checksum */
  g_assert_cmpint (pwrite (f->leg1.fd, &byte, 1, 4096 + 500), ==, 1);
  assert_single_refused (f, "linear", FALSE, f->paths[1], "checksum");

  /* blank: not the component that holds that part of the data */
  g_assert_cmpint (pwrite (f->leg1.fd, zero, 4096, 4096), ==, 4096);
  assert_single_refused (f, "linear", FALSE, f->paths[1], "carries no superblock");

  /* the whole device again: it starts */
  g_assert_true (vb_superblock_write (-1, f->paths[1], &sb1, NULL));
  vb_engine_free (single_new (f, "linear", &error));
  g_assert_no_error (error);
}

/* A linear grown by a reconfiguration: the new component is new space —
 * its superblock and the new role table are written, nothing is rebuilt. */
static void
test_single_grown (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  VbEngine *e = single_new_n (f, "linear", "vblk", 1, FALSE, FALSE, &error);
  VbSuperblock sb0, sb1;

  g_assert_no_error (error);
  vb_engine_free (e);
  g_assert_cmpuint (superblock_of (f->paths[0]).n_roles, ==, 1);
  /* a second one not added by a reconfiguration: not the device's */
  assert_single_refused (f, "linear", FALSE, f->paths[0], "its superblock says 1 slots");

  e = single_new_n (f, "linear", "vblk", 2, TRUE, FALSE, &error);
  g_assert_no_error (error);
  vb_engine_activate (e);
  g_assert_false (vb_engine_component_rebuilding (e, 1));
  sb0 = superblock_of (f->paths[0]);
  sb1 = superblock_of (f->paths[1]);
  g_assert_cmpuint (sb0.n_roles, ==, 2);
  g_assert_cmpuint (sb0.events, ==, sb1.events);
  g_assert_cmpstr (sb0.roles[1].uuid, ==, leg_uuids[1]);
  g_assert_cmpuint (sb0.roles[1].state, ==, VB_ROLE_IN_SYNC);
  g_assert_cmpint (sb1.role, ==, 1);
  vb_engine_free (e);
  vb_engine_free (single_new (f, "linear", &error));
  g_assert_no_error (error);
}

/* metadata=none (a raid0 saved before it had superblocks): data from byte
 * 0 of each component, and nothing is ever written outside the data. */
static void
test_single_none (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  VbEngine *e = single_new_n (f, "raid0", "none", 2, FALSE, FALSE, &error);
  g_autofree void *buf = aligned (65536, 0x5e);
  g_autofree void *back = aligned (65536, 0);
  g_autoptr (GError) local = NULL;
  VbSuperblock sb;

  g_assert_no_error (error);
  g_assert_cmpint (vb_engine_ops.pwrite (e, buf, 65536, 65536, FALSE), ==, 0);
  vb_engine_free (e);
  g_assert_cmpint (pread (f->leg1.fd, back, 65536, 0), ==, 65536);
  g_assert_cmpmem (back, 65536, buf, 65536);
  g_assert_false (vb_superblock_read (-1, f->paths[0], &sb, &local));
  g_assert_error (local, VB_ERROR, VB_ERROR_NOT_FOUND);
  {
    /* the first component was never written: still all zero */
    gsize length;
    g_autofree char *first = contents (f->paths[0], &length);
    for (gsize i = 0; i < length; i++)
      g_assert_cmpint (first[i], ==, 0);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
#define ADD(path, fn) g_test_add (path, Fixture, NULL, fixture_set_up, fn, fixture_tear_down)
  ADD ("/engine-meta/fresh", test_fresh);
  ADD ("/engine-meta/failure-recorded-first", test_failure_recorded_first);
  ADD ("/engine-meta/stale-never-read", test_stale_never_read);
  ADD ("/engine-meta/bad-superblock-refused", test_bad_superblock_refused);
  ADD ("/engine-meta/foreign-refused", test_foreign_refused);
  ADD ("/engine-meta/sizes", test_sizes);
  ADD ("/engine-meta/single-copy/fresh", test_single_fresh);
  ADD ("/engine-meta/single-copy/stale-refused", test_single_stale_refused);
  ADD ("/engine-meta/single-copy/refusals", test_single_refusals);
  ADD ("/engine-meta/single-copy/grown", test_single_grown);
  ADD ("/engine-meta/single-copy/none", test_single_none);
  return g_test_run ();
}
