/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine's on-component metadata without a daemon or root: a raid1
 * over temporary files (and one leg served in process, so that its writes
 * can be made to fail). Checks the ordering rule — a failed leg is in the
 * survivor's superblock before the write that found the failure returns —
 * that a failed leg stays faulty through a start and a reconfiguration
 * until it is re-added, that its re-add copies only the bitmap's dirty
 * chunks, that an old copy of a leg put back after the bitmap was cleared
 * is rebuilt in full and never read, that a device without a bitmap
 * settled at a shutdown's end says clean until its next write, and that a
 * damaged superblock refuses assembly and leaves every component as it was. Then the assembly rule
 * (assembly.h) alone, case by case; then raid0 and linear (one copy of the
 * data): superblocks written at start and stop, every slot present and
 * current or the start refused naming it with nothing written, a linear
 * grown online, and metadata=none writing nothing but data. */
#include "config.h"

#include "assembly.h"
#include "engine.h"
#include "superblock.h"
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

/* Leg 0 a file, leg 1 the flaky in-process leg over its file; @id: a
 * reconfiguration's identity (NULL: a start). */
static VbEngine *
engine_new_as (Fixture *f, const VbEngineIdentity *id, GError **error)
{
  VbEngineSource sources[2]
      = { { f->paths[0], NULL, NULL }, { f->paths[1], &flaky_ops, &f->leg1 } };
  VbComponentInfo infos[2] = { { f->paths[0], VB_COMPONENT_KIND_FILE, f->leg_size - DATA_OFFSET },
                               { f->paths[1], VB_COMPONENT_KIND_FILE, f->leg_size - DATA_OFFSET } };
  VbEngineIdentity start = { device_uuid, leg_uuids, 0, NULL, NULL };
  VbEngine *e = vb_engine_new ("m", vb_driver_lookup ("raid1"), f->attributes, 2, sources, infos,
                               id ? id : &start, FALSE, error);

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

static VbEngine *
engine_new (Fixture *f, GError **error)
{
  return engine_new_as (f, NULL, error);
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

/* Without a bitmap, a device settled at a shutdown's last step (its file
 * system read-only) has superblocks that say clean while it still runs:
 * the power going then costs no resync. A write after it has them say
 * otherwise first, so that the power going then resyncs; a leg not in sync
 * refuses the settling. */
static void
test_settled_without_bitmap (Fixture *f, gconstpointer data)
{
  g_autoptr (GHashTable) given = g_hash_table_new (g_str_hash, g_str_equal);
  g_autofree void *buf = aligned (65536, 0x3c);
  g_autoptr (GError) error = NULL;
  VbEngine *e;
  guint64 events;

  g_hash_table_insert (given, "bitmap", "none");
  g_hash_table_unref (f->attributes);
  f->attributes = vb_driver_resolve_attributes (vb_driver_lookup ("raid1"), NULL, given, NULL);
  e = started (f);
  g_assert_false (superblock_of (f->paths[0]).clean);
  g_assert_cmpint (vb_engine_settle (e), ==, 0);
  for (guint i = 0; i < 2; i++)
    g_assert_true (superblock_of (f->paths[i]).clean);
  events = superblock_of (f->paths[0]).events;

  /* a write: "not clean" first, on both legs */
  g_assert_cmpint (vb_engine_ops.pwrite (e, buf, 65536, 0, FALSE), ==, 0);
  for (guint i = 0; i < 2; i++)
    {
      VbSuperblock sb = superblock_of (f->paths[i]);
      g_assert_false (sb.clean);
      g_assert_cmpuint (sb.events, >, events);
    }
  /* the power goes: the next start resyncs */
  vb_engine_free_unclean (e);
  e = engine_new (f, &error);
  g_assert_no_error (error);
  vb_engine_activate (e);
  g_assert_cmpstr (wait_job (f).operation, ==, "resync");

  /* settled again, then the power goes: no job at the next start */
  g_assert_cmpint (vb_engine_settle (e), ==, 0);
  vb_engine_free_unclean (e);
  e = engine_new (f, &error);
  g_assert_no_error (error);
  vb_engine_activate (e);
  g_usleep (G_USEC_PER_SEC / 2);
  g_mutex_lock (&f->lock);
  g_assert_cmpuint (f->last.id, ==, 0);
  g_mutex_unlock (&f->lock);

  /* a leg failed: not settled, the superblocks stay "not clean" */
  g_atomic_int_set (&f->leg1.fail_writes, 1);
  g_assert_cmpint (vb_engine_ops.pwrite (e, buf, 65536, 0, FALSE), ==, 0);
  g_assert_true (vb_engine_component_faulty (e, 1));
  g_assert_cmpint (vb_engine_settle (e), ==, -EBUSY);
  g_assert_false (superblock_of (f->paths[0]).clean);
  vb_engine_free (e);
}

static GMutex reports_lock;

static void
on_report (const char *device, VbReportKind kind, const char *message, gpointer data)
{
  GPtrArray *reports = data;

  g_mutex_lock (&reports_lock);
  g_ptr_array_add (reports,
                   g_strdup_printf ("%s %s: %s", kind == VB_REPORT_WARNING ? "warning" : "info",
                                    device, message));
  g_mutex_unlock (&reports_lock);
}

/* What an administrator must see goes to the owner's report function,
 * naming the device (the engine itself does not log): a job started and
 * finished, a leg's failure recorded. */
static void
test_reports (Fixture *f, gconstpointer data)
{
  g_autoptr (GPtrArray) reports = g_ptr_array_new_with_free_func (g_free);
  g_autofree void *buf = aligned (65536, 0x5a);
  g_autofree char *failed
      = g_strdup_printf ("info m: component 1 (%s) failed; recorded at events ", f->paths[1]);
  g_autofree char *all = NULL;
  VbEngine *e;

  vb_report_set_func (on_report, reports);
  e = started (f);
  g_atomic_int_set (&f->leg1.fail_writes, 1);
  g_assert_cmpint (vb_engine_ops.pwrite (e, buf, 65536, 0, FALSE), ==, 0);
  vb_engine_free (e);
  vb_report_set_func (NULL, NULL);
  g_ptr_array_add (reports, NULL);
  all = g_strjoinv ("\n", (char **) reports->pdata);
  g_assert_nonnull (strstr (all, "info m: resync started: "));
  g_assert_nonnull (strstr (all, "info m: resync finished: "));
  g_assert_nonnull (strstr (all, failed));
}

/* A leg that failed stays faulty through a stop and a start (never read,
 * never written); an explicit re-add brings it back, copying only the
 * bitmap's dirty chunks, and it is not read before that copy ends. */
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
  VbEngineSource leg1 = { f->paths[1], &flaky_ops, &f->leg1 };
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
  g_assert_true (vb_engine_component_faulty (e, 1));
  g_assert_false (vb_engine_component_rebuilding (e, 1));
  for (guint i = 0; i < 8; i++)
    {
      g_assert_cmpint (vb_engine_ops.pread (e, back, 65536, 2 << 20), ==, 0);
      g_assert_cmpmem (back, 65536, good, 65536);
    }
  vb_engine_activate (e);
  /* no rebuild of it (the bitmap's dirty chunks may be resynced, to the
   * healthy leg only): it stays faulty until it is re-added */
  job = wait_job (f);
  g_assert_cmpstr (job.id ? job.operation : "resync", ==, "resync");
  g_assert_true (vb_engine_component_faulty (e, 1));
  g_assert_false (vb_engine_component_rebuilding (e, 1));
  g_assert_cmpuint (superblock_of (f->paths[0]).roles[1].state, ==, VB_ROLE_FAULTY);

  g_assert_cmpint (vb_engine_readd (e, 1, &leg1, NULL, &error), ==, 0);
  g_assert_no_error (error);
  g_assert_true (vb_engine_component_rebuilding (e, 1));
  for (guint i = 0; i < 8; i++)
    {
      g_assert_cmpint (vb_engine_ops.pread (e, back, 65536, 2 << 20), ==, 0);
      g_assert_cmpmem (back, 65536, good, 65536);
    }
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

  /* larger legs: the device keeps its size (growing is the
   * administrator's decision, as md's), nothing to resync */
  resize (f, LEG_SIZE * 2);
  e = engine_new (f, &error);
  g_assert_no_error (error);
  vb_engine_activate (e);
  g_assert_cmpuint (vb_engine_ops.size (e), ==, LEG_SIZE - DATA_OFFSET);
  g_usleep (200 * 1000);
  g_mutex_lock (&f->lock);
  g_assert_cmpuint (f->last.id, ==, 0); /* no job reported since engine_new */
  g_mutex_unlock (&f->lock);
  g_assert_cmpuint (superblock_of (f->paths[0]).data_size, ==, LEG_SIZE - DATA_OFFSET);
  vb_engine_free (e);
}

/* Reads [offset, +65536) @n times (the reads are balanced over the legs)
 * and compares each with @want. */
static void
assert_reads (VbEngine *e, guint64 offset, const void *want, guint n)
{
  g_autofree void *back = aligned (65536, 0);

  for (guint i = 0; i < n; i++)
    {
      g_assert_cmpint (vb_engine_ops.pread (e, back, 65536, offset), ==, 0);
      g_assert_cmpmem (back, 65536, want, 65536);
    }
}

static void
assert_legs_equal (Fixture *f)
{
  g_autofree char *a = NULL;
  g_autofree char *b = NULL;
  gsize la, lb;

  g_assert_true (g_file_get_contents (f->paths[0], &a, &la, NULL));
  g_assert_true (g_file_get_contents (f->paths[1], &b, &lb, NULL));
  g_assert_cmpmem (a + DATA_OFFSET, la - DATA_OFFSET, b + DATA_OFFSET, lb - DATA_OFFSET);
}

/* Issue 15, defect A: a copy of leg 0 taken while the device was stopped
 * is put back after writes it missed, whose bits the clean stop cleared.
 * The clearing was recorded first (events_cleared above the copy's
 * events): the copy is rebuilt in full and never read. */
static void
test_stale_copy_rebuilt (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  VbEngine *e = started (f);
  g_autofree void *x = aligned (65536, 0x33);
  g_autofree void *y = aligned (65536, 0x44);
  g_autofree char *copy = NULL;
  gsize copy_len;
  guint64 copy_events;
  VbSuperblock sb;
  VbEngineJob job;
  int fd;

  g_assert_cmpint (vb_engine_ops.pwrite (e, x, 65536, 3 << 20, FALSE), ==, 0);
  vb_engine_free (e);
  g_assert_true (g_file_get_contents (f->paths[0], &copy, &copy_len, NULL));
  copy_events = superblock_of (f->paths[0]).events;

  e = engine_new (f, &error);
  g_assert_no_error (error);
  vb_engine_activate (e);
  g_assert_cmpint (vb_engine_ops.pwrite (e, y, 65536, 3 << 20, FALSE), ==, 0);
  /* the clean stop clears the bit of that write, recorded first */
  vb_engine_free (e);
  sb = superblock_of (f->paths[1]);
  g_assert_true (sb.features & VB_SB_FEATURE_EVENTS_CLEARED);
  g_assert_cmpuint (sb.events_cleared, >, copy_events);
  g_assert_true (sb.clean);

  /* the copy is put back in place (same file) */
  fd = open (f->paths[0], O_WRONLY | O_CLOEXEC);
  g_assert_cmpint (pwrite (fd, copy, copy_len, 0), ==, (gssize) copy_len);
  close (fd);
  e = engine_new (f, &error);
  g_assert_no_error (error);
  g_assert_true (vb_engine_component_rebuilding (e, 0));
  assert_reads (e, 3 << 20, y, 8);
  vb_engine_activate (e);
  job = wait_job (f);
  g_assert_cmpstr (job.operation, ==, "rebuild");
  g_assert_cmpint (job.state, ==, VB_ENGINE_JOB_FINISHED);
  g_assert_cmpuint (job.bytes, ==, LEG_SIZE - DATA_OFFSET);
  assert_reads (e, 3 << 20, y, 8);
  vb_engine_free (e);
  assert_legs_equal (f);
}

/* Superblocks written before events_cleared existed: a stale leg of such a
 * device is rebuilt in full, and the first start records events_cleared. */
static void
test_old_superblocks (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  VbEngine *e = started (f);
  VbSuperblock sb0, sb1;
  VbEngineJob job;

  vb_engine_free (e);
  sb0 = superblock_of (f->paths[0]);
  sb1 = superblock_of (f->paths[1]);
  sb0.features &= ~VB_SB_FEATURE_EVENTS_CLEARED;
  sb0.events_cleared = 0;
  sb1.features &= ~VB_SB_FEATURE_EVENTS_CLEARED;
  sb1.events_cleared = 0;
  /* leg 0 missed the last superblock write */
  sb0.events--;
  g_assert_true (vb_superblock_write (-1, f->paths[0], &sb0, NULL));
  g_assert_true (vb_superblock_write (-1, f->paths[1], &sb1, NULL));

  e = engine_new (f, &error);
  g_assert_no_error (error);
  g_assert_true (vb_engine_component_rebuilding (e, 0));
  sb1 = superblock_of (f->paths[1]);
  g_assert_true (sb1.features & VB_SB_FEATURE_EVENTS_CLEARED);
  g_assert_cmpuint (sb1.events_cleared, ==, sb1.events);
  vb_engine_activate (e);
  job = wait_job (f);
  g_assert_cmpuint (job.bytes, ==, LEG_SIZE - DATA_OFFSET);
  vb_engine_free (e);
  assert_legs_equal (f);
}

/* Issue 15, defect E: a leg the administrator failed is not brought back
 * by a reconfiguration's assembly (nor by a start); it keeps its errors
 * and is neither read nor written until it is re-added. */
/* A failed leg and one whose disk went away differ in the table, so that
 * a later start tells them apart (torture seed 407037325, 120 s, step 263:
 * an administrator's failure, then an unplug, then a restart, and the leg
 * was re-added when it came back). */
static void
test_gone_recorded_missing (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  VbEngine *e = started (f);
  guint64 events;

  g_assert_cmpint (vb_engine_set_faulty (e, 0), ==, 0);
  g_assert_cmpuint (superblock_of (f->paths[1]).roles[0].state, ==, VB_ROLE_FAULTY);
  g_assert_false (vb_engine_component_missing (e, 0));
  events = superblock_of (f->paths[1]).events;
  /* its disk goes away: let go, and the survivor's table says missing */
  vb_engine_release_component (e, 0);
  g_assert_true (vb_engine_component_faulty (e, 0));
  g_assert_true (vb_engine_component_missing (e, 0));
  g_assert_cmpuint (superblock_of (f->paths[1]).roles[0].state, ==, VB_ROLE_MISSING);
  g_assert_cmpuint (superblock_of (f->paths[1]).events, >, events);
  /* a second release writes nothing more */
  events = superblock_of (f->paths[1]).events;
  vb_engine_release_component (e, 0);
  g_assert_cmpuint (superblock_of (f->paths[1]).events, ==, events);
  vb_engine_free (e);

  /* the next start finds it back: went away, so it is caught up (the
   * bitmap), not kept out as a failed one is */
  e = engine_new (f, &error);
  g_assert_no_error (error);
  g_assert_false (vb_engine_component_faulty (e, 0));
  g_assert_true (vb_engine_component_rebuilding (e, 0));
  vb_engine_activate (e);
  wait_job (f);
  g_assert_true (vb_engine_component_in_sync (e, 0));
  vb_engine_free (e);
}

static void
test_failed_stays_faulty (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  VbEngine *e = started (f);
  g_autofree void *x = aligned (65536, 0x55);
  g_autofree char *before = NULL;
  g_autofree char *after = NULL;
  gsize lb, la;
  const guint64 errors[2] = { 0, 1 };
  VbEngineIdentity reconfigure
      = { device_uuid, leg_uuids, 0, NULL, NULL, TRUE, NULL, NULL, errors };
  VbEngineSource leg1 = { f->paths[1], &flaky_ops, &f->leg1 };
  VbEngineJob job;

  g_assert_cmpint (vb_engine_set_faulty (e, 1), ==, 0);
  g_assert_cmpuint (vb_engine_component_errors (e, 1), ==, 1);
  g_assert_cmpint (vb_engine_ops.pwrite (e, x, 65536, 5 << 20, FALSE), ==, 0);
  g_assert_true (g_file_get_contents (f->paths[1], &before, &lb, NULL));

  /* the engine a reconfiguration swaps in, over the same legs */
  vb_engine_quiesce (e);
  vb_engine_free_unclean (e);
  e = engine_new_as (f, &reconfigure, &error);
  g_assert_no_error (error);
  g_assert_true (vb_engine_component_faulty (e, 1));
  g_assert_false (vb_engine_component_rebuilding (e, 1));
  g_assert_cmpuint (vb_engine_component_errors (e, 1), ==, 1);
  vb_engine_activate (e);
  job = wait_job (f);
  g_assert_cmpstr (job.id ? job.operation : "resync", ==, "resync");
  assert_reads (e, 5 << 20, x, 8);
  g_assert_cmpint (vb_engine_ops.pwrite (e, x, 65536, 6 << 20, FALSE), ==, 0);
  vb_engine_free (e);
  /* not written while faulty: its file is as it was */
  g_assert_true (g_file_get_contents (f->paths[1], &after, &la, NULL));
  g_assert_cmpmem (before, lb, after, la);

  /* a start keeps it faulty too; the explicit re-add brings it back */
  e = engine_new (f, &error);
  g_assert_no_error (error);
  g_assert_true (vb_engine_component_faulty (e, 1));
  g_assert_cmpuint (superblock_of (f->paths[0]).roles[1].state, ==, VB_ROLE_FAULTY);
  vb_engine_activate (e);
  wait_job (f);
  g_assert_cmpint (vb_engine_readd (e, 1, &leg1, NULL, &error), ==, 0);
  g_assert_no_error (error);
  job = wait_job (f);
  g_assert_cmpstr (job.operation, ==, "rebuild");
  g_assert_cmpint (job.state, ==, VB_ENGINE_JOB_FINISHED);
  g_assert_cmpuint (job.bytes, ==, 2 << 20); /* the two chunks written meanwhile */
  g_assert_true (vb_engine_component_in_sync (e, 1));
  vb_engine_free (e);
  assert_legs_equal (f);
}

/* The assembly rule alone (assembly.h), on superblocks made in memory:
 * a device of two slots at events 10 whose bits were last cleared at 7. */

static VbSuperblock
device_sb (void)
{
  VbSuperblock sb;

  memset (&sb, 0, sizeof sb);
  sb.version = 1;
  sb.features = VB_SB_FEATURE_BITMAP | VB_SB_FEATURE_EVENTS_CLEARED;
  g_strlcpy (sb.device_uuid, device_uuid, sizeof sb.device_uuid);
  g_strlcpy (sb.component_uuid, leg_uuids[0], sizeof sb.component_uuid);
  sb.role = 0;
  sb.events = 10;
  sb.events_cleared = 7;
  sb.bitmap_chunk = 1 << 20;
  sb.data_size = LEG_SIZE - DATA_OFFSET;
  sb.n_roles = 2;
  for (guint i = 0; i < 2; i++)
    {
      g_strlcpy (sb.roles[i].uuid, leg_uuids[i], sizeof sb.roles[i].uuid);
      sb.roles[i].state = VB_ROLE_IN_SYNC;
    }
  return sb;
}

/* Slot 1's own superblock at @events, its table as the device's. */
static VbSuperblock
own_sb (const VbSuperblock *device, guint64 events)
{
  VbSuperblock own = *device;

  own.role = 1;
  g_strlcpy (own.component_uuid, leg_uuids[1], sizeof own.component_uuid);
  own.events = events;
  own.events_cleared = MIN (own.events_cleared, events);
  return own;
}

static VbSlotDecision
decide (const VbSuperblock *device, const VbSuperblock *own, gboolean readd, char **why)
{
  VbSlotFacts facts = {
    .device = device,
    .slot = 1,
    .present = TRUE,
    .own = own,
    .newest = device->component_uuid,
    .use_bitmap = TRUE,
    .can_resume = TRUE,
    .readd = readd,
  };

  return vb_assembly_decide (&facts, why);
}

static void
test_rule_in_sync_and_stale (void)
{
  VbSuperblock dev = device_sb ();
  VbSuperblock own = own_sb (&dev, 10);
  g_autofree char *why = NULL;

  g_assert_cmpint (decide (&dev, &own, FALSE, NULL), ==, VB_SLOT_CURRENT);
  /* behind, but the bitmap has kept every bit since its events */
  own = own_sb (&dev, 7);
  g_assert_cmpint (decide (&dev, &own, FALSE, NULL), ==, VB_SLOT_RESYNC);
  own = own_sb (&dev, 9);
  g_assert_cmpint (decide (&dev, &own, FALSE, NULL), ==, VB_SLOT_RESYNC);
  /* issue 15, defect A: bits of writes it missed were cleared since */
  own = own_sb (&dev, 6);
  g_assert_cmpint (decide (&dev, &own, FALSE, &why), ==, VB_SLOT_REBUILD);
  g_assert_nonnull (strstr (why, "below the bitmap's events_cleared 7"));
  /* superblocks from before events_cleared: nothing older is trusted */
  dev.features &= ~VB_SB_FEATURE_EVENTS_CLEARED;
  dev.events_cleared = 0;
  own = own_sb (&dev, 9);
  g_assert_cmpint (decide (&dev, &own, FALSE, NULL), ==, VB_SLOT_REBUILD);
  g_assert_cmpuint (vb_assembly_events_cleared (&dev), ==, dev.events);
  own = own_sb (&dev, 10);
  g_assert_cmpint (decide (&dev, &own, FALSE, NULL), ==, VB_SLOT_CURRENT);
  /* without a bitmap, or on md (no vblk bitmap while it runs): rebuilt */
  dev = device_sb ();
  own = own_sb (&dev, 9);
  {
    VbSlotFacts md = { &dev, 1, TRUE, &own, leg_uuids[0], FALSE, FALSE, FALSE };
    g_assert_cmpint (vb_assembly_decide (&md, NULL), ==, VB_SLOT_REBUILD);
  }
  dev.features &= ~VB_SB_FEATURE_BITMAP;
  g_assert_cmpint (decide (&dev, &own, FALSE, NULL), ==, VB_SLOT_REBUILD);
  /* a copy taken while it was being rebuilt */
  dev = device_sb ();
  own = own_sb (&dev, 9);
  own.roles[1].state = VB_ROLE_REBUILDING;
  g_assert_cmpint (decide (&dev, &own, FALSE, NULL), ==, VB_SLOT_REBUILD);
}

/* A spare took the slot of a failed component over, and vblkd stopped
 * before the desired state recorded it (torture seed 1, 120-s runs): the
 * failed component stays out; it is no stranger to be rebuilt in. */
static void
test_rule_taken_by_spare (void)
{
  VbSuperblock dev = device_sb ();
  VbSuperblock own = own_sb (&dev, 9);
  const char *spare = "3d4e5f6a-7b8c-4d9e-8f0a-1b2c3d4e5f6a";
  VbSlotFacts facts = {
    .device = &dev,
    .slot = 1,
    .present = TRUE,
    .own = &own,
    .newest = leg_uuids[0],
    .use_bitmap = TRUE,
    .can_resume = TRUE,
  };
  g_autofree char *why = NULL;

  g_strlcpy (dev.roles[1].uuid, spare, sizeof dev.roles[1].uuid);
  dev.roles[1].state = VB_ROLE_REBUILDING;
  g_assert_cmpint (vb_assembly_decide (&facts, NULL), ==, VB_SLOT_REBUILD);
  facts.taken_by_spare = TRUE;
  g_assert_cmpint (vb_assembly_decide (&facts, &why), ==, VB_SLOT_FAULTY);
  g_assert_nonnull (strstr (why, "a spare took this slot over"));
  /* an explicit re-add still brings it back */
  facts.readd = TRUE;
  g_assert_cmpint (vb_assembly_decide (&facts, NULL), !=, VB_SLOT_FAULTY);
}

static void
test_rule_membership (void)
{
  VbSuperblock dev = device_sb ();
  VbSuperblock own = own_sb (&dev, 10);
  VbSlotFacts facts = { &dev, 1, FALSE, &own, leg_uuids[0], TRUE, TRUE, FALSE };

  g_assert_cmpint (vb_assembly_decide (&facts, NULL), ==, VB_SLOT_MISSING);
  /* blank, another slot's superblock, another component */
  g_assert_cmpint (decide (&dev, NULL, FALSE, NULL), ==, VB_SLOT_REBUILD);
  own.role = 0;
  g_assert_cmpint (decide (&dev, &own, FALSE, NULL), ==, VB_SLOT_REBUILD);
  own = own_sb (&dev, 10);
  g_strlcpy (own.component_uuid, "2c3d4e5f-6a7b-4c8d-8e9f-0a1b2c3d4e5f", sizeof own.component_uuid);
  g_assert_cmpint (decide (&dev, &own, FALSE, NULL), ==, VB_SLOT_REBUILD);
  /* a slot whose member failed or went away, another disk at its path (a
   * blank one that took an unplugged one's number): it stays out, unless
   * a component is added there (a re-add makes it the slot's new member) */
  for (guint k = 0; k < 2; k++)
    {
      dev.roles[1].state = k == 0 ? VB_ROLE_FAULTY : VB_ROLE_MISSING;
      g_assert_cmpint (decide (&dev, NULL, FALSE, NULL), ==, VB_SLOT_FAULTY);
      g_assert_cmpint (decide (&dev, &own, FALSE, NULL), ==, VB_SLOT_FAULTY);
      g_assert_cmpint (decide (&dev, NULL, TRUE, NULL), ==, VB_SLOT_REBUILD);
    }
}

/* Rule 1c: a blank disk at the path of the component that both the
 * device's table and the desired state name for the slot is another disk
 * (the component's superblock was written there): a stranger, never
 * written, whatever the slot's state (torture seed 2, 120-s run, step 138:
 * a leg being rebuilt, unplugged while the device was stopped, and a blank
 * disk at its number rebuilt onto). A blank disk the desired state puts in
 * a slot of another component (added while stopped) is new: rebuilt. */
static void
test_rule_stranger (void)
{
  VbSuperblock dev = device_sb ();
  VbSlotFacts facts = {
    .device = &dev,
    .slot = 1,
    .present = TRUE,
    .own = NULL,
    .newest = leg_uuids[0],
    .use_bitmap = TRUE,
    .can_resume = TRUE,
    .named = TRUE,
  };
  const VbRoleState states[] = { VB_ROLE_IN_SYNC, VB_ROLE_REBUILDING };
  g_autofree char *why = NULL;

  for (guint k = 0; k < G_N_ELEMENTS (states); k++)
    {
      dev.roles[1].state = states[k];
      facts.readd = FALSE;
      facts.named = TRUE;
      g_clear_pointer (&why, g_free);
      g_assert_cmpint (vb_assembly_decide (&facts, &why), ==, VB_SLOT_STRANGER);
      g_assert_nonnull (strstr (why, "is blank, not its component"));
      g_assert_nonnull (strstr (why, dev.roles[1].uuid));
      /* an administrator's re-add of the path makes the disk the member */
      facts.readd = TRUE;
      g_assert_cmpint (vb_assembly_decide (&facts, NULL), ==, VB_SLOT_REBUILD);
      /* the desired state names another component there (or a
       * reconfiguration's new slot): new to the device */
      facts.readd = FALSE;
      facts.named = FALSE;
      g_assert_cmpint (vb_assembly_decide (&facts, NULL), ==, VB_SLOT_REBUILD);
    }
  /* failed or gone: rule 1b comes first */
  dev.roles[1].state = VB_ROLE_FAULTY;
  facts.named = TRUE;
  g_assert_cmpint (vb_assembly_decide (&facts, NULL), ==, VB_SLOT_FAULTY);
  /* the slot's component there with its superblock: current */
  VbSuperblock own = own_sb (&dev, 10);
  dev.roles[1].state = VB_ROLE_IN_SYNC;
  facts.own = &own;
  g_assert_cmpint (vb_assembly_decide (&facts, NULL), ==, VB_SLOT_CURRENT);
  g_assert_cmpstr (vb_slot_decision_to_string (VB_SLOT_STRANGER), ==, "stranger");
}

/* A failed component stays faulty until an explicit re-add; a missing one
 * comes back through the bitmap when the bitmap kept what it missed. */
static void
test_rule_faulty_and_missing (void)
{
  VbSuperblock dev = device_sb ();
  VbSuperblock own = own_sb (&dev, 8);
  g_autofree char *why = NULL;

  dev.roles[1].state = VB_ROLE_FAULTY;
  g_assert_cmpint (decide (&dev, &own, FALSE, &why), ==, VB_SLOT_FAULTY);
  g_assert_nonnull (strstr (why, "re-added"));
  g_assert_cmpint (decide (&dev, &own, TRUE, NULL), ==, VB_SLOT_RESYNC);
  own = own_sb (&dev, 5);
  own.roles[1].state = VB_ROLE_IN_SYNC;
  g_assert_cmpint (decide (&dev, &own, TRUE, NULL), ==, VB_SLOT_REBUILD);
  /* the same component at equal events: still faulty */
  own = own_sb (&dev, 10);
  own.roles[1].state = VB_ROLE_IN_SYNC;
  g_assert_cmpint (decide (&dev, &own, FALSE, NULL), ==, VB_SLOT_FAULTY);

  dev.roles[1].state = VB_ROLE_MISSING;
  own = own_sb (&dev, 8);
  own.roles[1].state = VB_ROLE_IN_SYNC;
  g_assert_cmpint (decide (&dev, &own, FALSE, NULL), ==, VB_SLOT_RESYNC);
  own = own_sb (&dev, 6);
  g_assert_cmpint (decide (&dev, &own, FALSE, NULL), ==, VB_SLOT_REBUILD);
}

/* Split brain: each leg ran without the other. The returning one's own
 * table says the newest was missing: its writes are in no bitmap of the
 * device, so the bitmap cannot make it equal. */
static void
test_rule_split_brain (void)
{
  VbSuperblock dev = device_sb ();
  VbSuperblock own;
  g_autofree char *why = NULL;

  dev.roles[1].state = VB_ROLE_MISSING;
  own = own_sb (&dev, 9);
  own.roles[0].state = VB_ROLE_MISSING;
  own.roles[1].state = VB_ROLE_IN_SYNC;
  g_assert_cmpint (decide (&dev, &own, FALSE, &why), ==, VB_SLOT_REBUILD);
  g_assert_nonnull (strstr (why, "diverged"));
  /* equal events too */
  own.events = dev.events;
  g_assert_cmpint (decide (&dev, &own, FALSE, NULL), ==, VB_SLOT_REBUILD);
  own.roles[0].state = VB_ROLE_FAULTY;
  g_assert_cmpint (decide (&dev, &own, TRUE, NULL), ==, VB_SLOT_REBUILD);
  /* its table saw the newest rebuilding: no split brain, the bitmap holds it */
  own = own_sb (&dev, 9);
  own.roles[0].state = VB_ROLE_REBUILDING;
  own.roles[1].state = VB_ROLE_IN_SYNC;
  g_assert_cmpint (decide (&dev, &own, FALSE, NULL), ==, VB_SLOT_RESYNC);
}

static void
test_rule_resume (void)
{
  VbSuperblock dev = device_sb ();
  VbSuperblock own = own_sb (&dev, 10);
  VbSlotFacts facts = { &dev, 1, TRUE, &own, leg_uuids[0], TRUE, FALSE, FALSE };

  dev.roles[1].state = VB_ROLE_REBUILDING;
  own.roles[1].state = VB_ROLE_REBUILDING;
  dev.rebuild_offset = 4 << 20;
  g_assert_cmpint (decide (&dev, &own, FALSE, NULL), ==, VB_SLOT_RESUME);
  /* raid10: a device offset is not a component offset */
  g_assert_cmpint (vb_assembly_decide (&facts, NULL), ==, VB_SLOT_REBUILD);
  /* it missed a superblock write: it cannot have every write since */
  own.events = 9;
  g_assert_cmpint (decide (&dev, &own, FALSE, NULL), ==, VB_SLOT_REBUILD);
  own.events = 10;
  dev.rebuild_offset = 0;
  g_assert_cmpint (decide (&dev, &own, FALSE, NULL), ==, VB_SLOT_REBUILD);
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
  ADD ("/engine-meta/reports", test_reports);
  ADD ("/engine-meta/stale-never-read", test_stale_never_read);
  ADD ("/engine-meta/bad-superblock-refused", test_bad_superblock_refused);
  ADD ("/engine-meta/foreign-refused", test_foreign_refused);
  ADD ("/engine-meta/sizes", test_sizes);
  ADD ("/engine-meta/stale-copy-rebuilt", test_stale_copy_rebuilt);
  ADD ("/engine-meta/old-superblocks", test_old_superblocks);
  ADD ("/engine-meta/failed-stays-faulty", test_failed_stays_faulty);
  ADD ("/engine-meta/gone-recorded-missing", test_gone_recorded_missing);
  ADD ("/engine-meta/settled-without-bitmap", test_settled_without_bitmap);
  g_test_add_func ("/assembly-rule/in-sync-and-stale", test_rule_in_sync_and_stale);
  g_test_add_func ("/assembly-rule/membership", test_rule_membership);
  g_test_add_func ("/assembly-rule/stranger", test_rule_stranger);
  g_test_add_func ("/assembly-rule/taken-by-spare", test_rule_taken_by_spare);
  g_test_add_func ("/assembly-rule/faulty-and-missing", test_rule_faulty_and_missing);
  g_test_add_func ("/assembly-rule/split-brain", test_rule_split_brain);
  g_test_add_func ("/assembly-rule/resume", test_rule_resume);
  ADD ("/engine-meta/single-copy/fresh", test_single_fresh);
  ADD ("/engine-meta/single-copy/stale-refused", test_single_stale_refused);
  ADD ("/engine-meta/single-copy/refusals", test_single_refusals);
  ADD ("/engine-meta/single-copy/grown", test_single_grown);

  ADD ("/engine-meta/single-copy/none", test_single_none);
  return g_test_run ();
}
