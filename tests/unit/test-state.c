/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the desired state (src/core/vb-state): defaults, the JSON
 * round trip, every way state.json can be corrupt and the message naming
 * the place, and durable saving and loading of the file. */
#include "config.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>

#include "vb-error.h"
#include "vb-state.h"

#define U1 "11111111-1111-4111-8111-111111111111"
#define U2 "22222222-2222-4222-8222-222222222222"
#define U3 "33333333-3333-4333-8333-333333333333"
#define C1 "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
#define C2 "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"

/* JSON written with ' for " so that the cases stay readable. */
static char *
json (const char *text)
{
  char *s = g_strdup (text);

  g_strdelimit (s, "'", '"');
  return s;
}

static VbState *
parse (const char *text, GError **error)
{
  g_autofree char *s = json (text);

  return vb_state_from_json (s, -1, "state.json", error);
}

static VbState *
sample_state (void)
{
  VbState *state = vb_state_new ();
  VbDeviceConfig *a = vb_device_config_new ("disk0", U1, "file", "loop");
  VbDeviceConfig *b = vb_device_config_new ("data", U2, "window", NULL);

  g_hash_table_insert (a->attributes, g_strdup ("sector_size"), g_strdup ("4096"));
  g_hash_table_insert (a->attributes, g_strdup ("read_only"), g_strdup ("false"));
  g_ptr_array_add (a->components, vb_component_config_new ("/srv/a \"quoted\".img", "0", C1));
  a->started = TRUE;

  g_hash_table_insert (b->attributes, g_strdup ("offset"), g_strdup ("1048576"));
  g_ptr_array_add (b->components, vb_component_config_new ("vblk:disk0", "0", C2));
  g_ptr_array_add (b->exports, g_strdup ("nbd unix:/run/vblk/data.sock"));
  b->autostart = FALSE;

  g_ptr_array_add (state->devices, a);
  g_ptr_array_add (state->devices, b);
  return state;
}

static void
assert_states_equal (const VbState *a, const VbState *b)
{
  g_assert_cmpuint (a->devices->len, ==, b->devices->len);
  for (guint i = 0; i < a->devices->len; i++)
    g_assert_true (vb_device_config_equal (a->devices->pdata[i], b->devices->pdata[i]));
}

/* ------------------------------------------------------------------ */

static void
test_device_defaults (void)
{
  g_autoptr (VbDeviceConfig) d = vb_device_config_new ("a", U1, "file", "auto");

  g_assert_cmpstr (d->name, ==, "a");
  g_assert_cmpstr (d->uuid, ==, U1);
  g_assert_cmpstr (d->driver, ==, "file");
  g_assert_cmpstr (d->backend, ==, "auto");
  g_assert_cmpuint (g_hash_table_size (d->attributes), ==, 0);
  g_assert_cmpuint (d->components->len, ==, 0);
  g_assert_cmpuint (d->exports->len, ==, 0);
  g_assert_true (d->autostart);
  g_assert_false (d->started);
}

static void
test_parse_defaults (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VbState) state = NULL;
  VbDeviceConfig *d;

  state = parse ("{'version': 1, 'devices': [{'name': 'a', 'uuid': '" U1 "', 'driver': 'file'}]}",
                 &error);
  g_assert_no_error (error);
  g_assert_nonnull (state);
  g_assert_cmpuint (state->devices->len, ==, 1);
  d = state->devices->pdata[0];
  g_assert_cmpstr (d->name, ==, "a");
  g_assert_cmpstr (d->uuid, ==, U1);
  g_assert_cmpstr (d->driver, ==, "file");
  g_assert_cmpstr (d->backend, ==, "auto");
  g_assert_cmpuint (g_hash_table_size (d->attributes), ==, 0);
  g_assert_cmpuint (d->components->len, ==, 0);
  g_assert_cmpuint (d->exports->len, ==, 0);
  g_assert_true (d->autostart);
  g_assert_false (d->started);
}

static void
test_parse_no_devices (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VbState) a = parse ("{'version': 1}", &error);
  g_autoptr (VbState) b = NULL;

  g_assert_no_error (error);
  g_assert_cmpuint (a->devices->len, ==, 0);
  b = parse ("{'version': 1, 'devices': []}", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (b->devices->len, ==, 0);
}

