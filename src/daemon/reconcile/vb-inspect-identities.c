/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The identities of many paths at once (vb_inspect_identities,
 * vb-inspect.h): their directories stamped first (lstat, statfs), then
 * each path not known to the memo (vb-identity-memo.h) looked at with an
 * lstat (a stat more for a link), on the looks' threads split over the
 * CPUs, the caller waiting once with a bound. */
#include "config.h"

#include "vb-inspect.h"

#include "vb-identity-memo.h"
#include "vb-inspect-private.h"

#include <fcntl.h>
#include <libmount.h>
#include <linux/magic.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

/* The identity of @path now: what vb_stat_component sees, without
 * opening anything; *@link: @path itself is a symbolic link. */
static VbIdentity
identity_now (const char *path, gboolean *link)
{
  struct stat st;

  *link = FALSE;
  if (lstat (path, &st) < 0)
    return (VbIdentity){ 0 };
  if (S_ISLNK (st.st_mode))
    {
      *link = TRUE;
      if (stat (path, &st) < 0)
        return (VbIdentity){ 0 };
    }
  if (S_ISBLK (st.st_mode))
    return (VbIdentity){ .kind = 'b', .dev = st.st_rdev };
  if (S_ISREG (st.st_mode))
    return (VbIdentity){ .kind = 'f', .dev = st.st_dev, .ino = st.st_ino };
  return (VbIdentity){ 0 };
}

/* Directory @path as the memo of identities needs it (vb-identity-memo.h) */
static VbDirStamp
dir_stamp_now (const char *path)
{
  VbDirStamp s = { .taken_ns = g_get_real_time () * 1000 };
  struct stat st;
  struct statfs fs;

  if (lstat (path, &st) < 0 || !S_ISDIR (st.st_mode) || statfs (path, &fs) < 0)
    return s;
  s.ok = TRUE;
  s.local = fs.f_type == EXT4_SUPER_MAGIC || fs.f_type == XFS_SUPER_MAGIC
            || fs.f_type == BTRFS_SUPER_MAGIC || fs.f_type == TMPFS_MAGIC;
  s.dev = st.st_dev;
  s.ino = st.st_ino;
  s.ctime_ns = (gint64) st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
  s.mtime_ns = (gint64) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  return s;
}

/* The runs of identities: a pool of their own, as the looks'. */
static GThreadPool *id_pool;
static GOnce id_pool_once = G_ONCE_INIT;
/* paths vb_inspect_identities looked at (not known to its memo) */
static gint looked_at;

/* What a run saw of one path: its identity, or a directory's stamp */
typedef struct {
  VbIdentity id;
  gboolean link;
  VbDirStamp stamp;
} Seen;

/* The identities (or directory stamps) of a run of paths, shared like a
 * Look: the thread writes each, then moves @at past it. */
typedef struct {
  gint ref;
  GMutex lock;
  GCond cond;
  gboolean done;
  gboolean abandoned;
  gboolean dirs;
  GStrv paths;
  guint n;
  guint at; /* the path being looked at */
  Seen *seen;
} IdLook;

static void
id_look_unref (IdLook *look)
{
  if (!g_atomic_int_dec_and_test (&look->ref))
    return;
  g_strfreev (look->paths);
  g_free (look->seen);
  g_mutex_clear (&look->lock);
  g_cond_clear (&look->cond);
  g_free (look);
}

static void
id_look_run (gpointer data, gpointer user_data)
{
  IdLook *look = data;
  gint64 since;

  for (guint i = 0; i < look->n; i++)
    {
      Seen seen = { { 0 } };
      if (vb_inspect_stalled_since (look->paths[i], &since))
        ;
      else if (look->dirs)
        seen.stamp = dir_stamp_now (look->paths[i]);
      else
        seen.id = identity_now (look->paths[i], &seen.link);
      g_mutex_lock (&look->lock);
      look->seen[i] = seen;
      look->at = i + 1;
      if (look->abandoned)
        {
          /* the caller gave up on path i, which answered after all */
          vb_inspect_stalled_set (look->paths[i], FALSE);
          g_mutex_unlock (&look->lock);
          break;
        }
      g_mutex_unlock (&look->lock);
    }
  g_mutex_lock (&look->lock);
  look->done = TRUE;
  g_cond_signal (&look->cond);
  g_mutex_unlock (&look->lock);
  id_look_unref (look);
}

static gpointer
make_id_pool (gpointer data)
{
  return g_thread_pool_new (id_look_run, NULL, -1, FALSE, NULL);
}

