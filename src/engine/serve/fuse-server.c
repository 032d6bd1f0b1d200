/* The FUSE server: one file in a private FUSE mount, whose bytes are a
 * block device served through VbBlockOps, so the kernel loop driver can
 * make a real block node of an engine device. direct_io everywhere: the
 * page cache never holds the file, so writeback can never wait on the very
 * threads that serve it. */
#define FUSE_USE_VERSION 314

#include "config.h"

#include "fuse-server.h"

#include "vb-error.h"
#include "vb-report.h"

#include <errno.h>
#include <fuse3/fuse.h>
#include <libmount.h>
#include <linux/falloc.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define FUSE_THREADS 8
#define FUSE_MAX_WRITE (1u << 20)

struct _VbFuseServer {
  char *mountpoint;
  char *file_name; /* without the leading '/' */
  char *path;      /* mountpoint/file_name */
  const VbBlockOps *ops;
  void *handle;
  struct fuse *fuse;
  GThread *thread;
  gboolean mounted;
  guint connection; /* the kernel's connection number (fusectl), 0: unknown */
};

static VbFuseServer *
server (void)
{
  return fuse_get_context ()->private_data;
}

static gboolean
is_data (const char *path)
{
  return path[0] == '/' && strcmp (path + 1, server ()->file_name) == 0;
}

static void *
fs_init (struct fuse_conn_info *conn, struct fuse_config *cfg)
{
  cfg->direct_io = 1;
  cfg->kernel_cache = 0;
  cfg->attr_timeout = 1.0;
  cfg->entry_timeout = 1.0;
  cfg->use_ino = 1;
  conn->max_write = FUSE_MAX_WRITE;
  conn->want &= ~FUSE_CAP_SPLICE_READ;
  return fuse_get_context ()->private_data;
}

static int
fs_getattr (const char *path, struct stat *st, struct fuse_file_info *fi)
{
  VbFuseServer *s = server ();

  memset (st, 0, sizeof *st);
  st->st_uid = getuid ();
  st->st_gid = getgid ();
  if (strcmp (path, "/") == 0)
    {
      st->st_ino = 1;
      st->st_mode = S_IFDIR | 0700;
      st->st_nlink = 2;
      return 0;
    }
  if (!is_data (path))
    return -ENOENT;
  st->st_ino = 2;
  st->st_mode = S_IFREG | (s->ops->read_only (s->handle) ? 0400 : 0600);
  st->st_nlink = 1;
  st->st_size = s->ops->size (s->handle);
  st->st_blksize = s->ops->block_size (s->handle);
  st->st_blocks = st->st_size / 512;
  return 0;
}

static int
fs_readdir (const char *path, void *buf, fuse_fill_dir_t fill, off_t offset,
            struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
  if (strcmp (path, "/") != 0)
    return -ENOTDIR;
  fill (buf, ".", NULL, 0, 0);
  fill (buf, "..", NULL, 0, 0);
  fill (buf, server ()->file_name, NULL, 0, 0);
  return 0;
}

static int
fs_open (const char *path, struct fuse_file_info *fi)
{
  VbFuseServer *s = server ();

  if (!is_data (path))
    return -ENOENT;
  if ((fi->flags & O_ACCMODE) != O_RDONLY && s->ops->read_only (s->handle))
    return -EROFS;
  fi->direct_io = 1;
  fi->keep_cache = 0;
  return 0;
}

static int
fs_read (const char *path, char *buf, size_t size, off_t offset, struct fuse_file_info *fi)
{
  VbFuseServer *s = server ();
  guint64 end = s->ops->size (s->handle);
  int r;

  if ((guint64) offset >= end)
    return 0;
  size = MIN (size, end - offset);
  r = s->ops->pread (s->handle, buf, size, offset);
  return r < 0 ? r : (int) size;
}

static int
fs_write (const char *path, const char *buf, size_t size, off_t offset, struct fuse_file_info *fi)
{
  VbFuseServer *s = server ();
  gboolean fua = (fi->flags & (O_DSYNC | O_SYNC)) != 0;
  int r = s->ops->pwrite (s->handle, buf, size, offset, fua);

  return r < 0 ? r : (int) size;
}

static int
fs_fsync (const char *path, int datasync, struct fuse_file_info *fi)
{
  VbFuseServer *s = server ();

  return s->ops->flush (s->handle);
}

