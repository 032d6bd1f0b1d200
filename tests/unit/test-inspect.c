/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The identities of many paths in one look (vb-inspect.c): what stat()
 * says of each, whichever run of the pool looked at it; none for what is
 * not there, not a file nor a block device. */
#include "config.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vb-inspect.h"

#define N_FILES 5000 /* more than one run of IDENTITIES_PER_THREAD */

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
  for (guint i = 0; i < N_FILES; i++)
    {
      char *path = g_strdup_printf ("%s/%u.img", dir, i);
      g_assert_true (g_file_set_contents (path, "x", 1, NULL));
      g_ptr_array_add (paths, path);
    }
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
  return g_test_run ();
}
