/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The FUSE server: one file in a private FUSE mount, whose bytes are an
 * engine device, so the kernel loop driver can make a real block node of
 * it. vblkd mounts it itself and speaks the protocol (fuse-proto.c) on a
 * few serving threads, each reading its own clone of the session's
 * /dev/fuse fd when the ring says a request waits, and serving requests
 * asynchronously on its own ring: many in flight per thread, answered as
 * they complete. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "fuse-server.h"

#include "fuse-proto.h"
#include "vb-error.h"
#include "vb-report.h"

#include <errno.h>
#include <fcntl.h>
#include <libmount.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define MAX_THREADS 4
#define RING_ENTRIES 256

/* --- a serving thread ------------------------------------------------------- */

static void arm_poll (FuseThread *t);

void
vb_fuse_slot_release (FuseSlot *slot)
{
  FuseThread *t = slot->thread;

  slot->next_free = t->free;
  t->free = slot;
  t->in_flight--;
  /* the reads stopped for want of a slot go on */
  if (t->starved && !t->stopping)
    {
      t->starved = FALSE;
      arm_poll (t);
    }
}

/* Reads the requests that wait, each into a free slot, until none waits
 * (then the ring watches the fd again) or no slot is free (then the next
 * slot released does). */
static void
read_requests (FuseThread *t)
{
  t->starved = t->free == NULL;
  while (t->free && !t->stopping)
    {
      FuseSlot *slot = t->free;
      struct iovec iov[2] = { { slot->head, FUSE_HEAD_BYTES }, { slot->data, FUSE_DATA_BYTES } };
      gssize n = readv (t->fd, iov, 2);

      if (n < 0)
        {
          if (errno == EAGAIN)
            {
              arm_poll (t);
              return;
            }
          /* ENOENT: a request interrupted before it was read */
          if (errno == EINTR || errno == ENOENT)
            continue;
          /* ENODEV: the connection ended (unmounted, aborted) */
          if (errno != ENODEV)
            vb_report (t->server->path, VB_REPORT_WARNING, "reading /dev/fuse: %s",
                       g_strerror (errno));
          t->stopping = TRUE;
          return;
        }
      t->free = slot->next_free;
      t->in_flight++;
      vb_fuse_handle (slot, (gsize) n);
      t->starved = t->free == NULL;
    }
}

static void
on_poll (VbRingOp *op, int res)
{
  FuseThread *t = G_STRUCT_MEMBER_P (op, -G_STRUCT_OFFSET (FuseThread, poll_op));

  t->polling = FALSE;
  read_requests (t);
}

static void
arm_poll (FuseThread *t)
{
  struct io_uring_sqe *sqe;

  if (t->polling)
    return;
  sqe = vb_ring_sqe (t->ring, &t->poll_op);

  io_uring_prep_poll_add (sqe, t->fd, POLLIN);
  t->polling = TRUE;
}

static void
on_quit (VbRingOp *op, int res)
{
  FuseThread *t = G_STRUCT_MEMBER_P (op, -G_STRUCT_OFFSET (FuseThread, quit_op));

  t->stopping = TRUE;
}

/* Until the connection ends and every request it started is answered. */
static gpointer
serve (gpointer data)
{
  FuseThread *t = data;

  read_requests (t);
  while (!t->stopping || t->in_flight > 0)
    {
      int r = vb_ring_run (t->ring, TRUE);
      if (r < 0)
        {
          vb_report (t->server->path, VB_REPORT_WARNING, "FUSE thread: io_uring: %s",
                     g_strerror (-r));
          break;
        }
    }
  return NULL;
}

/* (t->server and t->fd are set by start_threads) */
static gboolean
thread_init (FuseThread *t, GError **error)
{
  t->poll_op.func = on_poll;
  t->quit_op.func = on_quit;
  if (posix_memalign ((void **) &t->data, 4096, (gsize) FUSE_SLOTS * FUSE_DATA_BYTES) != 0)
    g_error ("out of memory");
  for (guint i = 0; i < FUSE_SLOTS; i++)
    {
      FuseSlot *slot = &t->slots[i];
      vb_engine_io_init (&slot->io);
      slot->thread = t;
      slot->data = t->data + (gsize) i * FUSE_DATA_BYTES;
      slot->next_free = t->free;
      t->free = slot;
    }
  t->ring = vb_ring_new (RING_ENTRIES, error);
  return t->ring != NULL;
}

void
vb_fuse_thread_register_buffers (FuseThread *t)
{
  int e;

  if (t->data_registered)
    return;
  t->data_registered = TRUE;
  e = vb_ring_register_buffer (t->ring, t->data, (gsize) FUSE_SLOTS * FUSE_DATA_BYTES);
  if (e < 0)
    vb_report (t->server->path, VB_REPORT_INFO,
               "FUSE thread: buffers not registered with io_uring (%s): plain reads and writes",
               g_strerror (-e));
}

