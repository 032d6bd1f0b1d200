/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The identities of many paths in one look (vb-inspect.c): what stat()
 * says of each, whichever run of the pool looked at it; none for what is
 * not there, not a file nor a block device. */
#include "config.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vb-identity-memo.h"
#include "vb-inspect.h"

#define N_FILES 5000 /* more than one run of IDENTITIES_PER_THREAD */
#define N_MEMO 100

/* @n files DIR/0.img ... into @paths */
static void
make_files (const char *dir, guint n, GPtrArray *paths)
{
  for (guint i = 0; i < n; i++)
    {
      char *path = g_strdup_printf ("%s/%u.img", dir, i);
      g_assert_true (g_file_set_contents (path, "x", 1, NULL));
      g_ptr_array_add (paths, path);
    }
}

static void
test_identities (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("vb-inspect-XXXXXX", &error);
  g_autoptr (GPtrArray) paths = g_ptr_array_new_with_free_func (g_free);
  g_autofree VbIdentity *ids = NULL;
  g_autofree char *link = NULL, *missing = NULL;
  VbIdentity none = { 0 };
  guint n;

  g_assert_no_error (error);
  make_files (dir, N_FILES, paths);
  link = g_strdup_printf ("%s/link", dir);
  g_assert_cmpint (symlink (paths->pdata[7], link), ==, 0);
  missing = g_strdup_printf ("%s/missing", dir);
  g_ptr_array_add (paths, g_strdup (link));        /* N_FILES: a link to file 7 */
  g_ptr_array_add (paths, g_strdup (missing));     /* + 1: not there */
  g_ptr_array_add (paths, g_strdup (dir));         /* + 2: a directory */
  g_ptr_array_add (paths, g_strdup ("/dev/null")); /* + 3: a character device */
  n = paths->len;
  ids = g_new0 (VbIdentity, n);
  vb_inspect_identities ((const char *const *) paths->pdata, n, 10000, ids);

  for (guint i = 0; i < N_FILES; i++)
    {
      struct stat st;
      g_assert_cmpint (stat (paths->pdata[i], &st), ==, 0);
      g_assert_cmpint (ids[i].kind, ==, 'f');
      g_assert_cmpuint (ids[i].dev, ==, st.st_dev);
      g_assert_cmpuint (ids[i].ino, ==, st.st_ino);
      if (i > 0)
        g_assert_false (vb_identity_equal (&ids[i], &ids[i - 1]));
    }
  g_assert_true (vb_identity_equal (&ids[N_FILES], &ids[7]));
  for (guint i = N_FILES + 1; i < n; i++)
    {
      g_assert_cmpint (ids[i].kind, ==, 0);
      /* none is never the same as anything, not even none */
      g_assert_false (vb_identity_equal (&ids[i], &none));
      g_assert_false (vb_identity_equal (&none, &ids[i]));
    }

  for (guint i = 0; i < N_FILES; i++)
    g_unlink (paths->pdata[i]);
  g_unlink (link);
  g_rmdir (dir);
}

static void
assert_stat (const char *path, const VbIdentity *id)
{
  struct stat st;

  g_assert_cmpint (stat (path, &st), ==, 0);
  g_assert_cmpint (id->kind, ==, 'f');
  g_assert_cmpuint (id->dev, ==, st.st_dev);
  g_assert_cmpuint (id->ino, ==, st.st_ino);
}

/* Looks at @paths; how many of them were looked at, not known */
static guint
looked_at (GPtrArray *paths, VbIdentity *ids)
{
  guint before = vb_inspect_identities_looked_at ();

  vb_inspect_identities ((const char *const *) paths->pdata, paths->len, 10000, ids);
  for (guint i = 0; i < paths->len; i++)
    assert_stat (paths->pdata[i], &ids[i]);
  return vb_inspect_identities_looked_at () - before;
}

/* The memo on a real directory: its paths known while it is stable and
 * unchanged, looked at again once a file in it is replaced; a link
 * always looked at */
static void
test_memo (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("vb-inspect-XXXXXX", &error);
  g_autoptr (GPtrArray) paths = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *spare = NULL, *link = NULL;
  VbIdentity ids[N_MEMO + 1];
  ino_t first;

  g_assert_no_error (error);
  make_files (dir, N_MEMO, paths);
  spare = g_strdup_printf ("%s/spare", dir);
  g_assert_true (g_file_set_contents (spare, "y", 1, NULL));
  link = g_strdup_printf ("%s/link", dir);
  g_assert_cmpint (symlink (paths->pdata[0], link), ==, 0);
  g_ptr_array_add (paths, g_strdup (link));
  /* just made: not stable yet, looked at each time */
  g_assert_cmpuint (looked_at (paths, ids), ==, N_MEMO + 1);
  g_assert_cmpuint (looked_at (paths, ids), ==, N_MEMO + 1);
  /* once stable, known but for the link (a few tries: another test
   * making a file in /tmp meanwhile changes an ancestor) */
  for (guint tries = 0;; tries++)
    {
      g_usleep ((VB_DIR_STABLE_NS / 1000) + 200 * G_TIME_SPAN_MILLISECOND);
      looked_at (paths, ids);
      if (looked_at (paths, ids) == 1)
        break;
      g_assert_cmpuint (tries, <, 5);
    }
  /* a file replaced under its name: its directory changed, all looked at again */
  first = ids[0].ino;
  g_assert_cmpint (rename (spare, paths->pdata[0]), ==, 0);
  g_assert_cmpuint (looked_at (paths, ids), ==, N_MEMO + 1);
  g_assert_cmpuint (ids[0].ino, !=, first);
  g_assert_true (vb_identity_equal (&ids[0], &ids[N_MEMO]));

  for (guint i = 0; i < paths->len; i++)
    g_unlink (paths->pdata[i]);
  g_rmdir (dir);
}

/* Nothing to look at: nothing written. */
static void
test_none (void)
{
  VbIdentity out = { 'x', 1, 1 };

  vb_inspect_identities (NULL, 0, 10000, &out);
  g_assert_cmpint (out.kind, ==, 'x');
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_log_set_always_fatal (G_LOG_LEVEL_CRITICAL);
  g_test_add_func ("/inspect/identities", test_identities);
  g_test_add_func ("/inspect/none", test_none);
  g_test_add_func ("/inspect/memo", test_memo);
  return g_test_run ();
}