static void
test_parse_full (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VbState) state = NULL;
  const VbDeviceConfig *d;
  const VbComponentConfig *c;

  state = parse ("{'devices': [{'name': 'r', 'uuid': '" U1 "', 'driver': "
                 "'raid1', 'backend': 'loop', 'attributes': {'bitmap_chunk': "
                 "'67108864'}, 'components': [{'source': '/dev/sdb', 'role': "
                 "'0', 'uuid': '" C1 "'}, {'source': 'vblk:x', 'role': '12', "
                 "'uuid': '" C2 "'}, {'source': '/dev/sdd', 'role': 'spare', "
                 "'uuid': '" U3 "'}], 'exports': ['nbd tcp:0:10809'], "
                 "'autostart': false, 'started': true}], 'version': 1}",
                 &error);
  g_assert_no_error (error);
  d = vb_state_lookup (state, "r");
  g_assert_nonnull (d);
  g_assert_cmpstr (d->backend, ==, "loop");
  g_assert_cmpstr (g_hash_table_lookup (d->attributes, "bitmap_chunk"), ==, "67108864");
  g_assert_cmpuint (g_hash_table_size (d->attributes), ==, 1);
  g_assert_cmpuint (d->components->len, ==, 3);
  c = d->components->pdata[0];
  g_assert_cmpstr (c->source, ==, "/dev/sdb");
  g_assert_cmpstr (c->role, ==, "0");
  g_assert_cmpstr (c->uuid, ==, C1);
  c = d->components->pdata[1];
  g_assert_cmpstr (c->source, ==, "vblk:x");
  g_assert_cmpstr (c->role, ==, "12");
  c = d->components->pdata[2];
  g_assert_cmpstr (c->role, ==, "spare");
  g_assert_cmpuint (d->exports->len, ==, 1);
  /* plaintext TCP of a state of before TLS, as it is kept now */
  g_assert_cmpstr (d->exports->pdata[0], ==, "nbd tcp:0:10809 tls=off");
  g_assert_false (d->autostart);
  g_assert_true (d->started);
}

static void
test_round_trip (void)
{
  g_autoptr (VbState) state = sample_state ();
  g_autoptr (VbState) back = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *text = vb_state_to_json (state);
  g_autofree char *again = NULL;

  back = vb_state_from_json (text, -1, "state.json", &error);
  g_assert_no_error (error);
  assert_states_equal (state, back);
  again = vb_state_to_json (back);
  g_assert_cmpstr (text, ==, again);
  g_assert_true (g_str_has_suffix (text, "}\n"));
}

static void
test_to_json_exact (void)
{
  g_autoptr (VbState) state = vb_state_new ();
  VbDeviceConfig *d = vb_device_config_new ("a", U1, "file", "auto");
  g_autofree char *text = NULL;
  g_autofree char *empty = NULL;
  g_autoptr (VbState) none = vb_state_new ();

  /* Inserted out of order: written sorted. */
  g_hash_table_insert (d->attributes, g_strdup ("sector_size"), g_strdup ("512"));
  g_hash_table_insert (d->attributes, g_strdup ("read_only"), g_strdup ("true"));
  g_ptr_array_add (d->components, vb_component_config_new ("/x", "0", C1));
  g_ptr_array_add (state->devices, d);

  text = vb_state_to_json (state);
  g_assert_cmpstr (text, ==,
                   "{\n"
                   "  \"version\" : 1,\n"
                   "  \"devices\" : [\n"
                   "    {\n"
                   "      \"name\" : \"a\",\n"
                   "      \"uuid\" : \"" U1 "\",\n"
                   "      \"driver\" : \"file\",\n"
                   "      \"backend\" : \"auto\",\n"
                   "      \"attributes\" : {\n"
                   "        \"read_only\" : \"true\",\n"
                   "        \"sector_size\" : \"512\"\n"
                   "      },\n"
                   "      \"components\" : [\n"
                   "        {\n"
                   "          \"source\" : \"/x\",\n"
                   "          \"role\" : \"0\",\n"
                   "          \"uuid\" : \"" C1 "\"\n"
                   "        }\n"
                   "      ],\n"
                   "      \"exports\" : [],\n"
                   "      \"autostart\" : true,\n"
                   "      \"started\" : false\n"
                   "    }\n"
                   "  ]\n"
                   "}\n");

  empty = vb_state_to_json (none);
  g_assert_cmpstr (empty, ==, "{\n  \"version\" : 1,\n  \"devices\" : []\n}\n");
}

/* vb_state_share: the same configs; the first change of one through
 * vb_state_lookup_mut copies it in the changing state alone */
