/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The plan: what runs vs what is desired, in graph order; applying what
 * already holds is an empty plan. */
#include "config.h"

#include "vb-plan.h"

static VbDeviceConfig *
device (VbState *state, const char *name, const char *uuid, const char *source, gboolean started)
{
  VbDeviceConfig *d = vb_device_config_new (name, uuid, "window", "auto");

  g_ptr_array_add (d->components,
                   vb_component_config_new (source, "0", "00000000-0000-4000-8000-000000000000"));
  d->started = started;
  g_ptr_array_add (state->devices, d);
  return d;
}

static GHashTable *
running_new (void)
{
  return g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) vb_running_free);
}

static void
run (GHashTable *running, const VbDeviceConfig *d, const char *node)
{
  g_hash_table_insert (running, g_strdup (d->uuid), vb_running_new (node, "loop", d->attributes));
}

static char *
describe (GPtrArray *plan)
{
  static const char *const kinds[] = { "stop", "update", "start" };
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < plan->len; i++)
    {
      const VbStep *step = plan->pdata[i];
      g_string_append_printf (s, "%s%s %s", i ? ", " : "", kinds[step->kind],
                              step->name ? step->name : step->block_device);
    }
  return g_string_free (s, FALSE);
}

#define U1 "11111111-1111-4111-8111-111111111111"
#define U2 "22222222-2222-4222-8222-222222222222"
#define U3 "33333333-3333-4333-8333-333333333333"
#define U9 "99999999-9999-4999-8999-999999999999"

static void
test_start_order (void)
{
  g_autoptr (VbState) state = vb_state_new ();
  g_autoptr (GHashTable) running = running_new ();
  g_autoptr (GPtrArray) plan = NULL;
  g_autofree char *text = NULL;

  /* top is built on mid, mid on base; listed out of order on purpose */
  device (state, "top", U3, "vblk:mid", TRUE);
  device (state, "mid", U2, "vblk:base", FALSE);
  device (state, "base", U1, "/img", FALSE);
  plan = vb_plan_compute (NULL, state, running);
  text = describe (plan);
  g_assert_cmpstr (text, ==, "start base, start mid, start top");
}

static void
test_idempotent (void)
{
  g_autoptr (VbState) state = vb_state_new ();
  g_autoptr (GHashTable) running = running_new ();
  g_autoptr (GPtrArray) plan = NULL;
  VbDeviceConfig *a = device (state, "a", U1, "/img", TRUE);
  device (state, "b", U2, "/img2", FALSE);

  run (running, a, "/dev/loop0");
  plan = vb_plan_compute (state, state, running);
  g_assert_cmpuint (plan->len, ==, 0);
}

static void
test_stop_order_and_orphans (void)
{
  g_autoptr (VbState) before = vb_state_new ();
  g_autoptr (VbState) after = NULL;
  g_autoptr (GHashTable) running = running_new ();
  g_autoptr (GPtrArray) plan = NULL;
  g_autofree char *text = NULL;
  VbDeviceConfig *base = device (before, "base", U1, "/img", TRUE);
  VbDeviceConfig *top = device (before, "top", U2, "vblk:base", TRUE);

  run (running, base, "/dev/loop0");
  run (running, top, "/dev/loop1");
  g_hash_table_insert (running, g_strdup (U9), vb_running_new ("/dev/loop7", "loop", NULL));

  after = vb_state_copy (before);
  vb_state_lookup_mut (after, "base")->started = FALSE;
  vb_state_lookup_mut (after, "top")->started = FALSE;
  plan = vb_plan_compute (before, after, running);
  text = describe (plan);
  /* the node nobody owns first, then dependents before what they use */
  g_assert_cmpstr (text, ==, "stop /dev/loop7, stop top, stop base");
}

