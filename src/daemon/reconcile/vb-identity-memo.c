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

struct _VbIdentityMemo {
  GMutex lock;
  GHashTable *dirs;    /* path -> Dir* */
  GHashTable *entries; /* path -> Entry* */
  guint64 versions;    /* the last version given */
  guint64 calls;
  gboolean (*changed) (gpointer data);
  gpointer changed_data;
};

/* Beyond this many paths more than a recall asks for, the ones it did
 * not ask for are dropped (devices deleted). */
#define PRUNE_SLACK 4096

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

VbIdentityMemo *
vb_identity_memo_new (void)
{
  return vb_identity_memo_new_full (NULL, NULL);
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

/* @path's directory: through its entry, without building the string */
static Dir *
dir_of_path (VbIdentityMemo *memo, const char *path)
{
  Entry *e = g_hash_table_lookup (memo->entries, path);
  g_autofree char *up = NULL;

  if (e)
    return e->dir;
  up = parent_of (path);
  return dir_get (memo, up);
}

static gint
by_depth (gconstpointer a, gconstpointer b)
{
  const Dir *x = *(Dir *const *) a, *y = *(Dir *const *) b;

  return x->depth < y->depth ? -1 : x->depth > y->depth;
}

GPtrArray *
vb_identity_memo_dirs (VbIdentityMemo *memo, const char *const *paths, guint n)
{
  g_autoptr (GPtrArray) found = g_ptr_array_new ();
  GPtrArray *dirs = g_ptr_array_new_with_free_func (g_free);
  guint64 call;

  g_mutex_lock (&memo->lock);
  call = ++memo->calls;
  for (guint i = 0; i < n; i++)
    {
      if (!eligible (paths[i]))
        continue;
      for (Dir *d = dir_of_path (memo, paths[i]); d && d->last_call != call; d = d->parent)
        {
          d->last_call = call;
          g_ptr_array_add (found, d);
        }
    }
  g_ptr_array_sort (found, by_depth);
  for (guint i = 0; i < found->len; i++)
    g_ptr_array_add (dirs, g_strdup (((Dir *) found->pdata[i])->path));
  g_mutex_unlock (&memo->lock);
  return dirs;
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

static void
prune (VbIdentityMemo *memo, guint n, guint64 call)
{
  GHashTableIter iter;
  gpointer value;

  /* directories of paths long gone: all, looked at again once */
  if (g_hash_table_size (memo->dirs) > 2 * (n + PRUNE_SLACK))
    {
      g_hash_table_remove_all (memo->entries);
      g_hash_table_remove_all (memo->dirs);
      return;
    }
  if (g_hash_table_size (memo->entries) <= n + PRUNE_SLACK)
    return;
  g_hash_table_iter_init (&iter, memo->entries);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    if (((Entry *) value)->last_call != call)
      g_hash_table_iter_remove (&iter);
}

void
vb_identity_memo_recall (VbIdentityMemo *memo, GPtrArray *dirs, const VbDirStamp *stamps,
                         const char *const *paths, guint n, VbIdentity *out, gboolean *known,
                         guint64 *tickets)
{
  guint64 call;

  g_mutex_lock (&memo->lock);
  if (memo->changed && memo->changed (memo->changed_data))
    {
      g_hash_table_remove_all (memo->entries);
      g_hash_table_remove_all (memo->dirs);
    }
  call = ++memo->calls;
  /* parents first: a directory's version follows its parent's */
  for (guint i = 0; i < dirs->len; i++)
    {
      Dir *d = dir_get (memo, dirs->pdata[i]);
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
      if (stamp_trusted (&d->stamp) && (up == NULL || up->trusted_call == call))
        d->trusted_call = call;
    }
  for (guint i = 0; i < n; i++)
    {
      Entry *e;
      Dir *d;

      known[i] = FALSE;
      tickets[i] = 0;
      if (!eligible (paths[i]))
        continue;
      e = g_hash_table_lookup (memo->entries, paths[i]);
      d = e ? e->dir : dir_of_path (memo, paths[i]);
      if (d->trusted_call != call)
        continue;
      if (e && e->version == d->version)
        {
          out[i] = e->id;
          known[i] = TRUE;
          e->last_call = call;
        }
      else
        tickets[i] = d->version;
    }
  g_mutex_unlock (&memo->lock);
}

void
vb_identity_memo_record (VbIdentityMemo *memo, const char *const *paths, guint n,
                         const gboolean *known, const guint64 *tickets, const VbIdentity *ids,
                         const gboolean *links)
{
  guint64 call;

  g_mutex_lock (&memo->lock);
  call = ++memo->calls;
  for (guint i = 0; i < n; i++)
    {
      Entry *e;
      Dir *d;

      if (known[i])
        {
          if ((e = g_hash_table_lookup (memo->entries, paths[i])) != NULL)
            e->last_call = call;
          continue;
        }
      /* none: not there, or no answer (a stalled path is looked at again) */
      if (tickets[i] == 0 || links[i] || ids[i].kind == 0)
        continue;
      d = dir_of_path (memo, paths[i]);
      /* the directory changed since its stamp (another look, meanwhile) */
      if (d->version != tickets[i])
        continue;
      e = g_hash_table_lookup (memo->entries, paths[i]);
      if (e == NULL)
        {
          e = g_new0 (Entry, 1);
          g_hash_table_insert (memo->entries, g_strdup (paths[i]), e);
        }
      e->dir = d;
      e->version = tickets[i];
      e->id = ids[i];
      e->last_call = call;
    }
  prune (memo, n, call);
  g_mutex_unlock (&memo->lock);
}

void
vb_identity_memo_forget (VbIdentityMemo *memo)
{
  g_mutex_lock (&memo->lock);
  g_hash_table_remove_all (memo->entries);
  g_hash_table_remove_all (memo->dirs);
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