static void
thread_clear (FuseThread *t)
{
  for (guint i = 0; i < FUSE_SLOTS; i++)
    {
      vb_engine_io_clear (&t->slots[i].io);
      t->slots[i].data = NULL;
    }
  g_clear_pointer (&t->ring, vb_ring_free);
  g_clear_pointer (&t->data, free);
  if (t->fd >= 0 && t->fd != t->server->fd)
    close (t->fd);
}

/* The session's fd for thread 0, a clone of it (FUSE_DEV_IOC_CLONE: the
 * kernel answers a request only on the fd it was read from) for the
 * others; non-blocking, as the ring polls them. */
static int
thread_fd (VbFuseServer *s, guint i)
{
  guint32 session = (guint32) s->fd;
  int fd;

  if (i == 0)
    return s->fd;
  fd = open ("/dev/fuse", O_RDWR | O_CLOEXEC | O_NONBLOCK);
  if (fd >= 0 && ioctl (fd, FUSE_DEV_IOC_CLONE, &session) < 0)
    {
      int e = errno;
      close (fd);
      errno = e;
      return -1;
    }
  return fd;
}

/* --- the mount --------------------------------------------------------------- */

static gboolean
mount_fuse (VbFuseServer *s, const char *fsname, GError **error)
{
  g_autofree char *options = NULL;
  int e;

  s->fd = open ("/dev/fuse", O_RDWR | O_CLOEXEC | O_NONBLOCK);
  if (s->fd < 0)
    {
      e = errno;
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("/dev/fuse: %s"), g_strerror (e));
      return FALSE;
    }
  /* the mount's source names its owner, so that who serves a loop device
   * over this file is known from mountinfo without opening anything */
  options = g_strdup_printf ("fd=%d,rootmode=40000,user_id=%u,group_id=%u,default_permissions",
                             s->fd, getuid (), getgid ());
  if (mount (fsname, s->mountpoint, "fuse.vblk", MS_NOSUID | MS_NODEV | MS_NOEXEC, options) < 0)
    {
      e = errno;
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("FUSE mount on %s failed: %s"),
                   s->mountpoint, g_strerror (e));
      return FALSE;
    }
  s->mounted = TRUE;
  return TRUE;
}

static gboolean
start_threads (VbFuseServer *s, GError **error)
{
  s->n_threads = CLAMP (g_get_num_processors (), 1, MAX_THREADS);
  s->threads = g_new0 (FuseThread, s->n_threads);
  /* (so that a failure part way leaves every thread clearable) */
  for (guint i = 0; i < s->n_threads; i++)
    {
      s->threads[i].server = s;
      s->threads[i].fd = -1;
    }
  for (guint i = 0; i < s->n_threads; i++)
    {
      FuseThread *t = &s->threads[i];
      if (!thread_init (t, error))
        return FALSE;
      t->fd = thread_fd (s, i);
      if (t->fd < 0)
        {
          int e = errno;
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("cloning /dev/fuse: %s"),
                       g_strerror (e));
          return FALSE;
        }
      t->thread = g_thread_new ("vblk-fuse", serve, t);
    }
  return TRUE;
}

VbFuseServer *
vb_fuse_server_new (const char *mountpoint, const char *file_name, const char *fsname,
                    VbEngineSwitch *sw, GError **error)
{
  VbFuseServer *s = g_new0 (VbFuseServer, 1);

  s->mountpoint = g_strdup (mountpoint);
  s->file_name = g_strdup (file_name);
  s->path = g_build_filename (mountpoint, file_name, NULL);
  s->sw = sw;
  s->fd = -1;
  if (g_mkdir_with_parents (mountpoint, 0700) < 0)
    {
      int e = errno;
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: %s", mountpoint, g_strerror (e));
      vb_fuse_server_free (s);
      return NULL;
    }
  if (!mount_fuse (s, fsname, error) || !start_threads (s, error))
    {
      vb_fuse_server_free (s);
      return NULL;
    }
  {
    /* (a stat waits for the kernel's INIT, which thread 0 answers) */
    struct stat st;
    if (stat (mountpoint, &st) == 0 && major (st.st_dev) == 0)
      s->connection = minor (st.st_dev);
  }
  return s;
}

const char *
vb_fuse_server_path (VbFuseServer *s)
{
  return s->path;
}

#define FUSECTL "/sys/fs/fuse/connections"

char *
vb_fuse_source_of (const char *path)
{
  struct libmnt_table *table = mnt_new_table_from_file ("/proc/self/mountinfo");
  struct libmnt_iter *iter;
  struct libmnt_fs *fs;
  char *source = NULL;
  gsize best = 0;

  if (table == NULL)
    return NULL;
  iter = mnt_new_iter (MNT_ITER_FORWARD);
  while (mnt_table_next_fs (table, iter, &fs) == 0)
    {
      const char *target = mnt_fs_get_target (fs);
      gsize len = target ? strlen (target) : 0;
      /* the deepest mount whose target holds the path */
      if (len <= best || strncmp (path, target, len) != 0 || path[len] != '/')
        continue;
      best = len;
      g_free (source);
      source = g_strcmp0 (mnt_fs_get_fstype (fs), "fuse.vblk") == 0
                   ? g_strdup (mnt_fs_get_source (fs))
                   : NULL;
    }
  mnt_free_iter (iter);
  mnt_unref_table (table);
  return source;
}