static void
test_deleted_device_is_stopped (void)
{
  g_autoptr (VbState) before = vb_state_new ();
  g_autoptr (VbState) after = NULL;
  g_autoptr (GHashTable) running = running_new ();
  g_autoptr (GPtrArray) plan = NULL;
  VbDeviceConfig *a = device (before, "a", U1, "/img", TRUE);

  run (running, a, "/dev/loop0");
  after = vb_state_copy (before);
  g_ptr_array_remove_index (after->devices, 0);
  vb_state_reindex (after);
  plan = vb_plan_compute (before, after, running);
  g_assert_cmpuint (plan->len, ==, 1);
  g_assert_cmpint (((VbStep *) plan->pdata[0])->kind, ==, VB_STEP_STOP);
  g_assert_cmpstr (((VbStep *) plan->pdata[0])->name, ==, "a");
  g_assert_cmpstr (((VbStep *) plan->pdata[0])->block_device, ==, "/dev/loop0");
}

/* Stops of unrelated devices come in the state's order, whatever order
 * the running table has (plan_stops takes them from what runs, sorted,
 * not from a walk of every device) */
static void
test_stops_in_state_order (void)
{
  g_autoptr (VbState) before = vb_state_new ();
  g_autoptr (VbState) after = NULL;
  g_autoptr (GHashTable) running = running_new ();
  g_autoptr (GPtrArray) plan = NULL;
  g_autoptr (GString) want = g_string_new (NULL);
  g_autofree char *text = NULL;

  for (guint i = 0; i < 300; i++)
    {
      g_autofree char *name = g_strdup_printf ("d%u", 299 - i);
      g_autofree char *uuid = g_strdup_printf ("%08x-0000-4000-8000-000000000000", i * 7919);
      g_autofree char *img = g_strdup_printf ("/img%u", i);
      VbDeviceConfig *d = device (before, name, uuid, img, i % 3 == 0);
      if (d->started)
        {
          g_autofree char *node = g_strdup_printf ("/dev/loop%u", i);
          run (running, d, node);
        }
    }
  after = vb_state_copy (before);
  for (guint i = 0; i < 300; i += 3)
    {
      const VbDeviceConfig *d = after->devices->pdata[i];
      /* every other one stopped, every other one deleted */
      if (i % 2 == 0)
        vb_state_lookup_mut (after, d->name)->started = FALSE;
      g_string_append_printf (want, "%sstop %s", want->len ? ", " : "", d->name);
    }
  for (guint i = 300; i-- > 0;)
    if (i % 6 == 3)
      g_ptr_array_remove_index (after->devices, i);
  vb_state_reindex (after);
  plan = vb_plan_compute (before, after, running);
  text = describe (plan);
  g_assert_cmpstr (text, ==, want->str);
}

static void
test_update_when_attributes_differ (void)
{
  g_autoptr (VbState) state = vb_state_new ();
  g_autoptr (GHashTable) running = running_new ();
  g_autoptr (GPtrArray) plan = NULL;
  g_autofree char *json = NULL;
  VbDeviceConfig *a = device (state, "a", U1, "/img", TRUE);

  g_hash_table_insert (a->attributes, g_strdup ("size"), g_strdup ("1048576"));
  run (running, a, "/dev/loop0");
  g_hash_table_insert (a->attributes, g_strdup ("size"), g_strdup ("2097152"));
  plan = vb_plan_compute (state, state, running);
  g_assert_cmpuint (plan->len, ==, 1);
  g_assert_cmpint (((VbStep *) plan->pdata[0])->kind, ==, VB_STEP_UPDATE);
  json = vb_plan_to_json (plan);
  g_assert_cmpstr (json, ==,
                   "[{\"step\":\"update\",\"device\":\"a\",\"uuid\":\"" U1
                   "\",\"block_device\":\"/dev/loop0\"}]");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/plan/start-order", test_start_order);
  g_test_add_func ("/plan/idempotent", test_idempotent);
  g_test_add_func ("/plan/stop-order-and-orphans", test_stop_order_and_orphans);
  g_test_add_func ("/plan/deleted-device-is-stopped", test_deleted_device_is_stopped);
  g_test_add_func ("/plan/stops-in-state-order", test_stops_in_state_order);
  g_test_add_func ("/plan/update-when-attributes-differ", test_update_when_attributes_differ);
  return g_test_run ();
}
