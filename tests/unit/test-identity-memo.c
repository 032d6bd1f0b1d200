/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The memo of identities (vb-identity-memo.c), with made-up stamps: a
 * path is known again only while every directory above it keeps a
 * stamp that was stable when recorded, on a trusted file system. */
#include "config.h"

#include <glib.h>
#include <string.h>

#include "vb-identity-memo.h"

#define SECOND_NS (G_GINT64_CONSTANT (1000000000))
#define N_PATHS 5

static const char *const paths[N_PATHS] = { "/a/b/f1", "/a/b/f2", "/a/c/f3", "rel/f4", "/a/./f5" };

typedef struct {
  VbIdentityMemo *memo;
  GHashTable *stamps; /* dir -> VbDirStamp*: the world as the test makes it */
  VbIdentity ids[N_PATHS];
  gboolean links[N_PATHS];
  gint64 now;
  gboolean mounts_changed;
} Fixture;

static gboolean
changed (gpointer data)
{
  Fixture *f = data;
  gboolean was = f->mounts_changed;

  f->mounts_changed = FALSE;
  return was;
}

static VbDirStamp *
stamp_of (Fixture *f, const char *dir)
{
  VbDirStamp *s = g_hash_table_lookup (f->stamps, dir);

  if (s == NULL)
    {
      s = g_new0 (VbDirStamp, 1);
      *s = (VbDirStamp){ .ok = TRUE, .local = TRUE, .dev = 8, .ino = g_str_hash (dir) };
      g_hash_table_insert (f->stamps, g_strdup (dir), s);
    }
  return s;
}

/* A change in @dir at the test's clock */
static void
touch (Fixture *f, const char *dir)
{
  VbDirStamp *s = stamp_of (f, dir);

  s->ctime_ns = s->mtime_ns = f->now;
}

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  f->memo = vb_identity_memo_new_full (changed, f);
  f->stamps = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  f->now = 1000 * SECOND_NS;
  for (guint i = 0; i < N_PATHS; i++)
    f->ids[i] = (VbIdentity){ 'f', 8, 100 + i };
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  vb_identity_memo_free (f->memo);
  g_hash_table_unref (f->stamps);
}

/* The stamps of @dirs, the clock moved on by @later */
static void
take_stamps (Fixture *f, GPtrArray *dirs, gint64 later, VbDirStamp *stamps)
{
  f->now += later;
  for (guint i = 0; i < dirs->len; i++)
    {
      stamps[i] = *stamp_of (f, dirs->pdata[i]);
      stamps[i].taken_ns = f->now;
    }
}

/* One look as vb_inspect_identities makes it, the clock moved on by
 * @later: which paths were known (a bit each) */
static guint
look (Fixture *f, gint64 later)
{
  g_autoptr (VbIdentityMemoCall) call = vb_identity_memo_begin (f->memo, paths, N_PATHS);
  GPtrArray *dirs = vb_identity_memo_dirs (call);
  g_autofree VbDirStamp *stamps = g_new0 (VbDirStamp, dirs->len + 1);
  VbIdentity out[N_PATHS] = { { 0 } };
  const gboolean *known;
  guint bits = 0;

  take_stamps (f, dirs, later, stamps);
  vb_identity_memo_recall (call, stamps, out);
  known = vb_identity_memo_known (call);
  for (guint i = 0; i < N_PATHS; i++)
    if (known[i])
      {
        g_assert_true (vb_identity_equal (&out[i], &f->ids[i]));
        bits |= 1u << i;
      }
    else
      out[i] = f->ids[i];
  vb_identity_memo_record (call, out, f->links);
  return bits;
}

#define F1 (1u << 0)
#define F2 (1u << 1)
#define F3 (1u << 2)

static void
test_dirs (Fixture *f, gconstpointer data)
{
  g_autoptr (VbIdentityMemoCall) call = vb_identity_memo_begin (f->memo, paths, N_PATHS);
  GPtrArray *dirs = vb_identity_memo_dirs (call);

  /* every ancestor once, parents first; "rel/f4" and "/a/./f5" never */
  g_assert_cmpuint (dirs->len, ==, 4);
  g_assert_cmpstr (dirs->pdata[0], ==, "/");
  g_assert_cmpstr (dirs->pdata[1], ==, "/a");
  g_assert_true (g_str_equal (dirs->pdata[2], "/a/b") || g_str_equal (dirs->pdata[2], "/a/c"));
  g_assert_true (g_str_equal (dirs->pdata[3], "/a/b") || g_str_equal (dirs->pdata[3], "/a/c"));
}