/* @paths looked at on a pool thread from the first on. */
static IdLook *
id_look_start (const char *const *paths, guint n, gboolean dirs)
{
  g_autoptr (GError) push_error = NULL;
  IdLook *look = g_new0 (IdLook, 1);

  look->ref = 2;
  g_mutex_init (&look->lock);
  g_cond_init (&look->cond);
  look->paths = g_new0 (char *, n + 1);
  for (guint i = 0; i < n; i++)
    look->paths[i] = g_strdup (paths[i]);
  look->n = n;
  look->dirs = dirs;
  look->seen = g_new0 (Seen, n);
  id_pool = g_once (&id_pool_once, make_id_pool, NULL);
  if (!g_thread_pool_push (id_pool, look, &push_error))
    g_warning ("vblk: looking at %u paths: %s", n, push_error->message);
  return look;
}

/* Waits for @look until a path makes no progress for @timeout_ms; what
 * it saw into @out: returns how many were looked at (the one after them
 * stalled) or all. */
static guint
id_look_finish (IdLook *look, guint timeout_ms, Seen *out)
{
  guint seen, got;

  g_mutex_lock (&look->lock);
  while (!look->done)
    {
      gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
      seen = look->at;
      while (!look->done && g_cond_wait_until (&look->cond, &look->lock, deadline))
        ;
      /* (all looked at, done not yet set: the thread is about to) */
      if (!look->done && look->at == seen && seen < look->n)
        {
          look->abandoned = TRUE;
          vb_inspect_stalled_set (look->paths[seen], TRUE);
          if (look->dirs)
            g_warning ("vblk: directory '%s' of components: looking at it did not finish "
                       "within %u ms; its components are looked at one by one",
                       look->paths[seen], timeout_ms);
          else
            g_warning ("vblk: component '%s': looking at it did not finish within %u ms; not "
                       "compared with the others",
                       look->paths[seen], timeout_ms);
          break;
        }
    }
  got = look->done ? look->n : look->at;
  memcpy (out, look->seen, got * sizeof *out);
  g_mutex_unlock (&look->lock);
  id_look_unref (look);
  return got;
}

/* Paths a thread looks at, at least: fewer share one (10,000 stat()s take
 * about 8 ms on one thread). */
#define IDENTITIES_PER_THREAD 2048

/* @paths looked at in runs split over the CPUs, the caller waiting once */
static void
look_all (const char *const *paths, guint n_paths, guint timeout_ms, gboolean dirs, Seen *out)
{
  guint n_runs = CLAMP (n_paths / IDENTITIES_PER_THREAD, 1, (guint) g_get_num_processors ());
  guint per = (n_paths + n_runs - 1) / n_runs;
  g_autofree IdLook **runs = g_new0 (IdLook *, n_runs);

  if (n_paths == 0)
    return;
  for (guint r = 0; r < n_runs; r++)
    if (r * per < n_paths)
      runs[r] = id_look_start (paths + r * per, MIN (per, n_paths - r * per), dirs);
  for (guint r = 0; r < n_runs; r++)
    {
      guint from = r * per, end = MIN (from + per, n_paths);
      if (runs[r] == NULL)
        continue;
      from += id_look_finish (runs[r], timeout_ms, out + from);
      /* past a stalled path: the rest of this run, on another thread */
      while (from < end)
        {
          out[from++] = (Seen){ { 0 } };
          if (from < end)
            from += id_look_finish (id_look_start (paths + from, end - from, dirs), timeout_ms,
                                    out + from);
        }
    }
}

/* The mounts as vblkd sees them, read again when they change: a
 * directory is stamped only on a file system whose times are its own
 * and that answers (not FUSE, whose server may not, nor NFS, whose times
 * lag). Its paths are looked at one by one, as without the memo. */
typedef struct {
  char *target;
  gboolean trusted;
} Mount;

static GMutex mounts_lock;
static int mounts_fd = -1;    /* /proc/self/mountinfo, for poll() */
static gboolean mounts_known; /* read at least once */
static GArray *mounts;        /* Mount, in mountinfo's order (a later one on top); NULL: unknown */

static void
mount_clear (Mount *m)
{
  g_free (m->target);
}

static gboolean
fstype_trusted (const char *type)
{
  static const char *const trusted[] = { "ext4", "xfs", "btrfs", "tmpfs", "devtmpfs", NULL };

  return type && g_strv_contains (trusted, type);
}