/* Ends the kernel connection (fusectl's abort): every request waiting on
 * it fails, every thread reading /dev/fuse wakes. FALSE when it was gone. */
static gboolean
abort_connection (VbFuseServer *s)
{
  g_autofree char *path = NULL;
  gboolean ok;
  int fd;

  if (s->connection == 0)
    return FALSE;
  path = g_strdup_printf (FUSECTL "/%u/abort", s->connection);
  /* fusectl is mounted at boot on most systems; not always in containers */
  if (!g_file_test (path, G_FILE_TEST_EXISTS) && g_file_test (FUSECTL, G_FILE_TEST_IS_DIR))
    mount ("fusectl", FUSECTL, "fusectl", 0, NULL);
  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    return FALSE;
  g_debug ("%s: ending FUSE connection %u", s->path, s->connection);
  /* a plain write: fusectl files take no temp file and rename */
  fd = open (path, O_WRONLY | O_CLOEXEC);
  ok = fd >= 0 && write (fd, "1", 1) == 1;
  if (fd >= 0)
    close (fd);
  return ok;
}

void
vb_fuse_server_free (VbFuseServer *s)
{
  if (s == NULL)
    return;
  /* unmounting ends the kernel connection, which wakes every serving
   * thread — but only once the last reference to the mount is gone, and a
   * process that made a mount namespace since (a service started with its
   * own /tmp, say) holds a copy of it: the connection is ended by hand,
   * nothing uses it any more */
  if (s->mounted)
    umount2 (s->mountpoint, MNT_DETACH);
  abort_connection (s);
  for (guint i = 0; s->threads && i < s->n_threads; i++)
    if (s->threads[i].thread)
      {
        /* (the connection's end wakes its poll; this, one never armed) */
        vb_ring_post (s->threads[i].ring, &s->threads[i].quit_op, 0);
        g_clear_pointer (&s->threads[i].thread, g_thread_join);
      }
  for (guint i = 0; s->threads && i < s->n_threads; i++)
    thread_clear (&s->threads[i]);
  g_free (s->threads);
  if (s->fd >= 0)
    close (s->fd);
  rmdir (s->mountpoint);
  g_free (s->mountpoint);
  g_free (s->file_name);
  g_free (s->path);
  g_free (s);
}

gboolean
vb_fuse_server_abort (VbFuseServer *s)
{
  gboolean ok = abort_connection (s);

  if (ok)
    vb_report (s->path, VB_REPORT_WARNING, "FUSE connection %u aborted (its file was still in use)",
               s->connection);
  return ok;
}

int
vb_fuse_server_size_changed (VbFuseServer *s)
{
  struct stat st;
  int r = vb_fuse_notify_size (s);

  if (r < 0)
    return r;
  /* a getattr now sets the inode's size, which loop reads */
  if (stat (s->path, &st) < 0)
    return -errno;
  return (guint64) st.st_size == vb_engine_switch_size (s->sw) ? 0 : -EAGAIN;
}

const char *
vb_fuse_server_mountpoint (VbFuseServer *s)
{
  return s->mountpoint;
}

guint
vb_fuse_cleanup_stale (const char *dir, GHashTable *live)
{
  struct libmnt_table *table = mnt_new_table_from_file ("/proc/self/mountinfo");
  struct libmnt_iter *iter;
  struct libmnt_fs *fs;
  g_autofree char *prefix = g_strconcat (dir, "/", NULL);
  g_autoptr (GPtrArray) targets = g_ptr_array_new_with_free_func (g_free);
  guint cleaned = 0;

  if (table == NULL)
    return 0;
  iter = mnt_new_iter (MNT_ITER_BACKWARD);
  while (mnt_table_next_fs (table, iter, &fs) == 0)
    {
      const char *target = mnt_fs_get_target (fs);
      const char *type = mnt_fs_get_fstype (fs);
      if (target && g_str_has_prefix (target, prefix) && type && g_str_has_prefix (type, "fuse")
          && !(live && g_hash_table_contains (live, target)))
        g_ptr_array_add (targets, g_strdup (target));
    }
  mnt_free_iter (iter);
  mnt_unref_table (table);
  for (guint i = 0; i < targets->len; i++)
    {
      const char *target = targets->pdata[i];
      /* its server died with the old vblkd: detach it; a loop device still
       * holding the file keeps the dead connection until it is detached */
      if (umount2 (target, MNT_DETACH) == 0)
        {
          cleaned++;
          rmdir (target);
        }
    }
  return cleaned;
}