/* Known from the second look on, while nothing changes */
static void
test_known (Fixture *f, gconstpointer data)
{
  g_assert_cmpuint (look (f, 3 * SECOND_NS), ==, 0);
  g_assert_cmpuint (look (f, SECOND_NS), ==, F1 | F2 | F3);
  g_assert_cmpuint (look (f, SECOND_NS), ==, F1 | F2 | F3);
  g_assert_cmpuint (vb_identity_memo_size (f->memo), ==, 3);
}

/* A change in a directory: its paths looked at again; in an ancestor:
 * all below it */
static void
test_changes (Fixture *f, gconstpointer data)
{
  look (f, 3 * SECOND_NS);
  touch (f, "/a/b");
  f->ids[0].ino = 200; /* f1 leads elsewhere now */
  g_assert_cmpuint (look (f, 3 * SECOND_NS), ==, F3);
  g_assert_cmpuint (look (f, SECOND_NS), ==, F1 | F2 | F3);
  touch (f, "/a");
  g_assert_cmpuint (look (f, 3 * SECOND_NS), ==, 0);
  g_assert_cmpuint (look (f, SECOND_NS), ==, F1 | F2 | F3);
  /* the directory replaced by another (same times, another inode) */
  stamp_of (f, "/a/c")->ino++;
  g_assert_cmpuint (look (f, SECOND_NS), ==, F1 | F2);
}

/* A directory changed less than VB_DIR_STABLE_NS before its look: never
 * trusted, nor what was recorded under it once it is stable */
static void
test_unstable (Fixture *f, gconstpointer data)
{
  touch (f, "/a/b");
  g_assert_cmpuint (look (f, SECOND_NS), ==, 0);
  g_assert_cmpuint (look (f, 0), ==, F3);
  /* stable now, with the same times: recorded again first */
  g_assert_cmpuint (look (f, 2 * SECOND_NS), ==, F3);
  g_assert_cmpuint (look (f, 0), ==, F1 | F2 | F3);
}

/* Not a trusted file system, not looked at (stalled), a link, none: never known */
static void
test_untrusted (Fixture *f, gconstpointer data)
{
  stamp_of (f, "/a/b")->local = FALSE;
  stamp_of (f, "/a/c")->ok = FALSE;
  look (f, 3 * SECOND_NS);
  g_assert_cmpuint (look (f, SECOND_NS), ==, 0);
  stamp_of (f, "/a/b")->local = TRUE;
  f->links[0] = TRUE;
  f->ids[1].kind = 0;
  look (f, SECOND_NS);
  g_assert_cmpuint (look (f, SECOND_NS), ==, 0);
  f->links[0] = FALSE;
  f->ids[1].kind = 'f';
  look (f, SECOND_NS);
  g_assert_cmpuint (look (f, SECOND_NS), ==, F1 | F2);
}

/* The mounts changed: everything forgotten */
static void
test_mounts (Fixture *f, gconstpointer data)
{
  look (f, 3 * SECOND_NS);
  g_assert_cmpuint (look (f, SECOND_NS), ==, F1 | F2 | F3);
  f->mounts_changed = TRUE;
  g_assert_cmpuint (look (f, SECOND_NS), ==, 0);
  g_assert_cmpuint (look (f, SECOND_NS), ==, F1 | F2 | F3);
}

/* A directory that changed between a recall and its record (another
 * look meanwhile): what was looked at under the old stamp is not kept */