static void
test_share_copy_on_write (void)
{
  g_autoptr (VbState) state = sample_state ();
  g_autoptr (VbState) shared = vb_state_share (state);
  VbDeviceConfig *mine, *again;
  const VbDeviceConfig *theirs = state->devices->pdata[0];

  g_assert_true (shared->devices->pdata[0] == theirs);
  g_assert_true (vb_device_config_equal (shared->devices->pdata[1], state->devices->pdata[1]));
  mine = vb_state_lookup_mut (shared, "disk0");
  g_assert_true (mine != theirs);
  g_assert_true (state->devices->pdata[0] == theirs);
  g_assert_true (vb_device_config_equal (mine, theirs));
  mine->started = !theirs->started;
  g_hash_table_insert (mine->attributes, g_strdup ("read_only"), g_strdup ("true"));
  g_assert_false (vb_device_config_equal (mine, theirs));
  g_assert_cmpstr (g_hash_table_lookup (theirs->attributes, "read_only"), ==, "false");
  /* once its own, the same config again */
  again = vb_state_lookup_mut (shared, "disk0");
  g_assert_true (again == mine);
  again = vb_state_device_mut (shared, 0);
  g_assert_true (again == mine);
  /* the other state's own config: no copy once nothing else holds it */
  g_clear_pointer (&shared, vb_state_free);
  g_assert_true (vb_state_device_mut (state, 1) == state->devices->pdata[1]);
  g_assert_null (vb_state_lookup_mut (state, "nope"));
}

/* VBLK_TEST_FROZEN=1: a shared config changed in place is a critical
 * when a reference to it goes */
static void
test_share_frozen (void)
{
  if (g_test_subprocess ())
    {
      g_autoptr (VbState) state = NULL;
      VbState *shared;
      VbDeviceConfig *d;

      g_setenv ("VBLK_TEST_FROZEN", "1", TRUE);
      state = sample_state ();
      shared = vb_state_share (state);
      d = shared->devices->pdata[0]; /* not through vb_state_lookup_mut */
      d->started = !d->started;
      vb_state_free (shared);
      return;
    }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_failed ();
  g_test_trap_assert_stderr ("*device 'disk0': its config, held by two states, was changed in "
                             "place*");
}

/* @n devices named d0, d1, ... */
static VbState *
numbered_state (guint n)
{
  VbState *state = vb_state_new ();

  for (guint i = 0; i < n; i++)
    {
      g_autofree char *name = g_strdup_printf ("d%u", i);
      g_autofree char *uuid = g_strdup_printf ("00000000-0000-4000-8000-%012u", i);
      g_ptr_array_add (state->devices, vb_device_config_new (name, uuid, "file", "auto"));
    }
  return state;
}

static void
assert_all_found (const VbState *state)
{
  for (guint i = 0; i < state->devices->len; i++)
    g_assert_cmpint (
        vb_state_index_of (state, ((const VbDeviceConfig *) state->devices->pdata[i])->name), ==,
        (gint) i);
  g_assert_cmpint (vb_state_index_of (state, "d-none"), ==, -1);
}

/* The index of names: every device found where it is, through appends
 * (a scan of the tail, then an index built again), a share, a removal
 * and a config put in another's place */
static void
test_index (void)
{
  g_autoptr (VbState) state = numbered_state (3000);
  g_autoptr (VbState) shared = NULL;
  g_autoptr (VbState) copy = NULL;
  VbStateIndex *first;

  assert_all_found (state);
  first = state->index;
  g_assert_nonnull (first);
  /* a share and a copy use the same index: the same names in the same places */
  shared = vb_state_share (state);
  copy = vb_state_copy (state);
  g_assert_true (shared->index == first && copy->index == first);
  assert_all_found (copy);
  /* appends: the tail is scanned, then the index built again */
  for (guint i = 3000; i < 4000; i++)
    {
      g_autofree char *name = g_strdup_printf ("d%u", i);
      g_ptr_array_add (shared->devices, vb_device_config_new (name, NULL, "file", "auto"));
      g_assert_cmpint (vb_state_index_of (shared, name), ==, (gint) i);
    }
  g_assert_true (shared->index != first);
  assert_all_found (shared);
  /* the state it was shared from keeps its own, untouched */
  g_assert_true (state->index == first);
  assert_all_found (state);
  /* a removal, then the index built again */
  g_ptr_array_remove_index (shared->devices, 10);
  vb_state_reindex (shared);
  g_assert_null (shared->index);
  g_assert_cmpint (vb_state_index_of (shared, "d10"), ==, -1);
  assert_all_found (shared);
  /* a config in the place of one of the same name: the index still holds */
  vb_device_config_free (shared->devices->pdata[5]);
  shared->devices->pdata[5] = vb_device_config_new ("d5", NULL, "raid1", "auto");
  g_assert_cmpint (vb_state_index_of (shared, "d5"), ==, 5);
}

/* VBLK_TEST_FROZEN=1: a removal without vb_state_reindex (the index
 * would send a lookup to the wrong place) is a critical */
static void
test_index_frozen (void)
{
  if (g_test_subprocess ())
    {
      g_autoptr (VbState) state = NULL;

      g_setenv ("VBLK_TEST_FROZEN", "1", TRUE);
      state = numbered_state (100);
      assert_all_found (state);
      vb_device_config_free (state->devices->pdata[7]);
      state->devices->pdata[7] = vb_device_config_new ("moved", NULL, "file", "auto");
      vb_state_index_of (state, "moved");
      return;
    }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_failed ();
  g_test_trap_assert_stderr ("*state index: 'moved' found at -1, a scan says 7*");
}

