/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Manager.Apply's pure part: the spec reader (vb_spec_from_json), the
 * whole-spec checks with their JSON paths, and the plan's steps and order
 * (src/core/vb-apply.c). */
#include "config.h"

#include <string.h>

#include "driver.h"
#include "vb-apply.h"
#include "vb-error.h"

#define U1 "11111111-1111-4111-8111-111111111111"
#define U2 "22222222-2222-4222-8222-222222222222"
#define UC "33333333-3333-4333-8333-333333333333"
#define UD "44444444-4444-4444-8444-444444444444"

/* The desired state the plans start from: raid1 r1 (started, one
 * spare), linear l on it (started). */
static const char current_json[]
    = "{\"version\": 1, \"devices\": ["
      " {\"name\": \"r1\", \"uuid\": \"" U1 "\", \"driver\": \"raid1\","
      "  \"attributes\": {},"
      "  \"components\": [{\"source\": \"/a\", \"role\": \"0\", \"uuid\": \"" UC "\"},"
      "                   {\"source\": \"/b\", \"role\": \"1\", \"uuid\": \"" UD "\"},"
      "                   {\"source\": \"/s\", \"role\": \"spare\", \"uuid\": \"" UC "\"}],"
      "  \"started\": true},"
      " {\"name\": \"l\", \"uuid\": \"" U2 "\", \"driver\": \"linear\","
      "  \"components\": [{\"source\": \"vblk:r1\", \"role\": \"0\", \"uuid\": \"" UD "\"}],"
      "  \"started\": true}]}";

/* @json as vblkd keeps it: every attribute resolved */
static VbState *
state_as_kept (const char *json)
{
  g_autoptr (GError) error = NULL;
  VbState *state = vb_state_from_json (json, -1, "state", &error);
  GHashTable *resolved;

  g_assert_no_error (error);
  for (guint i = 0; i < state->devices->len; i++)
    {
      VbDeviceConfig *d = state->devices->pdata[i];
      resolved = vb_driver_resolve_attributes (vb_driver_lookup (d->driver), NULL, d->attributes,
                                               &error);
      g_assert_no_error (error);
      g_hash_table_unref (d->attributes);
      d->attributes = resolved;
    }
  return state;
}

static VbState *
current_state (void)
{
  return state_as_kept (current_json);
}

static GPtrArray *
plan_for (const char *spec_json, gboolean prune, GError **error)
{
  g_autoptr (VbState) current = current_state ();
  g_autoptr (VbState) spec = vb_spec_from_json (spec_json, -1, "spec", error);
  VbApplyOptions options = { .prune = prune };

  if (spec == NULL)
    return NULL;
  return vb_apply_plan (current, spec, &options, error);
}

/* "action:device ..." of @plan */
static char *
plan_text (GPtrArray *plan)
{
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < plan->len; i++)
    {
      g_autofree char *id = vb_apply_step_id (plan->pdata[i]);
      g_string_append_printf (s, "%s%s", i ? " " : "", id);
    }
  return g_string_free (s, FALSE);
}

/* The current state as a spec: nothing to do. */
static void
test_same_is_empty (void)
{
  g_autoptr (VbState) current = current_state ();
  g_autofree char *json = vb_spec_to_json (current);
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) plan = plan_for (json, FALSE, &error);

  g_assert_no_error (error);
  g_assert_cmpuint (plan->len, ==, 0);
}

/* Written by hand: no UUIDs, components as strings, defaults left out. */
static void
test_short_form_is_empty (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) plan
      = plan_for ("{\"version\": 1, \"devices\": ["
                  " {\"name\": \"r1\", \"driver\": \"raid1\", \"attributes\": {\"bitmap_chunk\": "
                  "\"64M\"},"
                  "  \"components\": [\"/a\", \"/b\", {\"source\": \"/s\", \"role\": \"spare\"}]},"
                  " {\"name\": \"l\", \"driver\": \"linear\", \"components\": [\"vblk:r1\"]}]}",
                  FALSE, &error);

  g_assert_no_error (error);
  g_assert_cmpuint (plan->len, ==, 0);
}

