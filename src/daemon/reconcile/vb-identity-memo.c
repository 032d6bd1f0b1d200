/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The memo of identities (vb-identity-memo.h): each path remembered
 * under its directory's version, which is new whenever the directory's
 * stamp or an ancestor's version changes. */
#include "config.h"

#include "vb-identity-memo.h"

#include <string.h>

typedef struct Dir Dir;
struct Dir {
  char *path;
  Dir *parent; /* NULL for "/" */
  guint depth;
  VbDirStamp stamp;       /* as recorded */
  guint64 version;        /* never 0 */
  guint64 parent_version; /* the parent's when this one was given */
  guint64 trusted_call;   /* the recall that found it trusted */
  guint64 last_call;
};

typedef struct {
  Dir *dir;
  guint64 version; /* of the directory, when the path was looked at */
  VbIdentity id;
  guint64 last_call;
} Entry;

struct _VbIdentityMemoCall {
  VbIdentityMemo *memo;
  const char *const *paths;
  guint n;
  guint64 epoch;   /* the memo's when the pointers were taken */
  Entry **entries; /* per path: its entry, or NULL */
  Dir **dirs_of;   /* per path: its directory, NULL when never remembered */
  GPtrArray *dirs; /* char*: to stamp, parents first */
  guint64 *tickets;
  gboolean *known;
};

struct _VbIdentityMemo {
  GMutex lock;
  GHashTable *dirs;    /* path -> Dir* */
  GHashTable *entries; /* path -> Entry* */
  guint64 versions;    /* the last version given */
  guint64 calls;
  guint64 epoch; /* new when entries or directories are freed */
  gboolean (*changed) (gpointer data);
  gpointer changed_data;
};

/* Beyond this many paths more than a recall asks for, the ones it did
 * not ask for are dropped (devices deleted). */
#define PRUNE_SLACK 4096
/* Directories per path beyond which they are forgotten (a directory of
 * its own for each device, some levels deep, stays below) */
#define DIRS_PER_PATH 8

static void
dir_free (Dir *dir)
{
  g_free (dir->path);
  g_free (dir);
}

VbIdentityMemo *
vb_identity_memo_new_full (gboolean (*changed) (gpointer data), gpointer data)
{
  VbIdentityMemo *memo = g_new0 (VbIdentityMemo, 1);

  g_mutex_init (&memo->lock);
  memo->dirs = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) dir_free);
  memo->entries = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  memo->changed = changed;
  memo->changed_data = data;
  return memo;
}

void
vb_identity_memo_free (VbIdentityMemo *memo)
{
  if (memo == NULL)
    return;
  g_hash_table_unref (memo->entries);
  g_hash_table_unref (memo->dirs);
  g_mutex_clear (&memo->lock);
  g_free (memo);
}

/* Absolute, and no ".", ".." or empty name in it: its directories are
 * the prefixes of the string. */
static gboolean
eligible (const char *path)
{
  if (path[0] != '/' || path[1] == '\0' || g_str_has_suffix (path, "/")
      || g_str_has_suffix (path, "/.") || g_str_has_suffix (path, "/.."))
    return FALSE;
  return strstr (path, "//") == NULL && strstr (path, "/./") == NULL
         && strstr (path, "/../") == NULL;
}

/* The directory of @path (eligible or a directory of one) */
static char *
parent_of (const char *path)
{
  const char *slash = strrchr (path, '/');

  return slash == path ? g_strdup ("/") : g_strndup (path, (gsize) (slash - path));
}

static Dir *
dir_get (VbIdentityMemo *memo, const char *path)
{
  Dir *dir = g_hash_table_lookup (memo->dirs, path);

  if (dir)
    return dir;
  dir = g_new0 (Dir, 1);
  dir->path = g_strdup (path);
  if (strcmp (path, "/") != 0)
    {
      g_autofree char *up = parent_of (path);
      dir->parent = dir_get (memo, up);
      dir->depth = dir->parent->depth + 1;
    }
  dir->version = ++memo->versions;
  g_hash_table_insert (memo->dirs, dir->path, dir);
  return dir;
}

