/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Attribute validation and driver rules: canonical values, defaults,
 * refusals with the messages users see, sizes and extents. */
#include "config.h"

#include "driver.h"
#include "vb-error.h"

static GHashTable *
attrs (const char *first, ...)
{
  GHashTable *h = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  va_list ap;

  va_start (ap, first);
  for (const char *k = first; k; k = va_arg (ap, const char *))
    g_hash_table_insert (h, g_strdup (k), g_strdup (va_arg (ap, const char *)));
  va_end (ap);
  return h;
}

static void
assert_canonical (const char *driver, const char *attr, const char *value, const char *expected)
{
  const VbAttrSpec *spec = vb_driver_attr_spec (vb_driver_lookup (driver), attr);
  g_autoptr (GError) error = NULL;
  g_autofree char *got = vb_attr_canonicalize (spec, value, &error);

  g_assert_no_error (error);
  g_assert_cmpstr (got, ==, expected);
}

static void
assert_refused (const char *driver, const char *attr, const char *value, const char *message)
{
  const VbAttrSpec *spec = vb_driver_attr_spec (vb_driver_lookup (driver), attr);
  g_autoptr (GError) error = NULL;
  g_autofree char *got = vb_attr_canonicalize (spec, value, &error);

  g_assert_null (got);
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, message);
}

static void
test_lookup (void)
{
  g_autofree char *known = vb_drivers_known_names ();

  g_assert_nonnull (vb_driver_lookup ("file"));
  g_assert_nonnull (vb_driver_lookup ("window"));
  g_assert_nonnull (vb_driver_lookup ("linear"));
  g_assert_nonnull (vb_driver_lookup ("raid0"));
  g_assert_nonnull (vb_driver_lookup ("raid1"));
  g_assert_nonnull (vb_driver_lookup ("raid10"));
  g_assert_null (vb_driver_lookup ("raid7"));
  g_assert_cmpstr (known, ==, "file, window, linear, raid0, raid1, raid10, faulty");
}

static void
test_canonical (void)
{
  assert_canonical ("file", "read_only", "TRUE", "true");
  assert_canonical ("file", "read_only", "1", "true");
  assert_canonical ("file", "read_only", "off", "false");
  assert_canonical ("file", "sector_size", "4096", "4096");
  assert_canonical ("window", "offset", "1M", "1048576");
  assert_canonical ("window", "offset", "1MiB", "1048576");
  assert_canonical ("window", "size", "2g", "2147483648");
  assert_canonical ("window", "size", "512", "512");
  assert_canonical ("window", "size", "0", "0");
}

static void
test_refused_values (void)
{
  assert_refused ("file", "read_only", "maybe",
                  "attribute 'read_only': 'maybe' is not a boolean (true or false)");
  assert_refused ("file", "sector_size", "1000",
                  "attribute 'sector_size': 1000 is not allowed (allowed: 512, 1024, 2048, 4096)");
  assert_refused ("file", "sector_size", "-512",
                  "attribute 'sector_size': '-512' is not a whole number");
  assert_refused ("file", "sector_size", "512x",
                  "attribute 'sector_size': '512x' is not a whole number");
  assert_refused ("window", "offset", "100", "attribute 'offset': 100 is not a multiple of 512");
  assert_refused ("window", "size", "1Q",
                  "attribute 'size': '1Q' is not a size (bytes, or a number with K, M, G or T)");
  assert_refused (
      "window", "size", "99999999999999999999",
      "attribute 'size': '99999999999999999999' is not a size (bytes, or a number with K, M, G or T)");
  assert_refused (
      "window", "size", "20000000T",
      "attribute 'size': '20000000T' is not a size (bytes, or a number with K, M, G or T)");
}