static void
test_raced (Fixture *f, gconstpointer data)
{
  g_autoptr (VbIdentityMemoCall) call = vb_identity_memo_begin (f->memo, paths, N_PATHS);
  GPtrArray *dirs = vb_identity_memo_dirs (call);
  g_autofree VbDirStamp *stamps = g_new0 (VbDirStamp, dirs->len + 1);
  VbIdentity out[N_PATHS] = { { 0 } };

  take_stamps (f, dirs, 3 * SECOND_NS, stamps);
  vb_identity_memo_recall (call, stamps, out);
  g_assert_false (vb_identity_memo_known (call)[0]);
  /* another look sees /a/b changed, and records it */
  touch (f, "/a/b");
  look (f, 3 * SECOND_NS);
  memcpy (out, f->ids, sizeof out);
  out[0].ino = 999; /* what the first look saw, before the change */
  vb_identity_memo_record (call, out, f->links);
  g_assert_cmpuint (look (f, SECOND_NS), ==, F1 | F2 | F3); /* f1 is ids[0], not 999 */
}

/* The mounts changed between a call's start and its recall: what it
 * took from the memo then is not used */
static void
test_forgotten_meanwhile (Fixture *f, gconstpointer data)
{
  look (f, 3 * SECOND_NS);
  {
    g_autoptr (VbIdentityMemoCall) call = vb_identity_memo_begin (f->memo, paths, N_PATHS);
    GPtrArray *dirs = vb_identity_memo_dirs (call);
    g_autofree VbDirStamp *stamps = g_new0 (VbDirStamp, dirs->len + 1);
    VbIdentity out[N_PATHS] = { { 0 } };

    take_stamps (f, dirs, SECOND_NS, stamps);
    f->mounts_changed = TRUE;
    vb_identity_memo_recall (call, stamps, out);
    for (guint i = 0; i < N_PATHS; i++)
      g_assert_false (vb_identity_memo_known (call)[i]);
    memcpy (out, f->ids, sizeof out);
    vb_identity_memo_record (call, out, f->links);
  }
  g_assert_cmpuint (look (f, SECOND_NS), ==, F1 | F2 | F3);
}

/* Calls side by side (ops claiming at once): two that began before
 * either recorded both make the same entries; the second updates the
 * first's, which a third call begun between them holds */
static void
test_side_by_side (Fixture *f, gconstpointer data)
{
  g_autoptr (VbIdentityMemoCall) a = vb_identity_memo_begin (f->memo, paths, N_PATHS);
  g_autoptr (VbIdentityMemoCall) b = vb_identity_memo_begin (f->memo, paths, N_PATHS);
  g_autoptr (VbIdentityMemoCall) c = NULL;
  g_autofree VbDirStamp *stamps = g_new0 (VbDirStamp, vb_identity_memo_dirs (a)->len + 1);
  VbIdentity out[N_PATHS];

  take_stamps (f, vb_identity_memo_dirs (a), 3 * SECOND_NS, stamps);
  vb_identity_memo_recall (a, stamps, out);
  vb_identity_memo_recall (b, stamps, out);
  memcpy (out, f->ids, sizeof out);
  vb_identity_memo_record (a, out, f->links);
  c = vb_identity_memo_begin (f->memo, paths, N_PATHS);
  vb_identity_memo_record (b, out, f->links);
  take_stamps (f, vb_identity_memo_dirs (c), SECOND_NS, stamps);
  memset (out, 0, sizeof out);
  vb_identity_memo_recall (c, stamps, out);
  for (guint i = 0; i < 3; i++)
    {
      g_assert_true (vb_identity_memo_known (c)[i]);
      g_assert_true (vb_identity_equal (&out[i], &f->ids[i]));
    }
  g_assert_cmpuint (vb_identity_memo_size (f->memo), ==, 3);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_log_set_always_fatal (G_LOG_LEVEL_CRITICAL);
#define ADD(name, fn)                                                                              \
  g_test_add ("/identity-memo/" name, Fixture, NULL, fixture_set_up, fn, fixture_tear_down)
  ADD ("dirs", test_dirs);
  ADD ("known", test_known);
  ADD ("changes", test_changes);
  ADD ("unstable", test_unstable);
  ADD ("untrusted", test_untrusted);
  ADD ("mounts", test_mounts);
  ADD ("raced", test_raced);
  ADD ("forgotten-meanwhile", test_forgotten_meanwhile);
  ADD ("side-by-side", test_side_by_side);
  return g_test_run ();
}