static void
test_copy_equal_lookup (void)
{
  g_autoptr (VbState) state = sample_state ();
  g_autoptr (VbState) copy = vb_state_copy (state);
  VbDeviceConfig *d;
  VbComponentConfig *c;

  assert_states_equal (state, copy);
  g_assert_true (copy->devices->pdata[0] != state->devices->pdata[0]);

  g_assert_cmpint (vb_state_index_of (state, "disk0"), ==, 0);
  g_assert_cmpint (vb_state_index_of (state, "data"), ==, 1);
  g_assert_cmpint (vb_state_index_of (state, "nope"), ==, -1);
  g_assert_true (vb_state_lookup (state, "data") == state->devices->pdata[1]);
  g_assert_null (vb_state_lookup (state, "nope"));

  d = vb_state_lookup_mut (copy, "disk0");
  g_hash_table_insert (d->attributes, g_strdup ("read_only"), g_strdup ("true"));
  g_assert_false (vb_device_config_equal (d, state->devices->pdata[0]));
  g_hash_table_insert (d->attributes, g_strdup ("read_only"), g_strdup ("false"));
  g_assert_true (vb_device_config_equal (d, state->devices->pdata[0]));

  c = vb_component_config_copy (d->components->pdata[0]);
  g_free (c->role);
  c->role = g_strdup ("spare");
  g_ptr_array_add (d->components, c);
  g_assert_false (vb_device_config_equal (d, state->devices->pdata[0]));
  g_ptr_array_remove_index (d->components, 1);
  g_assert_true (vb_device_config_equal (d, state->devices->pdata[0]));

  d->started = FALSE;
  g_assert_false (vb_device_config_equal (d, state->devices->pdata[0]));
  d->started = TRUE;
  g_ptr_array_add (d->exports, g_strdup ("nbd tcp:0:1"));
  g_assert_false (vb_device_config_equal (d, state->devices->pdata[0]));
}

/* ------------------------------------------------------------------ */
/* Corrupt content: each case is its own test, named after what is wrong. */

typedef struct {
  const char *name;
  const char *json; /* ' stands for " */
  const char *message;
} CorruptCase;

#define DEV(rest) "{'name': 'a', 'uuid': '" U1 "', 'driver': 'file'" rest "}"
#define DOC(devices) "{'version': 1, 'devices': [" devices "]}"
#define COMP(rest) "{'source': '/srv/a.img', 'role': '0', 'uuid': '" C1 "'" rest "}"
#define BAD_CHARS "is not allowed (allowed: A-Z a-z 0-9 . _ -)"