static gint
by_depth (gconstpointer a, gconstpointer b)
{
  const Dir *x = *(Dir *const *) a, *y = *(Dir *const *) b;

  return x->depth < y->depth ? -1 : x->depth > y->depth;
}

/* Under the lock: each path's entry and directory as the memo has them
 * now (one lookup each; the pointers hold while the epoch does) */
static void
resolve (VbIdentityMemoCall *call)
{
  VbIdentityMemo *memo = call->memo;

  call->epoch = memo->epoch;
  for (guint i = 0; i < call->n; i++)
    {
      Entry *e = g_hash_table_lookup (memo->entries, call->paths[i]);
      g_autofree char *up = NULL;

      call->entries[i] = e;
      if (e)
        call->dirs_of[i] = e->dir;
      else if (eligible (call->paths[i]))
        call->dirs_of[i] = dir_get (memo, (up = parent_of (call->paths[i])));
      else
        call->dirs_of[i] = NULL;
    }
}

VbIdentityMemoCall *
vb_identity_memo_begin (VbIdentityMemo *memo, const char *const *paths, guint n)
{
  VbIdentityMemoCall *call = g_new0 (VbIdentityMemoCall, 1);
  g_autoptr (GPtrArray) found = g_ptr_array_new ();
  guint64 serial;

  call->memo = memo;
  call->paths = paths;
  call->n = n;
  call->entries = g_new0 (Entry *, n + 1);
  call->dirs_of = g_new0 (Dir *, n + 1);
  call->tickets = g_new0 (guint64, n + 1);
  call->known = g_new0 (gboolean, n + 1);
  call->dirs = g_ptr_array_new_with_free_func (g_free);
  g_mutex_lock (&memo->lock);
  resolve (call);
  serial = ++memo->calls;
  for (guint i = 0; i < n; i++)
    for (Dir *d = call->dirs_of[i]; d && d->last_call != serial; d = d->parent)
      {
        d->last_call = serial;
        g_ptr_array_add (found, d);
      }
  g_ptr_array_sort (found, by_depth);
  for (guint i = 0; i < found->len; i++)
    g_ptr_array_add (call->dirs, g_strdup (((Dir *) found->pdata[i])->path));
  g_mutex_unlock (&memo->lock);
  return call;
}

GPtrArray *
vb_identity_memo_dirs (VbIdentityMemoCall *call)
{
  return call->dirs;
}

void
vb_identity_memo_end (VbIdentityMemoCall *call)
{
  if (call == NULL)
    return;
  g_free (call->entries);
  g_free (call->dirs_of);
  g_free (call->tickets);
  g_free (call->known);
  g_ptr_array_unref (call->dirs);
  g_free (call);
}

static gboolean
stamp_equal (const VbDirStamp *a, const VbDirStamp *b)
{
  return a->ok == b->ok && a->local == b->local && a->dev == b->dev && a->ino == b->ino
         && a->ctime_ns == b->ctime_ns && a->mtime_ns == b->mtime_ns;
}

/* Nothing can change in it without changing its times */
static gboolean
stamp_trusted (const VbDirStamp *s)
{
  return s->ok && s->local && s->ctime_ns <= s->taken_ns - VB_DIR_STABLE_NS
         && s->mtime_ns <= s->taken_ns - VB_DIR_STABLE_NS;
}

/* Under the lock: everything forgotten (a call's pointers with it) */
static void
forget (VbIdentityMemo *memo)
{
  g_hash_table_remove_all (memo->entries);
  g_hash_table_remove_all (memo->dirs);
  memo->epoch++;
}