static void
test_resolve (void)
{
  const VbDriver *file = vb_driver_lookup ("file");
  g_autoptr (GHashTable) given = attrs ("read_only", "yes", NULL);
  g_autoptr (GHashTable) unknown = attrs ("bogus", "1", NULL);
  g_autoptr (GHashTable) resolved = NULL, again = NULL, refused = NULL;
  g_autoptr (GHashTable) change = attrs ("sector_size", "4096", NULL);
  g_autoptr (GError) error = NULL;

  resolved = vb_driver_resolve_attributes (file, NULL, given, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_hash_table_size (resolved), ==, 3);
  g_assert_cmpstr (g_hash_table_lookup (resolved, "read_only"), ==, "true");
  g_assert_cmpstr (g_hash_table_lookup (resolved, "sector_size"), ==, "512");
  g_assert_cmpstr (g_hash_table_lookup (resolved, "engine"), ==, "false");

  /* a change overlays the current set and keeps the rest */
  again = vb_driver_resolve_attributes (file, resolved, change, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (g_hash_table_lookup (again, "read_only"), ==, "true");
  g_assert_cmpstr (g_hash_table_lookup (again, "sector_size"), ==, "4096");

  refused = vb_driver_resolve_attributes (file, NULL, unknown, &error);
  g_assert_null (refused);
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (
      error->message, ==,
      "attribute 'bogus': not an attribute of driver 'file' (allowed: read_only, sector_size, engine)");
}

static void
test_online_flags (void)
{
  const VbDriver *file = vb_driver_lookup ("file");
  const VbDriver *window = vb_driver_lookup ("window");

  g_assert_false (vb_driver_attr_spec (file, "read_only")->online);
  g_assert_true (vb_driver_attr_spec (file, "sector_size")->online);
  g_assert_false (vb_driver_attr_spec (window, "offset")->online);
  g_assert_true (vb_driver_attr_spec (window, "size")->online);
}

static void
test_components (void)
{
  const VbDriver *file = vb_driver_lookup ("file");
  const VbDriver *window = vb_driver_lookup ("window");
  g_autoptr (GHashTable) fa = vb_driver_resolve_attributes (file, NULL, NULL, NULL);
  g_autoptr (GHashTable) wa = vb_driver_resolve_attributes (window, NULL, NULL, NULL);
  VbComponentInfo two[2]
      = { { "/a", VB_COMPONENT_KIND_FILE, 4096 }, { "/b", VB_COMPONENT_KIND_FILE, 4096 } };
  VbComponentInfo blk = { "/dev/sdz", VB_COMPONENT_KIND_BLOCK, 1 << 20 };
  VbComponentInfo tiny = { "/t", VB_COMPONENT_KIND_FILE, 100 };
  g_autoptr (GError) e1 = NULL, e2 = NULL, e3 = NULL, e4 = NULL;

  g_assert_false (vb_driver_validate (file, fa, two, 2, &e1));
  g_assert_cmpstr (e1->message, ==, "components: driver 'file' takes exactly 1, 2 given");
  g_assert_false (vb_driver_validate (file, fa, two, 0, &e2));
  g_assert_cmpstr (e2->message, ==, "components: driver 'file' takes exactly 1, 0 given");
  g_assert_false (vb_driver_validate (file, fa, &blk, 1, &e3));
  g_assert_cmpstr (e3->message, ==, "component '/dev/sdz': driver 'file' takes a regular file");
  g_assert_true (vb_driver_validate (window, wa, &blk, 1, NULL));
  g_assert_false (vb_driver_validate (file, fa, &tiny, 1, &e4));
  g_assert_error (e4, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
}

static void
test_window_range (void)
{
  const VbDriver *window = vb_driver_lookup ("window");
  VbComponentInfo c = { "/img", VB_COMPONENT_KIND_FILE, 64 << 20 };
  g_autoptr (GHashTable) ok = attrs ("offset", "1048576", "size", "16777216", NULL);
  g_autoptr (GHashTable) to_end = attrs ("offset", "1048576", NULL);
  g_autoptr (GHashTable) beyond = attrs ("offset", "67108864", NULL);
  g_autoptr (GHashTable) too_long = attrs ("offset", "1048576", "size", "67108864", NULL);
  g_autoptr (GHashTable) r1 = vb_driver_resolve_attributes (window, NULL, ok, NULL);
  g_autoptr (GHashTable) r2 = vb_driver_resolve_attributes (window, NULL, to_end, NULL);
  g_autoptr (GHashTable) r3 = vb_driver_resolve_attributes (window, NULL, beyond, NULL);
  g_autoptr (GHashTable) r4 = vb_driver_resolve_attributes (window, NULL, too_long, NULL);
  g_autoptr (GError) e3 = NULL, e4 = NULL;
  VbExtent extent = { 0 };

  g_assert_true (vb_driver_validate (window, r1, &c, 1, NULL));
  g_assert_cmpuint (window->size (r1, &c, 1), ==, 16 << 20);
  window->extent (r1, &c, 1, &extent);
  g_assert_cmpuint (extent.offset, ==, 1 << 20);
  g_assert_cmpuint (extent.size, ==, 16 << 20);
  g_assert_false (extent.read_only);

  g_assert_true (vb_driver_validate (window, r2, &c, 1, NULL));
  g_assert_cmpuint (window->size (r2, &c, 1), ==, 63 << 20);

  g_assert_false (vb_driver_validate (window, r3, &c, 1, &e3));
  g_assert_cmpstr (
      e3->message, ==,
      "attribute 'offset': 67108864 is beyond the end of component '/img' (67108864 bytes)");
  g_assert_false (vb_driver_validate (window, r4, &c, 1, &e4));
  g_assert_cmpstr (
      e4->message, ==,
      "attribute 'size': offset 1048576 + size 67108864 exceeds component '/img' (67108864 bytes)");
}

static void
test_file_size_rounds_down (void)
{
  const VbDriver *file = vb_driver_lookup ("file");
  g_autoptr (GHashTable) a = attrs ("sector_size", "4096", NULL);
  g_autoptr (GHashTable) r = vb_driver_resolve_attributes (file, NULL, a, NULL);
  VbComponentInfo c = { "/f", VB_COMPONENT_KIND_FILE, 10000 };
  VbExtent extent = { 0 };

  g_assert_cmpuint (file->size (r, &c, 1), ==, 8192);
  file->extent (r, &c, 1, &extent);
  g_assert_cmpuint (extent.sector_size, ==, 4096);
  g_assert_cmpuint (extent.size, ==, 8192);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/driver/lookup", test_lookup);
  g_test_add_func ("/driver/canonical", test_canonical);
  g_test_add_func ("/driver/refused-values", test_refused_values);
  g_test_add_func ("/driver/resolve", test_resolve);
  g_test_add_func ("/driver/online-flags", test_online_flags);
  g_test_add_func ("/driver/components", test_components);
  g_test_add_func ("/driver/window-range", test_window_range);
  g_test_add_func ("/driver/file-size-rounds-down", test_file_size_rounds_down);
  return g_test_run ();
}