/* A new stack in any order: created dependencies first, then started. */
static void
test_new_stack_order (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) plan
      = plan_for ("{\"version\": 1, \"devices\": ["
                  " {\"name\": \"top\", \"driver\": \"linear\", \"components\": [\"vblk:w\"],"
                  "  \"exports\": [\"nbd unix:/run/top.sock\"]},"
                  " {\"name\": \"w\", \"driver\": \"window\", \"components\": [\"vblk:m\"],"
                  "  \"attributes\": {\"offset\": \"1M\", \"size\": 8388608}},"
                  " {\"name\": \"m\", \"driver\": \"raid1\", \"components\": [\"/x\", \"/y\"]},"
                  " {\"name\": \"r1\", \"driver\": \"raid1\","
                  "  \"components\": [\"/a\", \"/b\", {\"source\": \"/s\", \"role\": \"spare\"}]},"
                  " {\"name\": \"l\", \"driver\": \"linear\", \"components\": [\"vblk:r1\"]}]}",
                  FALSE, &error);
  g_autofree char *text = NULL;
  VbApplyStep *w;

  g_assert_no_error (error);
  text = plan_text (plan);
  g_assert_cmpstr (text, ==,
                   "create:m create:w create:top start:m start:w start:top "
                   "export:top:unix:/run/top.sock");
  w = plan->pdata[1];
  g_assert_cmpstr (g_hash_table_lookup (w->config->attributes, "size"), ==, "8388608");
  g_assert_cmpstr (g_hash_table_lookup (w->config->attributes, "offset"), ==, "1048576");
}

/* A leg added to the started raid1 is a reconfiguration; a spare
 * dropped is a remove; the spec's stop of l and r1 stops dependents first. */
static void
test_changes (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) plan
      = plan_for ("{\"version\": 1, \"devices\": ["
                  " {\"name\": \"r1\", \"driver\": \"raid1\", \"components\": [\"/a\", \"/b\", "
                  "\"/c\"]},"
                  " {\"name\": \"l\", \"driver\": \"linear\", \"components\": [\"vblk:r1\"],"
                  "  \"autostart\": false}]}",
                  FALSE, &error);
  g_autofree char *text = NULL;
  VbApplyStep *reconfigure;

  g_assert_no_error (error);
  text = plan_text (plan);
  g_assert_cmpstr (text, ==, "remove:r1:/s reconfigure:r1 set:l");
  reconfigure = plan->pdata[1];
  g_assert_cmpstr (reconfigure->add[0], ==, "/c");
  g_assert_null (reconfigure->add[1]);
  g_assert_null (reconfigure->remove);
  g_assert_null (reconfigure->driver);
  g_assert_cmpint (((VbApplyStep *) plan->pdata[2])->autostart, ==, 0);

  g_clear_pointer (&plan, g_ptr_array_unref);
  plan = plan_for ("{\"version\": 1, \"devices\": ["
                   " {\"name\": \"r1\", \"driver\": \"raid1\", \"components\": [\"/a\", \"/b\", "
                   "{\"source\": \"/s\", \"role\": \"spare\"}], \"started\": false},"
                   " {\"name\": \"l\", \"driver\": \"linear\", \"components\": [\"vblk:r1\"],"
                   "  \"started\": false}]}",
                   FALSE, &error);
  g_assert_no_error (error);
  g_free (text);
  text = plan_text (plan);
  g_assert_cmpstr (text, ==, "stop:l stop:r1");
}

/* A device left out: refused without prune, deleted (dependents first)
 * with it. */
static void
test_prune (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) plan = plan_for ("{\"version\": 1, \"devices\": []}", FALSE, &error);
  g_autofree char *text = NULL;

  g_assert_error (error, VB_ERROR, VB_ERROR_WOULD_LOSE_DATA);
  g_assert_null (plan);
  g_assert_nonnull (strstr (error->message, "delete:l"));
  g_assert_nonnull (strstr (error->message, "delete:r1"));
  g_clear_error (&error);
  plan = plan_for ("{\"version\": 1}", TRUE, &error);
  g_assert_no_error (error);
  text = plan_text (plan);
  g_assert_cmpstr (text, ==, "delete:l delete:r1");
  g_assert_true (((VbApplyStep *) plan->pdata[0])->loses_data);
}