static const CorruptCase corrupt_cases[] = {
  { "syntax-missing-colon", "{\n  'version': 1,\n  'devices' []\n}",
    "state.json:3:" /* prefix; the rest is json-glib's wording */ },
  { "syntax-trailing-comma", "{'version': 1,}", "state.json:1:" },
  { "syntax-truncated", "{'version': 1, 'devices': [", "state.json:1:" },
  { "syntax-garbage-after", "{'version': 1} x", "state.json:1:16: text after the JSON value" },
  /* refused before json-glib, which loses the tree of the first of two
   * values (fuzz-state, with LeakSanitizer); brackets in strings do not
   * count */
  { "two-values", "{'version': 1, 'devices': []}\n {'a': '}{'}",
    "state.json:2:2: text after the JSON value" },
  { "two-scalars", "1 2", "state.json:1:3: text after the JSON value" },
  { "invalid-utf8", "{'version': 1, 'devices': [\n  \xff]}", "state.json:2:3: invalid UTF-8" },
  /* json-glib decodes \222 (no JSON escape) as byte 0x92, in a value, a
   * key and the quote of a syntax error alike (found by fuzz-state; its
   * input is corpus/state/invalid-escape-message): nothing that is not
   * UTF-8 gets through, into the state or a message */
  { "octal-escape-value", DOC (DEV (", 'backend': '\\222'")),
    "state.json: devices[0].backend: not UTF-8 (an escape JSON does not have, such as \\222?)" },
  { "octal-escape-key", "{'version': 1, '\\222': 1}",
    "state.json:1:24: a key that is not UTF-8 (an escape JSON does not have, such as \\222?)" },
  { "octal-escape-syntax", "{'version': 1, 'devices': ['/srv/a \\2222 ,\n]}", "state.json:2:" },
  { "duplicate-key", "{'version': 1,\n 'version': 1}", "state.json:2:" },
  { "empty", "", "state.json: empty, expected a JSON object" },
  { "whitespace-only", " \n\t \n", "state.json: empty, expected a JSON object" },
  { "top-level-array", "[]", "state.json: expected an object at the top level" },
  { "top-level-null", "null", "state.json: expected an object at the top level" },
  { "version-missing", "{'devices': []}", "state.json: version: missing" },
  { "version-2", "{'version': 2}", "state.json: version: unsupported version 2 (expected 1)" },
  { "version-0", "{'version': 0, 'devices': []}",
    "state.json: version: unsupported version 0 (expected 1)" },
  { "version-string", "{'version': '1'}", "state.json: version: expected an integer" },
  { "version-float", "{'version': 1.0}", "state.json: version: expected an integer" },
  { "unknown-top-level-key", "{'version': 1, 'colour': 'red', 'devices': []}",
    "state.json: unknown key 'colour'" },
  { "unknown-device-key", DOC (DEV (", 'size': '1'")),
    "state.json: devices[0]: unknown key 'size'" },
  { "unknown-component-key", DOC (DEV (", 'components': [" COMP (", 'state': 'x'") "]")),
    "state.json: devices[0].components[0]: unknown key 'state'" },
  { "devices-not-array", "{'version': 1, 'devices': {}}",
    "state.json: devices: expected an array" },
  { "device-not-object", DOC ("'a'"), "state.json: devices[0]: expected an object" },
  { "driver-not-string",
    DOC ("{'name': 'a', 'uuid': '" U1 "', 'driver': 'file'}, "
         "{'name': 'b', 'uuid': '" U2 "', 'driver': 'file'}, "
         "{'name': 'c', 'uuid': '" U3 "', 'driver': 5}"),
    "state.json: devices[2].driver: expected a string" },
  { "driver-null", DOC ("{'name': 'a', 'uuid': '" U1 "', 'driver': null}"),
    "state.json: devices[0].driver: expected a string" },
  { "driver-empty", DOC ("{'name': 'a', 'uuid': '" U1 "', 'driver': ''}"),
    "state.json: devices[0].driver: must not be empty" },
  { "driver-missing", DOC ("{'name': 'a', 'uuid': '" U1 "'}"),
    "state.json: devices[0].driver: missing" },
  { "name-missing", DOC ("{'uuid': '" U1 "', 'driver': 'file'}"),
    "state.json: devices[0].name: missing" },
  { "name-not-string", DOC ("{'name': ['a'], 'uuid': '" U1 "', 'driver': 'file'}"),
    "state.json: devices[0].name: expected a string" },
  { "backend-not-string", DOC (DEV (", 'backend': true")),
    "state.json: devices[0].backend: expected a string" },
  { "attributes-not-object", DOC (DEV (", 'attributes': []")),
    "state.json: devices[0].attributes: expected an object" },
  { "attribute-not-string", DOC (DEV (", 'attributes': {'read_only': false}")),
    "state.json: devices[0].attributes.read_only: expected a string" },
  { "components-not-array", DOC (DEV (", 'components': {}")),
    "state.json: devices[0].components: expected an array" },
  { "component-not-object", DOC (DEV (", 'components': ['/srv/a.img']")),
    "state.json: devices[0].components[0]: expected an object" },
  { "component-source-missing", DOC (DEV (", 'components': [{'role': '0', 'uuid': '" C1 "'}]")),
    "state.json: devices[0].components[0].source: missing" },
  { "component-role-number",
    DOC (DEV (", 'components': [{'source': '/x', 'role': 0, 'uuid': '" C1 "'}]")),
    "state.json: devices[0].components[0].role: expected a string" },
  { "component-role-word",
    DOC (DEV (", 'components': [{'source': '/x', 'role': 'main', 'uuid': '" C1 "'}]")),
    "state.json: devices[0].components[0].role: 'main' is not a slot number, \"spare\" or \"faulty\"" },
  { "component-role-leading-zero",
    DOC (DEV (", 'components': [{'source': '/x', 'role': '01', 'uuid': '" C1 "'}]")),
    "state.json: devices[0].components[0].role: '01' is not a slot number, \"spare\" or \"faulty\"" },
  { "component-role-negative",
    DOC (DEV (", 'components': [{'source': '/x', 'role': '-1', 'uuid': '" C1 "'}]")),
    "state.json: devices[0].components[0].role: '-1' is not a slot number, \"spare\" or \"faulty\"" },
  { "exports-not-array", DOC (DEV (", 'exports': 'nbd'")),
    "state.json: devices[0].exports: expected an array" },
  { "export-not-string", DOC (DEV (", 'exports': ['nbd', 1]")),
    "state.json: devices[0].exports[1]: expected a string" },
  { "autostart-not-boolean", DOC (DEV (", 'autostart': 'yes'")),
    "state.json: devices[0].autostart: expected true or false" },
  { "started-not-boolean", DOC (DEV (", 'started': 1")),
    "state.json: devices[0].started: expected true or false" },
  { "name-bad-character", DOC ("{'name': 'a b', 'uuid': '" U1 "', 'driver': 'file'}"),
    "state.json: devices[0].name 'a b': character 2 " BAD_CHARS },
  { "name-slash", DOC ("{'name': '../etc', 'uuid': '" U1 "', 'driver': 'file'}"),
    "state.json: devices[0].name '../etc': character 3 " BAD_CHARS },
  { "name-empty", DOC ("{'name': '', 'uuid': '" U1 "', 'driver': 'file'}"),
    "state.json: devices[0].name: must not be empty" },
  { "name-dot-dot", DOC ("{'name': '..', 'uuid': '" U1 "', 'driver': 'file'}"),
    "state.json: devices[0].name '..' is reserved" },
  { "name-65-characters",
    DOC ("{'name': '"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "', 'uuid': '" U1 "', 'driver': 'file'}"),
    "state.json: devices[0].name '"
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    "': 65 characters, at most 64 are allowed" },
  { "uuid-bad", DOC ("{'name': 'a', 'uuid': 'nope', 'driver': 'file'}"),
    "state.json: devices[0].uuid: 'nope' is not a valid UUID" },
  { "uuid-short",
    DOC ("{'name': 'a', 'uuid': '11111111-1111-4111-8111-11111111111', 'driver': 'file'}"),
    "state.json: devices[0].uuid: '11111111-1111-4111-8111-11111111111' is not a valid UUID" },
  { "uuid-missing", DOC ("{'name': 'a', 'driver': 'file'}"),
    "state.json: devices[0].uuid: missing" },
  { "component-uuid-bad",
    DOC (DEV (", 'components': [{'source': '/x', 'role': '0', 'uuid': 'x'}]")),
    "state.json: devices[0].components[0].uuid: 'x' is not a valid UUID" },
  { "component-uuid-missing", DOC (DEV (", 'components': [{'source': '/x', 'role': '0'}]")),
    "state.json: devices[0].components[0].uuid: missing" },
  { "duplicate-names",
    DOC ("{'name': 'a', 'uuid': '" U1 "', 'driver': 'file'}, "
         "{'name': 'b', 'uuid': '" U2 "', 'driver': 'file'}, "
         "{'name': 'a', 'uuid': '" U3 "', 'driver': 'file'}"),
    "state.json: devices[2].name: duplicate device name 'a' (also devices[0])" },
  { "duplicate-uuids",
    DOC ("{'name': 'a', 'uuid': '" U1 "', 'driver': 'file'}, "
         "{'name': 'b', 'uuid': '" U1 "', 'driver': 'file'}"),
    "state.json: devices[1].uuid: duplicate device UUID '" U1 "' (also devices[0])" },
  { "duplicate-uuids-case",
    DOC ("{'name': 'a', 'uuid': '" C1 "', 'driver': 'file'}, "
         "{'name': 'b', 'uuid': 'AAAAAAAA-AAAA-4AAA-8AAA-AAAAAAAAAAAA', 'driver': 'file'}"),
    "state.json: devices[1].uuid: duplicate device UUID "
    "'AAAAAAAA-AAAA-4AAA-8AAA-AAAAAAAAAAAA' (also devices[0])" },
  { "duplicate-component-sources",
    DOC (DEV (", 'components': [{'source': '/srv/a.img', 'role': '0', 'uuid': '" C1 "'}, "
              "{'source': '/srv/a.img', 'role': '1', 'uuid': '" C2 "'}]")),
    "state.json: devices[0].components[1].source: duplicate source "
    "'/srv/a.img' (also devices[0].components[0])" },
};

