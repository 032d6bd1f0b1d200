/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Looking at component paths (vb-inspect.h): the only code of vblkd's
 * checks that touches a path given from outside. */
#include "config.h"

#include <inttypes.h>
#include <glib/gi18n-lib.h>

#include "vb-inspect.h"

#include "vb-inspect-private.h"

#include "metadata.h"
#include "vb-error.h"
#include "vb-open.h"

#include <errno.h>
#include <fcntl.h>
#include <libmount.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define BELOW_MAX_DEPTH 16

void
vb_path_facts_free (VbPathFacts *facts)
{
  if (facts == NULL)
    return;
  g_free (facts->path);
  g_free (facts->mounted_on);
  g_free (facts->holders);
  vb_node_owner_clear (&facts->owner);
  g_clear_pointer (&facts->below, g_ptr_array_unref);
  g_free (facts->superblock_error);
  g_free (facts);
}

VbIdentity
vb_path_facts_identity (const VbPathFacts *facts)
{
  return (VbIdentity){ .kind = facts->is_block ? 'b' : 'f',
                       .dev = facts->dev,
                       .ino = facts->is_block ? 0 : facts->ino };
}

gboolean
vb_identity_equal (const VbIdentity *a, const VbIdentity *b)
{
  return a->kind != 0 && a->kind == b->kind && a->dev == b->dev && a->ino == b->ino;
}

static char *
sysfs_of (dev_t devnum, const char *what)
{
  return g_strdup_printf ("/sys/dev/block/%u:%u/%s", major (devnum), minor (devnum), what);
}

/* The kernel names of the partitions of disk @devnum, and the disk's own
 * sysfs directory first ("" stands for it). */
static GPtrArray *
self_and_partitions (dev_t devnum)
{
  GPtrArray *out = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *dir_path = sysfs_of (devnum, "");
  g_autoptr (GDir) dir = g_dir_open (dir_path, 0, NULL);
  const char *entry;

  g_ptr_array_add (out, g_strdup (""));
  while (dir && (entry = g_dir_read_name (dir)))
    {
      g_autofree char *part = g_build_filename (dir_path, entry, "partition", NULL);
      if (g_file_test (part, G_FILE_TEST_EXISTS))
        g_ptr_array_add (out, g_strdup (entry));
    }
  return out;
}

/* Bytes of block device @devnum, from sysfs (0 when unknown). */
static guint64
sysfs_size (dev_t devnum)
{
  g_autofree char *path = sysfs_of (devnum, "size");
  g_autofree char *text = NULL;

  return g_file_get_contents (path, &text, NULL, NULL) ? g_ascii_strtoull (text, NULL, 10) * 512
                                                       : 0;
}

/* "dm-0, md127": the holders of @devnum and of its partitions. */
static char *
holders_of (dev_t devnum)
{
  g_autoptr (GPtrArray) parts = self_and_partitions (devnum);
  g_autoptr (GString) s = g_string_new (NULL);

  for (guint i = 0; i < parts->len; i++)
    {
      g_autofree char *rel = g_build_filename (parts->pdata[i], "holders", NULL);
      g_autofree char *path = sysfs_of (devnum, rel);
      g_autoptr (GDir) dir = g_dir_open (path, 0, NULL);
      const char *entry;
      while (dir && (entry = g_dir_read_name (dir)))
        g_string_append_printf (s, "%s%s", s->len ? ", " : "", entry);
    }
  return s->len ? g_string_free (g_steal_pointer (&s), FALSE) : NULL;
}