/* A window shrunk loses data unless confirmed by the step's id. */
static void
test_shrink_confirmed (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VbState) current = current_state ();
  g_autoptr (VbState) grown = NULL, spec = NULL;
  g_autoptr (GPtrArray) plan = NULL;
  const char *const confirm[] = { "set:w", NULL };
  VbApplyOptions options = { 0 };
#define WITH_W(size)                                                                               \
  "{\"version\": 1, \"devices\": ["                                                                \
  " {\"name\": \"r1\", \"driver\": \"raid1\","                                                     \
  "  \"components\": [\"/a\", \"/b\", {\"source\": \"/s\", \"role\": \"spare\"}]},"                \
  " {\"name\": \"l\", \"driver\": \"linear\", \"components\": [\"vblk:r1\"]},"                     \
  " {\"name\": \"w\", \"driver\": \"window\", \"components\": [\"/big\"],"                         \
  "  \"attributes\": {\"size\": \"" size "\"}, \"started\": false}]}"
  const char *big = WITH_W ("2G");
  const char *small = WITH_W ("1G");
  VbDeviceConfig *w;

  /* the state with w at 2G */
  grown = vb_spec_from_json (big, -1, "spec", &error);
  g_assert_no_error (error);
  w = vb_device_config_copy (grown->devices->pdata[2]);
  g_free (w->uuid);
  w->uuid = g_strdup ("55555555-5555-4555-8555-555555555555");
  g_hash_table_insert (w->attributes, g_strdup ("size"), g_strdup ("2147483648"));
  g_hash_table_insert (w->attributes, g_strdup ("offset"), g_strdup ("0"));
  g_hash_table_insert (w->attributes, g_strdup ("read_only"), g_strdup ("false"));
  ((VbComponentConfig *) w->components->pdata[0])->uuid = g_strdup (UC);
  g_ptr_array_add (current->devices, w);
  {
    GHashTable *r
        = vb_driver_resolve_attributes (vb_driver_lookup ("window"), NULL, w->attributes, &error);
    g_assert_no_error (error);
    g_hash_table_unref (w->attributes);
    w->attributes = r;
  }

  spec = vb_spec_from_json (small, -1, "spec", &error);
  g_assert_no_error (error);
  plan = vb_apply_plan (current, spec, &options, &error);
  g_assert_error (error, VB_ERROR, VB_ERROR_WOULD_LOSE_DATA);
  g_assert_nonnull (strstr (error->message, "set:w"));
  g_clear_error (&error);
  options.confirm = confirm;
  plan = vb_apply_plan (current, spec, &options, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (plan->len, ==, 1);
  g_assert_true (((VbApplyStep *) plan->pdata[0])->loses_data);
}

/* A device pruned goes before a stop of the device it runs on (which
 * would be refused while it is a user). */
static void
test_delete_before_stop (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) plan = plan_for (
      "{\"version\": 1, \"devices\": ["
      " {\"name\": \"r1\", \"driver\": \"raid1\", \"started\": false,"
      "  \"components\": [\"/a\", \"/b\", {\"source\": \"/s\", \"role\": \"spare\"}]}]}",
      TRUE, &error);
  g_autofree char *text = NULL;

  g_assert_no_error (error);
  text = plan_text (plan);
  g_assert_cmpstr (text, ==, "delete:l stop:r1");
}

/* A window's size from 0 ("to the end") to any other, or its offset
 * moved, loses what the device shows. */