static void
test_corrupt (gconstpointer data)
{
  const CorruptCase *c = data;
  g_autoptr (GError) error = NULL;
  g_autoptr (VbState) state = parse (c->json, &error);

  g_assert_null (state);
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_true (g_utf8_validate (error->message, -1, NULL)); /* D-Bus carries no other */
  /* Syntax errors: the place is ours, the wording json-glib's. */
  if (g_str_has_suffix (c->message, ":"))
    {
      g_assert_true (g_str_has_prefix (error->message, c->message));
      g_assert_true (g_ascii_isdigit (error->message[strlen (c->message)]));
    }
  else
    g_assert_cmpstr (error->message, ==, c->message);
}

/* The exact place json-glib reports, and that it is not "<data>". */
static void
test_syntax_place (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VbState) state = NULL;

  state = parse ("{\n  'version': 1,\n  'devices' []\n}", &error);
  g_assert_null (state);
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  /* json-glib places it just after the token it did not expect. */
  g_assert_true (g_str_has_prefix (error->message, "state.json:3:11: "));
  g_assert_null (strstr (error->message, "<data>"));
  g_clear_error (&error);

  state = parse ("{'version': 1,\n 'devices': [],\n 'version': 1}", &error);
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, "state.json:3:13: duplicate key 'version'");
}

