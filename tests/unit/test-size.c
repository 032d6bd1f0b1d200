/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/common/vb-size: the one size syntax of driver
 * attributes, policy rules and vbmgr — what it reads, what it refuses (with
 * an error naming the text) and that formatting reads back. */
#include "config.h"

#include <glib.h>
#include <string.h>

#include "vb-error.h"
#include "vb-size.h"

static void
assert_size (const char *text, guint64 want)
{
  g_autoptr (GError) error = NULL;
  guint64 got = 0;

  g_assert_true (vb_size_parse (text, &got, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (got, ==, want);
}

static void
assert_not_size (const char *text)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *want = NULL;
  guint64 got = 7;

  g_assert_false (vb_size_parse (text, &got, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  want = g_strdup_printf ("'%s' is not a size (bytes, or a number with K, M, G or T)", text);
  g_assert_cmpstr (error->message, ==, want);
  /* nothing is written on failure */
  g_assert_cmpuint (got, ==, 7);
  /* and a caller that needs no reason gets none */
  g_assert_false (vb_size_parse (text, &got, NULL));
}

static void
test_accepted (void)
{
  assert_size ("0", 0);
  assert_size ("512", 512);
  assert_size ("4K", 4096);
  assert_size ("4k", 4096);
  assert_size ("1M", G_GUINT64_CONSTANT (1) << 20);
  assert_size ("1MiB", G_GUINT64_CONSTANT (1) << 20);
  assert_size ("1mib", G_GUINT64_CONSTANT (1) << 20);
  assert_size ("1MB", G_GUINT64_CONSTANT (1) << 20);
  assert_size ("1mb", G_GUINT64_CONSTANT (1) << 20);
  assert_size ("200G", G_GUINT64_CONSTANT (200) << 30);
  assert_size ("2GB", G_GUINT64_CONSTANT (2) << 30);
  assert_size ("1t", G_GUINT64_CONSTANT (1) << 40);
  assert_size ("0K", 0);
  assert_size ("18446744073709551615", G_MAXUINT64);
  assert_size ("16777215T", G_GUINT64_CONSTANT (16777215) << 40);
}

static void
test_refused (void)
{
  assert_not_size ("");
  assert_not_size ("K");
  assert_not_size ("-1");
  assert_not_size ("+1");
  assert_not_size (" 1");
  assert_not_size ("1 ");
  assert_not_size ("1.5G");
  assert_not_size ("1Q");
  assert_not_size ("1B"); /* "B" only after a unit */
  assert_not_size ("1iB");
  assert_not_size ("1KiBx");
  assert_not_size ("1KK");
  assert_not_size ("1P");
  assert_not_size ("18446744073709551616"); /* 2^64 */
  assert_not_size ("99999999999999999999");
  assert_not_size ("16777216T"); /* 2^64 bytes */
  assert_not_size ("20000000T");
}

static void
test_long_text_shown_cut (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *text = g_strnfill (10000, 'x');
  guint64 got;

  g_assert_false (vb_size_parse (text, &got, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_cmpuint (strlen (error->message), <, 300);
}

static void
test_format (void)
{
  static const struct {
    guint64 bytes;
    const char *text;
  } cases[] = {
    { 0, "0" },
    { 513, "513" },
    { 1536, "1536" },
    { 1536 * 1024, "1536K" },
    { G_GUINT64_CONSTANT (1) << 20, "1M" },
    { G_GUINT64_CONSTANT (200) << 30, "200G" },
    { G_GUINT64_CONSTANT (3) << 40, "3T" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *text = vb_size_format (cases[i].bytes);
      guint64 back = 0;

      g_assert_cmpstr (text, ==, cases[i].text);
      g_assert_true (vb_size_parse (text, &back, NULL));
      g_assert_cmpuint (back, ==, cases[i].bytes);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/size/accepted", test_accepted);
  g_test_add_func ("/size/refused", test_refused);
  g_test_add_func ("/size/long-text-shown-cut", test_long_text_shown_cut);
  g_test_add_func ("/size/format", test_format);

  return g_test_run ();
}