static void
prune (VbIdentityMemo *memo, guint n, guint64 call)
{
  GHashTableIter iter;
  gpointer value;

  /* directories of paths long gone: all, looked at again once */
  if (g_hash_table_size (memo->dirs) > DIRS_PER_PATH * (n + PRUNE_SLACK))
    {
      forget (memo);
      return;
    }
  if (g_hash_table_size (memo->entries) <= n + PRUNE_SLACK)
    return;
  memo->epoch++;
  g_hash_table_iter_init (&iter, memo->entries);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    if (((Entry *) value)->last_call != call)
      g_hash_table_iter_remove (&iter);
}

void
vb_identity_memo_recall (VbIdentityMemoCall *call, const VbDirStamp *stamps, VbIdentity *out)
{
  VbIdentityMemo *memo = call->memo;
  guint64 serial;

  g_mutex_lock (&memo->lock);
  if (memo->changed && memo->changed (memo->changed_data))
    forget (memo);
  if (call->epoch != memo->epoch)
    resolve (call);
  serial = ++memo->calls;
  /* parents first: a directory's version follows its parent's */
  for (guint i = 0; i < call->dirs->len; i++)
    {
      Dir *d = dir_get (memo, call->dirs->pdata[i]);
      Dir *up = d->parent;

      /* a stamp recorded before its directory was stable is never
       * trusted later: a change in the same clock tick kept its times */
      if (!stamp_equal (&d->stamp, &stamps[i]) || !stamp_trusted (&d->stamp)
          || (up && d->parent_version != up->version))
        {
          d->stamp = stamps[i];
          d->version = ++memo->versions;
          d->parent_version = up ? up->version : 0;
        }
      if (stamp_trusted (&d->stamp) && (up == NULL || up->trusted_call == serial))
        d->trusted_call = serial;
    }
  for (guint i = 0; i < call->n; i++)
    {
      Entry *e = call->entries[i];
      Dir *d = call->dirs_of[i];

      call->known[i] = FALSE;
      call->tickets[i] = 0;
      if (d == NULL || d->trusted_call != serial)
        continue;
      if (e && e->version == d->version)
        {
          out[i] = e->id;
          call->known[i] = TRUE;
          e->last_call = serial;
        }
      else
        call->tickets[i] = d->version;
    }
  g_mutex_unlock (&memo->lock);
}

const gboolean *
vb_identity_memo_known (VbIdentityMemoCall *call)
{
  return call->known;
}

void
vb_identity_memo_record (VbIdentityMemoCall *call, const VbIdentity *ids, const gboolean *links)
{
  VbIdentityMemo *memo = call->memo;
  guint64 serial;

  g_mutex_lock (&memo->lock);
  if (call->epoch != memo->epoch)
    resolve (call);
  serial = ++memo->calls;
  for (guint i = 0; i < call->n; i++)
    {
      Entry *e = call->entries[i];
      Dir *d = call->dirs_of[i];

      if (call->known[i])
        {
          if (e)
            e->last_call = serial;
          continue;
        }
      /* none: not there, or no answer (a stalled path is looked at
       * again); a directory changed since its stamp (another call
       * meanwhile) */
      if (call->tickets[i] == 0 || links[i] || ids[i].kind == 0 || d == NULL
          || d->version != call->tickets[i])
        continue;
      /* another call may have made its entry since this one began:
       * that one is updated, never replaced (a third call may hold it) */
      if (e == NULL && (e = g_hash_table_lookup (memo->entries, call->paths[i])) == NULL)
        {
          e = g_new0 (Entry, 1);
          g_hash_table_insert (memo->entries, g_strdup (call->paths[i]), e);
        }
      call->entries[i] = e;
      e->dir = d;
      e->version = call->tickets[i];
      e->id = ids[i];
      e->last_call = serial;
    }
  prune (memo, call->n, serial);
  g_mutex_unlock (&memo->lock);
}

guint
vb_identity_memo_size (VbIdentityMemo *memo)
{
  guint size;

  g_mutex_lock (&memo->lock);
  size = g_hash_table_size (memo->entries);
  g_mutex_unlock (&memo->lock);
  return size;
}