static void
test_origin_named (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VbState) state = NULL;

  state = vb_state_from_json ("{\"version\": 3}", -1, "desired state", &error);
  g_assert_null (state);
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==,
                   "desired state: version: unsupported version 3 (expected 1)");
}

static void
test_length_respected (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VbState) state = NULL;
  const char text[] = "{\"version\": 1}garbage";

  state = vb_state_from_json (text, 14, "state.json", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (state->devices->len, ==, 0);
  g_clear_pointer (&state, vb_state_free);

  /* An embedded NUL is not text. */
  state = vb_state_from_json ("{\"version\": 1}\0", 15, "state.json", &error);
  g_assert_null (state);
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, "state.json:1:15: NUL byte in the text");
}

/* ------------------------------------------------------------------ */
/* Files */

typedef struct {
  char *dir;
  char *path;
} Fixture;

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  f->dir = g_dir_make_tmp ("vblk-test-state-XXXXXX", &error);
  g_assert_no_error (error);
  f->path = g_build_filename (f->dir, VB_STATE_FILE, NULL);
}

static void
remove_tree (const char *path)
{
  GDir *dir = g_dir_open (path, 0, NULL);
  const char *entry;

  if (dir == NULL)
    {
      g_remove (path);
      return;
    }
  while ((entry = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *child = g_build_filename (path, entry, NULL);
      remove_tree (child);
    }
  g_dir_close (dir);
  g_rmdir (path);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  remove_tree (f->dir);
  g_free (f->dir);
  g_free (f->path);
}

static GPtrArray *
list_dir (const char *path)
{
  GPtrArray *names = g_ptr_array_new_with_free_func (g_free);
  GDir *dir = g_dir_open (path, 0, NULL);
  const char *entry;

  g_assert_nonnull (dir);
  while ((entry = g_dir_read_name (dir)) != NULL)
    g_ptr_array_add (names, g_strdup (entry));
  g_dir_close (dir);
  return names;
}

static void
test_load_missing (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VbState) state = vb_state_load (f->path, &error);

  g_assert_no_error (error);
  g_assert_nonnull (state);
  g_assert_cmpuint (state->devices->len, ==, 0);
  /* Loading does not create the file. */
  g_assert_false (g_file_test (f->path, G_FILE_TEST_EXISTS));
}

static void
test_save_load (Fixture *f, gconstpointer data)
{
  g_autoptr (VbState) state = sample_state ();
  g_autoptr (VbState) loaded = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *contents = NULL;
  g_autofree char *expected = vb_state_to_json (state);
  g_autoptr (GPtrArray) entries = NULL;
  struct stat st;

  g_assert_true (vb_state_save (state, f->path, &error));
  g_assert_no_error (error);

  loaded = vb_state_load (f->path, &error);
  g_assert_no_error (error);
  assert_states_equal (state, loaded);

  g_assert_true (g_file_get_contents (f->path, &contents, NULL, &error));
  g_assert_cmpstr (contents, ==, expected);
  g_assert_cmpint (stat (f->path, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 07777, ==, 0600);

  /* Only state.json: the temp file was renamed, not left behind. */
  entries = list_dir (f->dir);
  g_assert_cmpuint (entries->len, ==, 1);
  g_assert_cmpstr (entries->pdata[0], ==, VB_STATE_FILE);
}

static void
test_save_replaces (Fixture *f, gconstpointer data)
{
  g_autoptr (VbState) state = sample_state ();
  g_autoptr (VbState) loaded = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) entries = NULL;

  g_assert_true (vb_state_save (state, f->path, &error));
  g_ptr_array_remove_index (state->devices, 0);
  vb_state_reindex (state);
  g_assert_true (vb_state_save (state, f->path, &error));
  g_assert_no_error (error);

  loaded = vb_state_load (f->path, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (loaded->devices->len, ==, 1);
  assert_states_equal (state, loaded);

  entries = list_dir (f->dir);
  g_assert_cmpuint (entries->len, ==, 1);
  g_assert_cmpstr (entries->pdata[0], ==, VB_STATE_FILE);
}

static void
test_save_missing_dir (Fixture *f, gconstpointer data)
{
  g_autoptr (VbState) state = sample_state ();
  g_autoptr (GError) error = NULL;
  g_autofree char *path = g_build_filename (f->dir, "nope", VB_STATE_FILE, NULL);
  g_autofree char *prefix = g_strconcat (path, ": ", NULL);

  g_assert_false (vb_state_save (state, path, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_FAILED);
  g_assert_true (g_str_has_prefix (error->message, prefix));
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
}

static void
test_load_corrupt_file (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VbState) state = NULL;
  g_autofree char *expected = NULL;
  g_autofree char *before = NULL;
  g_autofree char *after = NULL;

  g_assert_true (g_file_set_contents (f->path, "{\"version\": 1,\n  \"devices\": 7}\n", -1, NULL));
  state = vb_state_load (f->path, &error);
  g_assert_null (state);
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  expected = g_strdup_printf ("%s: devices: expected an array", f->path);
  g_assert_cmpstr (error->message, ==, expected);
  g_clear_error (&error);
  g_clear_pointer (&expected, g_free);

  g_assert_true (g_file_set_contents (f->path, "{\"version\": 1,\n  \"devices\": [}\n", -1, NULL));
  state = vb_state_load (f->path, &error);
  g_assert_null (state);
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  expected = g_strdup_printf ("%s:2:", f->path);
  g_assert_true (g_str_has_prefix (error->message, expected));
  g_clear_error (&error);
  g_clear_pointer (&expected, g_free);

  /* Loading never rewrites what it could not read. */
  g_assert_true (g_file_get_contents (f->path, &before, NULL, NULL));
  state = vb_state_load (f->path, NULL);
  g_assert_null (state);
  g_assert_true (g_file_get_contents (f->path, &after, NULL, NULL));
  g_assert_cmpstr (before, ==, after);
}

static void
test_load_empty_file (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VbState) state = NULL;
  g_autofree char *expected = g_strdup_printf ("%s: empty, expected a JSON object", f->path);

  g_assert_true (g_file_set_contents (f->path, "", 0, NULL));
  state = vb_state_load (f->path, &error);
  g_assert_null (state);
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, expected);
  g_clear_error (&error);

  g_assert_true (g_file_set_contents (f->path, "\n  \n", -1, NULL));
  state = vb_state_load (f->path, &error);
  g_assert_null (state);
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (error->message, ==, expected);
}