/* Where @devnum, or a partition of it, is mounted. */
static char *
mounted_on (struct libmnt_table *table, dev_t devnum)
{
  struct libmnt_iter *iter = mnt_new_iter (MNT_ITER_FORWARD);
  struct libmnt_fs *fs;
  char *target = NULL;

  while (target == NULL && mnt_table_next_fs (table, iter, &fs) == 0)
    {
      dev_t d = mnt_fs_get_devno (fs);
      g_autofree char *part = NULL, *link = NULL, *resolved = NULL, *parent = NULL, *text = NULL;
      guint maj, min;

      if (d == 0)
        continue;
      if (d == devnum)
        {
          target = g_strdup (mnt_fs_get_target (fs));
          break;
        }
      /* a partition of devnum: its sysfs node sits under devnum's */
      part = sysfs_of (d, "partition");
      if (!g_file_test (part, G_FILE_TEST_EXISTS))
        continue;
      link = sysfs_of (d, "");
      resolved = realpath (link, NULL);
      parent = resolved ? g_build_filename (resolved, "..", "dev", NULL) : NULL;
      if (parent && g_file_get_contents (parent, &text, NULL, NULL)
          && sscanf (text, "%u:%u", &maj, &min) == 2 && makedev (maj, min) == devnum)
        target = g_strdup (mnt_fs_get_target (fs));
    }
  mnt_free_iter (iter);
  return target;
}

/* Every vblk node @devnum is built on: itself excluded, through the
 * kernel's slaves links (dm, md, loop over a device), depth first. */
static void
collect_below (dev_t devnum, GPtrArray *below, guint depth)
{
  g_autofree char *path = sysfs_of (devnum, "slaves");
  g_autoptr (GDir) dir = NULL;
  const char *entry;

  if (depth > BELOW_MAX_DEPTH || (dir = g_dir_open (path, 0, NULL)) == NULL)
    return;
  while ((entry = g_dir_read_name (dir)))
    {
      g_autofree char *dev_file = g_build_filename (path, entry, "dev", NULL);
      g_autofree char *text = NULL;
      VbNodeOwner owner = { 0 };
      guint maj, min;

      if (!g_file_get_contents (dev_file, &text, NULL, NULL)
          || sscanf (text, "%u:%u", &maj, &min) != 2)
        continue;
      if (vb_backends_node_owner (makedev (maj, min), &owner))
        g_ptr_array_add (below, g_memdup2 (&owner, sizeof owner));
      collect_below (makedev (maj, min), below, depth + 1);
    }
}

static void
owner_free (VbNodeOwner *owner)
{
  vb_node_owner_clear (owner);
  g_free (owner);
}

gboolean
vb_inspect_is_vblk_node (dev_t devnum, char **why)
{
  g_auto (VbNodeOwner) owner = { 0 };
  g_autoptr (GPtrArray) below = NULL;

  if (vb_backends_node_owner (devnum, &owner))
    {
      if (why)
        *why = g_strdup_printf ("a block node vblk made (%s backend, instance %s, device %s%s)",
                                owner.backend, owner.instance, owner.uuid,
                                owner.internal ? ", used inside it" : "");
      return TRUE;
    }
  below = g_ptr_array_new_with_free_func ((GDestroyNotify) owner_free);
  collect_below (devnum, below, 0);
  if (below->len == 0)
    return FALSE;
  if (why)
    *why = g_strdup_printf ("built on a block node vblk made (device %s)",
                            ((VbNodeOwner *) below->pdata[0])->uuid);
  return TRUE;
}

static void
look_at_claims (VbPathFacts *f, const char *path)
{
  struct libmnt_table *table = mnt_new_table_from_file ("/proc/self/mountinfo");

  f->below = g_ptr_array_new_with_free_func ((GDestroyNotify) owner_free);
  if (f->is_block)
    {
      int fd;

      f->holders = holders_of (f->dev);
      f->mounted_on = table ? mounted_on (table, f->dev) : NULL;
      /* the kernel's claim: O_EXCL fails while a file system, md, dm or
       * an engine holds it; read-only, so the close sends udev nothing.
       * Not on a node vblk made (see inspect_now). */
      fd = f->owned && !(f->flags & VB_INSPECT_EXCLUSIVE)
               ? -1
               : open (path, O_RDONLY | O_EXCL | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0 && errno == EBUSY)
        f->exclusive = TRUE;
      if (fd >= 0)
        close (fd);
      collect_below (f->dev, f->below, 0);
    }
  else
    {
      struct libmnt_fs *fs = table ? mnt_table_find_devno (table, f->dev, MNT_ITER_BACKWARD) : NULL;
      VbNodeOwner owner = { 0 };

      f->engine_file = fs && g_strcmp0 (mnt_fs_get_fstype (fs), "fuse.vblk") == 0;
      /* a file on a file system that sits on a vblk node */
      if (vb_backends_node_owner (f->dev, &owner))
        g_ptr_array_add (f->below, g_memdup2 (&owner, sizeof owner));
      if (major (f->dev) != 0)
        collect_below (f->dev, f->below, 0);
    }
  if (table)
    mnt_unref_table (table);
}

