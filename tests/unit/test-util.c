/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of src/common/vb-util: device names, object path escaping,
 * component sources, UUIDs; and the D-Bus names of VB_ERROR. */
#include "config.h"

#include <gio/gio.h>
#include <string.h>

#include "vb-error.h"
#include "vb-options.h"
#include "vb-util.h"

static void
assert_name_ok (const char *name)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (vb_name_is_valid (name, "name", &error));
  g_assert_no_error (error);
}

static void
assert_name_refused (const char *name, const char *what, const char *message)
{
  g_autoptr (GError) error = NULL;

  g_assert_false (vb_name_is_valid (name, what, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, message);
}

static void
test_name_valid (void)
{
  g_autofree char *max = g_strnfill (VB_NAME_MAX, 'a');

  assert_name_ok ("a");
  assert_name_ok ("disk0");
  assert_name_ok ("Data-1.img_x");
  assert_name_ok ("-");
  assert_name_ok ("...");
  assert_name_ok (".hidden");
  assert_name_ok (max);
  g_assert_cmpuint (strlen (max), ==, 64);
  /* No error requested: still just the answer. */
  g_assert_false (vb_name_is_valid ("a b", "name", NULL));
  g_assert_true (vb_name_is_valid ("ab", "name", NULL));
}

static void
test_name_empty (void)
{
  assert_name_refused ("", "name", "name: must not be empty");
  assert_name_refused (NULL, "name", "name: must not be empty");
  assert_name_refused ("", "device name", "device name: must not be empty");
}

static void
test_name_too_long (void)
{
  g_autofree char *long_name = g_strnfill (VB_NAME_MAX + 1, 'b');
  g_autofree char *expected
      = g_strdup_printf ("name '%s': 65 characters, at most 64 are allowed", long_name);

  g_assert_cmpuint (strlen (long_name), ==, 65);
  assert_name_refused (long_name, "name", expected);
}

/* What a message shows of a caller's text is UTF-8, cut at a character
 * (fuzz-dbus found a long name of two-byte characters cut in one, and
 * the error, which D-Bus must carry as UTF-8, broken). */
static void
test_shown_utf8 (void)
{
  GString *e = g_string_new ("a");
  g_autofree char *shown = NULL, *bad = NULL;
  g_autoptr (GError) error = NULL;

  for (guint i = 0; i < 60; i++)
    g_string_append (e, "\xc3\xa9");
  /* byte 56 is the second of a character: the cut goes back to its first */
  shown = vb_shown (e->str);
  g_assert_true (g_utf8_validate (shown, -1, NULL));
  g_assert_true (g_str_has_suffix (shown, "... (121 bytes)"));
  g_assert_cmpuint (strlen (shown), ==, 55 + strlen ("... (121 bytes)"));
  g_assert_false (vb_name_is_valid (e->str, "name", &error));
  g_assert_true (g_utf8_validate (error->message, -1, NULL));
  bad = vb_shown ("ab\xff");
  g_assert_cmpstr (bad, ==, "ab\xef\xbf\xbd");
  g_string_free (e, TRUE);
}

static void
test_name_bad_characters (void)
{
  assert_name_refused ("a b", "name",
                       "name 'a b': character 2 is not allowed "
                       "(allowed: A-Z a-z 0-9 . _ -)");
  assert_name_refused ("a/b", "name",
                       "name 'a/b': character 2 is not allowed "
                       "(allowed: A-Z a-z 0-9 . _ -)");
  assert_name_refused ("ab:", "name",
                       "name 'ab:': character 3 is not allowed "
                       "(allowed: A-Z a-z 0-9 . _ -)");
  assert_name_refused ("x\ny", "name",
                       "name 'x\ny': character 2 is not allowed "
                       "(allowed: A-Z a-z 0-9 . _ -)");
  /* Non-ASCII is refused at its first byte; the message stays UTF-8. */
  assert_name_refused ("d\xc3\xa9j\xc3\xa0", "name",
                       "name 'd\xc3\xa9j\xc3\xa0': character 2 is not allowed "
                       "(allowed: A-Z a-z 0-9 . _ -)");
  assert_name_refused ("a\xff", "name",
                       "name 'a\xef\xbf\xbd': character 2 is not allowed "
                       "(allowed: A-Z a-z 0-9 . _ -)");
  assert_name_refused (".", "name", "name '.' is reserved");
  assert_name_refused ("..", "name", "name '..' is reserved");
}

static void
test_escape (void)
{
  static const struct {
    const char *name;
    const char *escaped;
  } cases[] = {
    { "data", "data" },
    { "Disk0", "Disk0" },
    { "a_b", "a_5fb" },
    { "a.b", "a_2eb" },
    { "a-b", "a_2db" },
    { "_", "_5f" },
    { "a_b.c-d", "a_5fb_2ec_2dd" },
    { "_5f", "_5f5f" },
    { "..x", "_2e_2ex" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *escaped = vb_object_path_escape (cases[i].name);
      g_autofree char *back = vb_object_path_unescape (escaped);
      g_autofree char *path = g_strconcat ("/org/vblk/VBlk1/devices/", escaped, NULL);

      g_assert_cmpstr (escaped, ==, cases[i].escaped);
      g_assert_cmpstr (back, ==, cases[i].name);
      g_assert_true (g_variant_is_object_path (path));
    }
}

static void
test_escape_round_trip_all (void)
{
  /* Every byte a valid name may hold, in every position. */
  const char *alphabet = "abcXYZ019._-";
  char name[4] = { 0 };

  for (const char *a = alphabet; *a; a++)
    for (const char *b = alphabet; *b; b++)
      for (const char *c = alphabet; *c; c++)
        {
          g_autofree char *escaped = NULL;
          g_autofree char *back = NULL;

          name[0] = *a;
          name[1] = *b;
          name[2] = *c;
          escaped = vb_object_path_escape (name);
          back = vb_object_path_unescape (escaped);
          g_assert_cmpstr (back, ==, name);
          for (const char *p = escaped; *p; p++)
            g_assert_true (g_ascii_isalnum (*p) || *p == '_');
        }
}

static void
test_object_paths (void)
{
  g_autofree char *device = vb_device_object_path ("a.b");
  g_autofree char *component = vb_component_object_path ("a.b", 3);
  g_autofree char *plain = vb_device_object_path ("data");

  g_assert_cmpstr (device, ==, "/org/vblk/VBlk1/devices/a_2eb");
  g_assert_cmpstr (component, ==, "/org/vblk/VBlk1/devices/a_2eb/components/3");
  g_assert_cmpstr (plain, ==, "/org/vblk/VBlk1/devices/data");
}

static void
assert_source (const char *source, VbSourceKind expected_kind, const char *expected_device)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *device = NULL;
  VbSourceKind kind = (VbSourceKind) -1;

  g_assert_true (vb_source_parse (source, &kind, &device, &error));
  g_assert_no_error (error);
  g_assert_cmpint (kind, ==, expected_kind);
  g_assert_cmpstr (device, ==, expected_device);
}

static void
assert_source_refused (const char *source, const char *message)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *device = NULL;
  VbSourceKind kind;

  g_assert_false (vb_source_parse (source, &kind, &device, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, message);
  g_assert_null (device);
}

static void
test_source_kinds (void)
{
  VbSourceKind kind;

  assert_source ("/dev/sdb", VB_SOURCE_PATH, NULL);
  assert_source ("/srv/a.img", VB_SOURCE_PATH, NULL);
  assert_source ("/", VB_SOURCE_PATH, NULL);
  assert_source ("vblk:data", VB_SOURCE_DEVICE, "data");
  assert_source ("vblk:a_b.c-d", VB_SOURCE_DEVICE, "a_b.c-d");
  assert_source ("nbd://host:10809/export", VB_SOURCE_NBD, NULL);
  assert_source ("nbd+unix:///export?socket=/run/x.sock", VB_SOURCE_NBD, NULL);
  assert_source ("nbds://host/export", VB_SOURCE_NBD, NULL);
  assert_source ("nbd+tcp://host/export", VB_SOURCE_NBD, NULL);
  /* The device name is optional. */
  g_assert_true (vb_source_parse ("vblk:x", &kind, NULL, NULL));
  g_assert_cmpint (kind, ==, VB_SOURCE_DEVICE);
}

static void
assert_export (const char *text, const char *address, VbExportTls tls, const char *psk,
               const char *certs, const char *formatted)
{
  g_auto (VbExportSpec) spec = { NULL };
  g_autofree char *again = NULL;

  g_assert_true (vb_export_spec_parse (text, &spec, NULL));
  g_assert_cmpstr (spec.address, ==, address);
  g_assert_cmpint (spec.tls, ==, tls);
  g_assert_cmpstr (spec.tls_psk, ==, psk);
  g_assert_cmpstr (spec.tls_certs, ==, certs);
  again = vb_export_spec_format (&spec);
  g_assert_cmpstr (again, ==, formatted);
}

static void
assert_export_refused (const char *text, const char *message)
{
  g_autoptr (GError) error = NULL;

  g_assert_false (vb_export_spec_parse (text, NULL, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, message);
}

/* The exports of the desired state: an address, and TLS settings that
 * older states do not have (off). */
static void
test_export_specs (void)
{
  assert_export ("nbd unix:/run/x.sock", "unix:/run/x.sock", VB_EXPORT_TLS_OFF, NULL, NULL,
                 "nbd unix:/run/x.sock");
  /* plaintext on TCP, from a state of before TLS, is written out */
  assert_export ("nbd tcp:0:10809", "tcp:0:10809", VB_EXPORT_TLS_OFF, NULL, NULL,
                 "nbd tcp:0:10809 tls=off");
  assert_export ("nbd tcp:0:10809 tls=off", "tcp:0:10809", VB_EXPORT_TLS_OFF, NULL, NULL,
                 "nbd tcp:0:10809 tls=off");
  assert_export ("nbd unix:/s tls=off", "unix:/s", VB_EXPORT_TLS_OFF, NULL, NULL, "nbd unix:/s");
  assert_export ("nbd tcp:[::1]:1 tls=require tls-psk=/etc/k.psk", "tcp:[::1]:1",
                 VB_EXPORT_TLS_REQUIRE, "/etc/k.psk", NULL,
                 "nbd tcp:[::1]:1 tls=require tls-psk=/etc/k.psk");
  /* credentials alone mean require; the order of settings is free */
  assert_export ("nbd tcp:h:2 tls-certs=/etc/c", "tcp:h:2", VB_EXPORT_TLS_REQUIRE, NULL, "/etc/c",
                 "nbd tcp:h:2 tls=require tls-certs=/etc/c");
  assert_export ("nbd unix:/s tls-certs=/c tls=allow", "unix:/s", VB_EXPORT_TLS_ALLOW, NULL, "/c",
                 "nbd unix:/s tls=allow tls-certs=/c");

  assert_export_refused ("nbd tcp:h:1 tls=on", "tls 'on': expected off, allow or require");
  assert_export_refused ("nbd tcp:h:1 tls=require",
                         "export 'nbd tcp:h:1 tls=require': tls=require needs credentials: "
                         "tls-psk=KEYS-FILE or tls-certs=DIRECTORY");
  assert_export_refused ("nbd tcp:h:1 tls=off tls-psk=/k",
                         "export 'nbd tcp:h:1 tls=off tls-psk=/k': tls=off takes no credentials");
  assert_export_refused ("nbd tcp:h:1 tls-psk=/k tls-certs=/c",
                         "export 'nbd tcp:h:1 tls-psk=/k tls-certs=/c': give tls-psk or "
                         "tls-certs, not both");
  assert_export_refused ("nbd tcp:h:1 tls-psk=k",
                         "export 'nbd tcp:h:1 tls-psk=k': tls-psk must be an absolute path of at "
                         "most 4096 bytes");
  assert_export_refused ("nbd tcp:h:1 tls=allow tls=allow tls-psk=/k",
                         "export 'nbd tcp:h:1 tls=allow tls=allow tls-psk=/k': tls is given twice");
  assert_export_refused ("nbd tcp:h:1 tls-psk=/k tls-psk=/k",
                         "export 'nbd tcp:h:1 tls-psk=/k tls-psk=/k': tls-psk is given twice");
  assert_export_refused ("nbd tcp:h:1 port=2",
                         "export 'nbd tcp:h:1 port=2': unknown setting 'port' (known: tls, "
                         "tls-psk, tls-certs)");
  /* the settings are the words at the end: a socket path may have a space */
  assert_export ("nbd unix:/a b", "unix:/a b", VB_EXPORT_TLS_OFF, NULL, NULL, "nbd unix:/a b");
  assert_export ("nbd unix:/a b tls=allow tls-psk=/k", "unix:/a b", VB_EXPORT_TLS_ALLOW, "/k", NULL,
                 "nbd unix:/a b tls=allow tls-psk=/k");
  assert_export_refused ("nbd tcp:h:1  tls=off", "export 'tcp:h:1 ': listen address needs "
                                                 "tcp:HOST:PORT with a port from 1 to 65535");
  assert_export_refused ("nbd ", "listen '': expected unix:/ABSOLUTE/PATH (under 108 bytes) or "
                                 "tcp:HOST:PORT");
  assert_export_refused ("nbd tcp::0", "export 'tcp::0': listen address needs tcp:HOST:PORT with "
                                       "a port from 1 to 65535");
  assert_export_refused ("iscsi x", "export 'iscsi x': only 'nbd ADDRESS' is known");
}

static void
test_source_refused (void)
{
  assert_source_refused ("", "component: must not be empty");
  assert_source_refused (NULL, "component: must not be empty");
  assert_source_refused ("relative/a.img", "component 'relative/a.img': not an absolute path, "
                                           "vblk:NAME or an NBD URI");
  assert_source_refused ("a.img", "component 'a.img': not an absolute path, "
                                  "vblk:NAME or an NBD URI");
  assert_source_refused ("http://host/x", "component 'http://host/x': not an absolute path, "
                                          "vblk:NAME or an NBD URI");
  assert_source_refused ("vblk:", "component device name: must not be empty");
  assert_source_refused ("vblk:a b", "component device name 'a b': character 2 is not "
                                     "allowed (allowed: A-Z a-z 0-9 . _ -)");
  assert_source_refused ("vblk:..", "component device name '..' is reserved");
  assert_source_refused ("vblk:/dev/sda", "component device name '/dev/sda': character 1 is "
                                          "not allowed (allowed: A-Z a-z 0-9 . _ -)");
}

static void
test_uuid (void)
{
  g_autofree char *a = vb_uuid_new ();
  g_autofree char *b = vb_uuid_new ();
  g_autofree char *lower = g_ascii_strdown (a, -1);

  g_assert_true (vb_uuid_is_valid (a));
  g_assert_true (vb_uuid_is_valid (b));
  g_assert_cmpstr (a, !=, b);
  g_assert_cmpstr (a, ==, lower);
  g_assert_cmpuint (strlen (a), ==, 36);
  g_assert_cmpint (a[14], ==, '4'); /* version 4 */
  g_assert_true (vb_uuid_is_valid ("123e4567-e89b-12d3-a456-426614174000"));
  g_assert_false (vb_uuid_is_valid (NULL));
  g_assert_false (vb_uuid_is_valid (""));
  g_assert_false (vb_uuid_is_valid ("not-a-uuid"));
  g_assert_false (vb_uuid_is_valid ("123e4567-e89b-12d3-a456-42661417400"));
  g_assert_false (vb_uuid_is_valid ("123e4567e89b12d3a456426614174000"));
  g_assert_false (vb_uuid_is_valid ("123e4567-e89b-12d3-a456-42661417400g"));
}

/* vb_uuid_hash: equal strings hash alike; UUIDs that share their first
 * eight characters (as test fixtures do) still spread, by their last; a
 * table keyed by it finds what it holds. */
static void
test_uuid_hash (void)
{
  g_autoptr (GHashTable) table = g_hash_table_new_full (vb_uuid_hash, g_str_equal, g_free, NULL);
  g_autoptr (GHashTable) hashes = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autofree char *copy = g_strdup ("123e4567-e89b-12d3-a456-426614174000");

  g_assert_cmpuint (vb_uuid_hash ("123e4567-e89b-12d3-a456-426614174000"), ==, vb_uuid_hash (copy));
  g_assert_cmpuint (vb_uuid_hash ("short"), ==, g_str_hash ("short"));
  for (guint i = 0; i < 100; i++)
    {
      char *uuid = g_strdup_printf ("00000000-0000-4000-8000-%012u", i);
      g_hash_table_add (hashes, GUINT_TO_POINTER (vb_uuid_hash (uuid)));
      g_hash_table_add (table, uuid);
    }
  g_assert_cmpuint (g_hash_table_size (hashes), ==, 100);
  g_assert_true (g_hash_table_contains (table, "00000000-0000-4000-8000-000000000042"));
  g_assert_false (g_hash_table_contains (table, "00000000-0000-4000-8000-000000000100"));
}

static void
test_error_names (void)
{
  g_autoptr (GError) remote = NULL;

  g_assert_cmpstr (vb_error_short_name (VB_ERROR_BUSY), ==, "Busy");
  g_assert_cmpstr (vb_error_short_name (VB_ERROR_DEPENDENCY_CYCLE), ==, "DependencyCycle");
  g_assert_cmpstr (vb_error_short_name (VB_ERROR_FAILED), ==, "Failed");
  g_assert_null (vb_error_short_name ((VbErrorCode) (VB_ERROR_FAILED + 1)));

  /* The domain is registered with D-Bus: a remote error maps back. */
  (void) VB_ERROR;
  remote = g_dbus_error_new_for_dbus_error ("org.vblk.VBlk1.Error.AlreadyExists",
                                            "device 'a' already exists");
  g_assert_error (remote, VB_ERROR, VB_ERROR_ALREADY_EXISTS);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/util/name/valid", test_name_valid);
  g_test_add_func ("/util/name/empty", test_name_empty);
  g_test_add_func ("/util/name/too-long", test_name_too_long);
  g_test_add_func ("/util/name/bad-characters", test_name_bad_characters);
  g_test_add_func ("/util/shown/utf8", test_shown_utf8);
  g_test_add_func ("/util/escape/cases", test_escape);
  g_test_add_func ("/util/escape/round-trip", test_escape_round_trip_all);
  g_test_add_func ("/util/object-paths", test_object_paths);
  g_test_add_func ("/util/source/kinds", test_source_kinds);
  g_test_add_func ("/util/source/refused", test_source_refused);
  g_test_add_func ("/util/export-specs", test_export_specs);
  g_test_add_func ("/util/uuid", test_uuid);
  g_test_add_func ("/util/uuid-hash", test_uuid_hash);
  g_test_add_func ("/util/error-names", test_error_names);

  return g_test_run ();
}