static void
test_window_losses (void)
{
  static const char *const changes[] = { "\"size\": \"1G\"", "\"offset\": \"1M\"" };

  for (guint i = 0; i < G_N_ELEMENTS (changes); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (VbState) current = current_state ();
      g_autoptr (VbState) spec = NULL;
      g_autoptr (GPtrArray) plan = NULL;
      g_autofree char *json = NULL;
      VbApplyOptions options = { .prune = TRUE };
      VbDeviceConfig *w
          = vb_device_config_new ("w", "55555555-5555-4555-8555-555555555555", "window", NULL);
      GHashTable *resolved;

      g_ptr_array_add (w->components, vb_component_config_new ("/big", "0", UC));
      resolved
          = vb_driver_resolve_attributes (vb_driver_lookup ("window"), NULL, w->attributes, &error);
      g_assert_no_error (error);
      g_hash_table_unref (w->attributes);
      w->attributes = resolved;
      g_ptr_array_set_size (current->devices, 0);
      vb_state_reindex (current);
      g_ptr_array_add (current->devices, w);
      json = g_strdup_printf ("{\"version\": 1, \"devices\": [{\"name\": \"w\", \"driver\": "
                              "\"window\", \"components\": [\"/big\"], \"started\": false, "
                              "\"attributes\": {%s}}]}",
                              changes[i]);
      spec = vb_spec_from_json (json, -1, "spec", &error);
      g_assert_no_error (error);
      plan = vb_apply_plan (current, spec, &options, &error);
      g_test_message ("%s: %s", changes[i], error ? error->message : "(accepted)");
      g_assert_error (error, VB_ERROR, VB_ERROR_WOULD_LOSE_DATA);
    }
}