static void
look_at_superblock (VbPathFacts *f, int fd)
{
  for (const VbMetadataHandler *const *h = vb_metadata_handlers (); *h; h++)
    {
      g_autoptr (GError) local = NULL;
      if (!(*h)->probe (fd, f->path))
        continue;
      f->has_superblock = (*h)->read (fd, f->path, &f->superblock, &local);
      if (!f->has_superblock)
        f->superblock_error = g_strdup (local ? local->message : "unreadable");
      return;
    }
}

static VbPathFacts *
inspect_now (const char *path, VbInspectFlags flags, GError **error)
{
  g_autoptr (VbPathFacts) f = g_new0 (VbPathFacts, 1);
  struct stat st;
  int fd;

  f->path = g_strdup (path);
  f->flags = flags;
  if (!vb_stat_component (path, &st))
    {
      vb_component_open_error (error, path, errno);
      return NULL;
    }
  f->is_block = S_ISBLK (st.st_mode);
  f->dev = f->is_block ? st.st_rdev : st.st_dev;
  f->ino = st.st_ino;
  f->size = (guint64) st.st_size;
  /* a node some vblkd made is known from sysfs and mountinfo, and never
   * opened here: an engine's own node, held open by the vblkd that
   * serves it when that one is killed, can hang its exit (the page cache
   * waits on the FUSE connection only its exit would end) */
  if (f->is_block && vb_backends_node_owner (f->dev, &f->owner))
    {
      f->owned = TRUE;
      f->size = sysfs_size (f->dev);
      if (flags & VB_INSPECT_CLAIMS)
        look_at_claims (f, path);
      return g_steal_pointer (&f);
    }
  fd = vb_open_component (path, VB_OPEN_DIRECT, NULL);
  if (fd < 0)
    {
      vb_component_open_error (error, path, errno);
      return NULL;
    }
  if (f->is_block && ioctl (fd, BLKGETSIZE64, &f->size) < 0)
    {
      vb_component_open_error (error, path, errno);
      close (fd);
      return NULL;
    }
  /* a loop device with nothing attached, an empty card reader */
  if (f->is_block && f->size == 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND,
                   _ ("component '%s': the block device has no medium (size 0)"), path);
      close (fd);
      return NULL;
    }
  if (flags & VB_INSPECT_SUPERBLOCK)
    look_at_superblock (f, fd);
  close (fd);
  if (flags & VB_INSPECT_CLAIMS)
    look_at_claims (f, path);
  return g_steal_pointer (&f);
}

/* One look, shared by the thread doing it and the caller waiting for it;
 * whichever lets go last frees it (a caller that gave up leaves the
 * thread to finish on its own). */
typedef struct {
  gint ref;
  GMutex lock;
  GCond cond;
  gboolean done;
  gboolean abandoned; /* the caller gave up on it: the path is marked stalled */
  char *path;
  VbInspectFlags flags;
  VbPathFacts *facts;
  GError *error;
} Look;

static void
look_unref (Look *look)
{
  if (!g_atomic_int_dec_and_test (&look->ref))
    return;
  g_free (look->path);
  vb_path_facts_free (look->facts);
  g_clear_error (&look->error);
  g_mutex_clear (&look->lock);
  g_cond_clear (&look->cond);
  g_free (look);
}

/* Paths whose look timed out and has not ended yet: the next look at one
 * fails at once instead of waiting its full time again (every op looks
 * at every component to show its state). */
static GMutex stalled_lock;
static GHashTable *stalled; /* path -> monotonic µs when given up on */