static void
test_load_unreadable (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VbState) state = NULL;
  g_autofree char *expected = NULL;

  /* A directory where the file should be (works as root, unlike chmod). */
  g_assert_cmpint (g_mkdir (f->path, 0700), ==, 0);
  state = vb_state_load (f->path, &error);
  g_assert_null (state);
  g_assert_error (error, VB_ERROR, VB_ERROR_FAILED);
  /* "PATH: " then GLib's own words, which end with the reason. */
  expected = g_strdup_printf ("%s: ", f->path);
  g_assert_true (g_str_has_prefix (error->message, expected));
  g_assert_true (g_str_has_suffix (error->message, g_strerror (EISDIR)));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/state/device-defaults", test_device_defaults);
  g_test_add_func ("/state/parse/defaults", test_parse_defaults);
  g_test_add_func ("/state/parse/no-devices", test_parse_no_devices);
  g_test_add_func ("/state/parse/full", test_parse_full);
  g_test_add_func ("/state/round-trip", test_round_trip);
  g_test_add_func ("/state/to-json-exact", test_to_json_exact);
  g_test_add_func ("/state/copy-equal-lookup", test_copy_equal_lookup);
  g_test_add_func ("/state/share-copy-on-write", test_share_copy_on_write);
  g_test_add_func ("/state/share-frozen", test_share_frozen);
  g_test_add_func ("/state/index", test_index);
  g_test_add_func ("/state/index-frozen", test_index_frozen);
  for (guint i = 0; i < G_N_ELEMENTS (corrupt_cases); i++)
    {
      g_autofree char *name = g_strconcat ("/state/corrupt/", corrupt_cases[i].name, NULL);
      g_test_add_data_func (name, &corrupt_cases[i], test_corrupt);
    }
  g_test_add_func ("/state/corrupt-place/syntax", test_syntax_place);
  g_test_add_func ("/state/corrupt-place/origin", test_origin_named);
  g_test_add_func ("/state/parse/length", test_length_respected);

  g_test_add ("/state/file/load-missing", Fixture, NULL, fixture_set_up, test_load_missing,
              fixture_tear_down);
  g_test_add ("/state/file/save-load", Fixture, NULL, fixture_set_up, test_save_load,
              fixture_tear_down);
  g_test_add ("/state/file/save-replaces", Fixture, NULL, fixture_set_up, test_save_replaces,
              fixture_tear_down);
  g_test_add ("/state/file/save-missing-dir", Fixture, NULL, fixture_set_up, test_save_missing_dir,
              fixture_tear_down);
  g_test_add ("/state/file/load-corrupt", Fixture, NULL, fixture_set_up, test_load_corrupt_file,
              fixture_tear_down);
  g_test_add ("/state/file/load-empty", Fixture, NULL, fixture_set_up, test_load_empty_file,
              fixture_tear_down);
  g_test_add ("/state/file/load-unreadable", Fixture, NULL, fixture_set_up, test_load_unreadable,
              fixture_tear_down);

  return g_test_run ();
}