/* Under mounts_lock: the fd first, so that no change after the read is missed */
static void
mounts_read (void)
{
  struct libmnt_table *table;
  struct libmnt_iter *iter;
  struct libmnt_fs *fs;

  if (mounts_fd < 0)
    mounts_fd = open ("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
  mounts_known = TRUE;
  g_clear_pointer (&mounts, g_array_unref);
  table = mnt_new_table_from_file ("/proc/self/mountinfo");
  if (table == NULL)
    return;
  mounts = g_array_new (FALSE, FALSE, sizeof (Mount));
  g_array_set_clear_func (mounts, (GDestroyNotify) mount_clear);
  iter = mnt_new_iter (MNT_ITER_FORWARD);
  while (mnt_table_next_fs (table, iter, &fs) == 0)
    {
      Mount m = { g_strdup (mnt_fs_get_target (fs)), fstype_trusted (mnt_fs_get_fstype (fs)) };
      if (m.target)
        g_array_append_val (mounts, m);
    }
  mnt_free_iter (iter);
  mnt_unref_table (table);
}

/* The mount over directory @dir (by its path) has a trusted file system */
static gboolean
dir_on_trusted (const char *dir)
{
  gboolean trusted = FALSE;
  gsize best = 0;

  g_mutex_lock (&mounts_lock);
  if (!mounts_known)
    mounts_read ();
  for (guint i = 0; mounts && i < mounts->len; i++)
    {
      const Mount *m = &g_array_index (mounts, Mount, i);
      gsize len = strlen (m->target);
      gboolean over
          = strcmp (m->target, "/") == 0
            || (strncmp (dir, m->target, len) == 0 && (dir[len] == '\0' || dir[len] == '/'));
      if (over && len >= best)
        {
          best = len;
          trusted = m->trusted;
        }
    }
  g_mutex_unlock (&mounts_lock);
  return trusted;
}

/* The mounts changed since the last call (the memo's, under its lock):
 * poll() on mountinfo says so once per change; TRUE too when they
 * cannot be watched */
static gboolean
mounts_changed (gpointer data)
{
  gboolean changed = TRUE;
  struct pollfd p;

  g_mutex_lock (&mounts_lock);
  if (!mounts_known)
    mounts_read ();
  if (mounts_fd >= 0)
    {
      p = (struct pollfd){ .fd = mounts_fd, .events = POLLPRI };
      changed = poll (&p, 1, 0) != 0;
    }
  if (changed)
    mounts_read ();
  g_mutex_unlock (&mounts_lock);
  return changed;
}

static gpointer
make_memo (gpointer data)
{
  return vb_identity_memo_new_full (mounts_changed, NULL);
}

static VbIdentityMemo *
identity_memo (void)
{
  static GOnce once = G_ONCE_INIT;

  return g_once (&once, make_memo, NULL);
}

void
vb_inspect_identities (const char *const *paths, guint n_paths, guint timeout_ms, VbIdentity *out)
{
  g_autoptr (VbIdentityMemoCall) call = vb_identity_memo_begin (identity_memo (), paths, n_paths);
  GPtrArray *dirs = vb_identity_memo_dirs (call);
  g_autofree Seen *stamps = g_new0 (Seen, dirs->len + 1);
  g_autofree VbDirStamp *dir_stamps = g_new0 (VbDirStamp, dirs->len + 1);
  g_autofree gboolean *links = g_new0 (gboolean, n_paths + 1);
  g_autoptr (GPtrArray) todo = g_ptr_array_new ();
  g_autoptr (GArray) where = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autofree Seen *seen = NULL;
  const gboolean *known;

  timeout_ms = vb_inspect_look_timeout (timeout_ms);
  /* the directories first: a path looked at after its directory's stamp */
  for (guint i = 0; i < dirs->len; i++)
    if (dir_on_trusted (dirs->pdata[i]))
      {
        g_ptr_array_add (todo, dirs->pdata[i]);
        g_array_append_val (where, i);
      }
  look_all ((const char *const *) todo->pdata, todo->len, timeout_ms, TRUE, stamps);
  for (guint k = 0; k < todo->len; k++)
    dir_stamps[g_array_index (where, guint, k)] = stamps[k].stamp;
  g_ptr_array_set_size (todo, 0);
  g_array_set_size (where, 0);
  vb_identity_memo_recall (call, dir_stamps, out);
  known = vb_identity_memo_known (call);
  for (guint i = 0; i < n_paths; i++)
    if (!known[i])
      {
        g_ptr_array_add (todo, (gpointer) paths[i]);
        g_array_append_val (where, i);
      }
  seen = g_new0 (Seen, todo->len + 1);
  look_all ((const char *const *) todo->pdata, todo->len, timeout_ms, FALSE, seen);
  for (guint k = 0; k < todo->len; k++)
    {
      guint i = g_array_index (where, guint, k);
      out[i] = seen[k].id;
      links[i] = seen[k].link;
    }
  vb_identity_memo_record (call, out, links);
  g_atomic_int_add (&looked_at, todo->len);
}

guint
vb_inspect_identities_looked_at (void)
{
  return (guint) g_atomic_int_get (&looked_at);
}