gboolean
vb_inspect_stalled_since (const char *path, gint64 *since)
{
  gpointer value = NULL;

  g_mutex_lock (&stalled_lock);
  if (stalled && g_hash_table_lookup_extended (stalled, path, NULL, &value))
    *since = GPOINTER_TO_SIZE (value) ? (gint64) GPOINTER_TO_SIZE (value) : 0;
  g_mutex_unlock (&stalled_lock);
  return value != NULL;
}

void
vb_inspect_stalled_set (const char *path, gboolean on)
{
  g_mutex_lock (&stalled_lock);
  if (stalled == NULL)
    stalled = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  if (on)
    g_hash_table_replace (stalled, g_strdup (path),
                          GSIZE_TO_POINTER ((gsize) g_get_monotonic_time ()));
  else
    g_hash_table_remove (stalled, path);
  g_mutex_unlock (&stalled_lock);
}

/* The looks run on a pool's threads: one made for each look was a sixth
 * of a change's cost with 1,000 devices. A look that hangs keeps its
 * thread; the pool (no limit) makes another for the next. */
static GThreadPool *look_pool;
static GOnce pool_once = G_ONCE_INIT;

static void
look_run (gpointer data, gpointer user_data)
{
  Look *look = data;
  GError *error = NULL;
  VbPathFacts *facts = inspect_now (look->path, look->flags, &error);

  g_mutex_lock (&look->lock);
  /* it answered after all: the next look waits for it again */
  if (look->abandoned)
    vb_inspect_stalled_set (look->path, FALSE);
  look->facts = facts;
  look->error = error;
  look->done = TRUE;
  g_cond_signal (&look->cond);
  g_mutex_unlock (&look->lock);
  look_unref (look);
}

static gpointer
make_look_pool (gpointer data)
{
  return g_thread_pool_new (look_run, NULL, -1, FALSE, NULL);
}

/* @timeout_ms, or the tests' VBLK_TEST_INSPECT_TIMEOUT_MS. */
guint
vb_inspect_look_timeout (guint timeout_ms)
{
  const char *test_timeout = g_getenv ("VBLK_TEST_INSPECT_TIMEOUT_MS");

  return test_timeout ? (guint) g_ascii_strtoull (test_timeout, NULL, 10) : timeout_ms;
}

VbPathFacts *
vb_inspect (const char *path, VbInspectFlags flags, guint timeout_ms, GError **error)
{
  g_autoptr (GError) push_error = NULL;
  VbPathFacts *facts = NULL;
  Look *look;
  gint64 deadline;

  gint64 since = 0;

  g_return_val_if_fail (path != NULL, NULL);
  if (timeout_ms == 0)
    return inspect_now (path, flags, error);
  timeout_ms = vb_inspect_look_timeout (timeout_ms);
  if (vb_inspect_stalled_since (path, &since))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("component '%s': still not answering (a look at it has waited %" PRId64
                      " s); nothing was changed"),
                   path, (g_get_monotonic_time () - since) / G_USEC_PER_SEC);
      return NULL;
    }

  look = g_new0 (Look, 1);
  look->ref = 2;
  g_mutex_init (&look->lock);
  g_cond_init (&look->cond);
  look->path = g_strdup (path);
  look->flags = flags;
  look_pool = g_once (&pool_once, make_look_pool, NULL);
  /* No thread to be had: the look still waits in the pool's queue (GLib
   * keeps it), run once a thread is free, or given up on below. */
  if (!g_thread_pool_push (look_pool, look, &push_error))
    g_warning ("vblk: looking at '%s': %s", path, push_error->message);
  deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  g_mutex_lock (&look->lock);
  while (!look->done)
    if (!g_cond_wait_until (&look->cond, &look->lock, deadline))
      break;
  if (look->done)
    {
      facts = g_steal_pointer (&look->facts);
      if (look->error)
        g_propagate_error (error, g_steal_pointer (&look->error));
    }
  else
    {
      look->abandoned = TRUE;
      vb_inspect_stalled_set (path, TRUE);
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("component '%s': looking at it did not finish within %u ms (a file system or "
                      "device that does not answer?); nothing was changed"),
                   path, timeout_ms);
    }
  g_mutex_unlock (&look->lock);
  look_unref (look);
  return facts;
}