/* Bad specs: each refused naming its JSON path. */
static void
test_bad_specs (void)
{
  static const struct {
    const char *json;
    const char *message;
  } cases[] = {
    { "{\"version\": 1, \"devices\": [", "spec:1:" },
    { "{\"version\": 1, \"devices\": [{\"name\": \"x\", \"driver\": \"raid1\", \"colour\": 1}]}",
      "spec: devices[0]: unknown key 'colour'" },
    { "{\"version\": 1, \"devices\": [{\"name\": \"x\", \"driver\": \"raid7\"}]}",
      "devices[0]: driver: 'raid7' is not a driver" },
    { "{\"version\": 1, \"devices\": [{\"name\": \"x\", \"driver\": \"window\","
      " \"components\": [\"/a\"], \"attributes\": {\"size\": \"12Q\"}}]}",
      "devices[0]: attributes: attribute 'size'" },
    { "{\"version\": 1, \"devices\": [{\"name\": \"x\", \"driver\": \"window\","
      " \"components\": [\"/a\"], \"attributes\": {\"size\": [1]}}]}",
      "spec: devices[0].attributes.size: expected a string, a number or a boolean" },
    { "{\"version\": 1, \"devices\": ["
      " {\"name\": \"x\", \"driver\": \"linear\", \"components\": [\"vblk:y\"]},"
      " {\"name\": \"y\", \"driver\": \"linear\", \"components\": [\"vblk:x\"]}]}",
      "devices: dependency cycle" },
    { "{\"version\": 1, \"devices\": ["
      " {\"name\": \"x\", \"driver\": \"linear\", \"components\": [\"/a\"]},"
      " {\"name\": \"y\", \"driver\": \"raid1\", \"components\": [\"/b\", \"/a\"]}]}",
      "devices[1].components[1]: source: '/a' is a component of two devices (also "
      "devices[0].components[0])" },
    { "{\"version\": 1, \"devices\": ["
      " {\"name\": \"x\", \"driver\": \"linear\", \"components\": [\"vblk:nothere\"]}]}",
      "devices[0].components[0]: source: vblk:nothere names no device of the spec" },
    { "{\"version\": 1, \"devices\": [{\"name\": \"x\", \"driver\": \"raid1\","
      " \"components\": [{\"source\": \"/s\", \"role\": \"spare\"}, \"/a\"]}]}",
      "spec: devices[0].components[1]: a slot after a spare" },
    { "{\"version\": 1, \"devices\": [{\"name\": \"x\", \"driver\": \"raid1\","
      " \"components\": [{\"source\": \"/a\", \"role\": \"1\"}]}]}",
      "spec: devices[0].components[0].role: slot 1 listed as slot 0" },
    { "{\"version\": 1, \"devices\": [{\"name\": \"r1\", \"driver\": \"raid1\","
      " \"uuid\": \"" U2 "\", \"components\": [\"/a\", \"/b\"]}]}",
      "devices[0].uuid: device 'r1' has UUID " U1 }, /* then not a prune: no l */
    { "{\"version\": 1, \"devices\": ["
      " {\"name\": \"r1\", \"driver\": \"raid1\", \"components\": [\"/a\", \"/b\"],"
      "  \"started\": false},"
      " {\"name\": \"l\", \"driver\": \"linear\", \"components\": [\"vblk:r1\"]}]}",
      "devices[1].started: 'l' runs on 'r1', which the spec has stopped" },
    { "{\"version\": 1, \"devices\": ["
      " {\"name\": \"r1\", \"driver\": \"raid0\", \"components\": [\"/a\", \"/b\"]},"
      " {\"name\": \"l\", \"driver\": \"linear\", \"components\": [\"vblk:r1\"]}]}",
      "devices[0]: " },
    { "{\"version\": 1, \"devices\": [{\"name\": \"x\", \"driver\": \"linear\","
      " \"components\": [\"/a\"], \"exports\": [\"ftp x\"]}]}",
      "devices[0]: exports[0]: export 'ftp x': only 'nbd ADDRESS' is known" },
    { "{\"version\": 1, \"devices\": [{\"name\": \"x\", \"driver\": \"linear\","
      " \"components\": [\"/a\"], \"exports\": [\"nbd tcp:h:1\"]}]}",
      "devices[0]: exports[0]: 'nbd tcp:h:1': TLS is required on TCP: give tls=require with "
      "tls-psk=FILE or tls-certs=DIR, or tls=off for plaintext" },
    { "{\"version\": 1, \"devices\": [{\"name\": \"x\", \"driver\": \"linear\","
      " \"components\": [\"/a\"], \"exports\": [\"nbd tcp:h:1 tls=require\"]}]}",
      "devices[0]: exports[0]: export 'nbd tcp:h:1 tls=require': tls=require needs credentials" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (GPtrArray) plan = plan_for (cases[i].json, TRUE, &error);

      g_test_message ("case %u: %s", i, error ? error->message : "(accepted)");
      g_assert_null (plan);
      g_assert_nonnull (error);
      g_assert_true (error->domain == VB_ERROR);
      g_assert_nonnull (strstr (error->message, cases[i].message));
    }
}

/* Exports with TLS: a plaintext TCP export of a state of before TLS is
 * the spec's tls=off one (no step); a new one carries its settings. */
static void
test_exports_tls (void)
{
  g_autoptr (VbState) current = current_state ();
  g_autoptr (GError) error = NULL;
  g_autoptr (VbState) spec = NULL;
  g_autoptr (GPtrArray) plan = NULL;
  g_autofree char *text = NULL;
  VbApplyOptions options = { 0 };
  VbApplyStep *step;

  g_ptr_array_add (((VbDeviceConfig *) current->devices->pdata[1])->exports,
                   g_strdup ("nbd tcp:h:1"));
  spec = vb_spec_from_json (
      "{\"version\": 1, \"devices\": ["
      " {\"name\": \"r1\", \"driver\": \"raid1\","
      "  \"components\": [\"/a\", \"/b\", {\"source\": \"/s\", \"role\": \"spare\"}]},"
      " {\"name\": \"l\", \"driver\": \"linear\", \"components\": [\"vblk:r1\"],"
      "  \"exports\": [\"nbd tcp:h:1 tls=off\", \"nbd tcp:h:2 tls-psk=/etc/k.psk\"]}]}",
      -1, "spec", &error);
  g_assert_no_error (error);
  plan = vb_apply_plan (current, spec, &options, &error);
  g_assert_no_error (error);
  text = plan_text (plan);
  g_assert_cmpstr (text, ==, "export:l:tcp:h:2");
  step = plan->pdata[0];
  g_assert_cmpstr (step->export, ==, "nbd tcp:h:2 tls=require tls-psk=/etc/k.psk");

  /* an export dropped keeps its settings for the undo of its step */
  g_ptr_array_add (((VbDeviceConfig *) current->devices->pdata[1])->exports,
                   g_strdup ("nbd unix:/run/l.sock tls=require tls-certs=/etc/c"));
  g_clear_pointer (&plan, g_ptr_array_unref);
  g_ptr_array_remove_index (((VbDeviceConfig *) spec->devices->pdata[1])->exports, 1);
  plan = vb_apply_plan (current, spec, &options, &error);
  g_assert_no_error (error);
  g_clear_pointer (&text, g_free);
  text = plan_text (plan);
  g_assert_cmpstr (text, ==, "unexport:l:unix:/run/l.sock");
  step = plan->pdata[0];
  g_assert_cmpstr (step->export, ==, "nbd unix:/run/l.sock tls=require tls-certs=/etc/c");
}

/* A state saved before TLS ("nbd tcp:H:P") dumped as a spec applies as
 * nothing to do: it is kept, and dumped, as "nbd tcp:H:P tls=off". */
static void
test_old_export_round_trip (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (VbState) old = state_as_kept (
      "{\"version\": 1, \"devices\": [{\"name\": \"l\", \"uuid\": \"" U2 "\","
      " \"driver\": \"linear\", \"attributes\": {},"
      " \"components\": [{\"source\": \"/a\", \"role\": \"0\", \"uuid\": \"" UD "\"}],"
      " \"exports\": [\"nbd tcp:h:1\"], \"started\": true}]}");
  g_autofree char *json = NULL;
  g_autoptr (VbState) spec = NULL;
  g_autoptr (GPtrArray) plan = NULL;
  VbApplyOptions options = { 0 };

  g_assert_no_error (error);
  g_assert_cmpstr (((VbDeviceConfig *) old->devices->pdata[0])->exports->pdata[0], ==,
                   "nbd tcp:h:1 tls=off");
  json = vb_spec_to_json (old);
  spec = vb_spec_from_json (json, -1, "spec", &error);
  g_assert_no_error (error);
  plan = vb_apply_plan (old, spec, &options, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (plan->len, ==, 0);
}

/* The plan as JSON names each step's action, device and arguments. */
static void
test_json (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) plan
      = plan_for ("{\"version\": 1, \"devices\": ["
                  " {\"name\": \"r1\", \"driver\": \"raid1\", \"components\": [\"/a\", \"/b\", "
                  "\"/c\"]},"
                  " {\"name\": \"l\", \"driver\": \"linear\", \"components\": [\"vblk:r1\"]}]}",
                  FALSE, &error);
  const char *const status[] = { "done", "failed" };
  g_autofree char *json = NULL;

  g_assert_no_error (error);
  json = vb_apply_plan_to_json (plan, status);
  g_assert_nonnull (strstr (json, "\"action\" : \"reconfigure\""));
  g_assert_nonnull (strstr (json, "\"add\" : [\n        \"/c\""));
  g_assert_nonnull (strstr (json, "\"status\" : \"failed\""));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/apply/same-is-empty", test_same_is_empty);
  g_test_add_func ("/apply/short-form-is-empty", test_short_form_is_empty);
  g_test_add_func ("/apply/new-stack-order", test_new_stack_order);
  g_test_add_func ("/apply/changes", test_changes);
  g_test_add_func ("/apply/prune", test_prune);
  g_test_add_func ("/apply/shrink-confirmed", test_shrink_confirmed);
  g_test_add_func ("/apply/delete-before-stop", test_delete_before_stop);
  g_test_add_func ("/apply/window-losses", test_window_losses);
  g_test_add_func ("/apply/bad-specs", test_bad_specs);
  g_test_add_func ("/apply/exports-tls", test_exports_tls);
  g_test_add_func ("/apply/old-export-round-trip", test_old_export_round_trip);
  g_test_add_func ("/apply/json", test_json);
  return g_test_run ();
}