static int
fs_fallocate (const char *path, int mode, off_t offset, off_t length, struct fuse_file_info *fi)
{
  VbFuseServer *s = server ();

  if (mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE))
    return s->ops->discard (s->handle, length, offset);
  if ((mode & ~FALLOC_FL_KEEP_SIZE) == FALLOC_FL_ZERO_RANGE)
    return s->ops->write_zeroes (s->handle, length, offset, FALSE);
  return -EOPNOTSUPP;
}

static int
fs_truncate (const char *path, off_t size, struct fuse_file_info *fi)
{
  VbFuseServer *s = server ();

  /* O_TRUNC of the same size is harmless; the size itself is the device's */
  return (guint64) size == s->ops->size (s->handle) ? 0 : -EPERM;
}

static const struct fuse_operations fs_operations = {
  .init = fs_init,
  .getattr = fs_getattr,
  .readdir = fs_readdir,
  .open = fs_open,
  .read = fs_read,
  .write = fs_write,
  .fsync = fs_fsync,
  .fallocate = fs_fallocate,
  .truncate = fs_truncate,
};

static gpointer
serve (gpointer data)
{
  VbFuseServer *s = data;
  struct fuse_loop_config *config = fuse_loop_cfg_create ();

  fuse_loop_cfg_set_max_threads (config, FUSE_THREADS);
  fuse_loop_cfg_set_idle_threads (config, 2);
  fuse_loop_mt (s->fuse, config);
  fuse_loop_cfg_destroy (config);
  return NULL;
}

VbFuseServer *
vb_fuse_server_new (const char *mountpoint, const char *file_name, const char *fsname,
                    const VbBlockOps *ops, void *handle, GError **error)
{
  VbFuseServer *s = g_new0 (VbFuseServer, 1);
  struct fuse_args args = FUSE_ARGS_INIT (0, NULL);
  g_autofree char *options = NULL;

  s->mountpoint = g_strdup (mountpoint);
  s->file_name = g_strdup (file_name);
  s->path = g_build_filename (mountpoint, file_name, NULL);
  s->ops = ops;
  s->handle = handle;

  if (g_mkdir_with_parents (mountpoint, 0700) < 0)
    {
      int e = errno;
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: %s", mountpoint, g_strerror (e));
      vb_fuse_server_free (s);
      return NULL;
    }
  fuse_opt_add_arg (&args, "vblkd");
  fuse_opt_add_arg (&args, "-o");
  /* the mount's source names its owner, so that who serves a loop device
   * over this file is known from mountinfo without opening anything */
  options = g_strdup_printf ("fsname=%s,subtype=vblk,default_permissions", fsname);
  fuse_opt_add_arg (&args, options);
  s->fuse = fuse_new (&args, &fs_operations, sizeof fs_operations, s);
  fuse_opt_free_args (&args);
  if (s->fuse == NULL || fuse_mount (s->fuse, mountpoint) != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   "FUSE mount on %s failed (is /dev/fuse there?)", mountpoint);
      vb_fuse_server_free (s);
      return NULL;
    }
  s->mounted = TRUE;
  s->thread = g_thread_new ("vblk-fuse", serve, s);
  {
    /* (a stat waits for the kernel's INIT, which the thread answers) */
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
  if (s->fuse)
    {
      fuse_exit (s->fuse);
      /* unmounting ends the kernel connection, which wakes every serving
       * thread blocked on /dev/fuse — but only once the last reference to
       * the mount is gone, and a process that made a mount namespace
       * since (a service started with its own /tmp, say) holds a copy of
       * it: the connection is ended by hand, nothing uses it any more */
      if (s->mounted)
        fuse_unmount (s->fuse);
      abort_connection (s);
      if (s->thread)
        g_thread_join (s->thread);
      fuse_destroy (s->fuse);
    }
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
  g_autofree char *path = g_strconcat ("/", s->file_name, NULL);
  struct stat st;
  int r;

  r = fuse_invalidate_path (s->fuse, path);
  /* -ENOENT: the kernel holds no inode of it (nothing to drop) */
  if (r < 0 && r != -ENOENT)
    return r;
  /* a getattr now sets the inode's size, which loop reads */
  if (stat (s->path, &st) < 0)
    return -errno;
  return (guint64) st.st_size == s->ops->size (s->handle) ? 0 : -EAGAIN;
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
