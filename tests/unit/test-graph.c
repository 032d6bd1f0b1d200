/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of the dependency graph (src/core/vb-graph): edges, cycle and
 * missing-dependency checks with their messages, start and stop orders, and
 * the text and Graphviz renderings. */
#include "config.h"

#include <stdarg.h>
#include <string.h>

#include "vb-error.h"
#include "vb-graph.h"

/* Adds device @name built from the NULL-terminated component sources. */
G_GNUC_NULL_TERMINATED static void
add_device (VbState *state, const char *name, ...)
{
  g_autofree char *uuid = g_uuid_string_random ();
  VbDeviceConfig *d = vb_device_config_new (name, uuid, "linear", "auto");
  const char *source;
  va_list args;

  va_start (args, name);
  while ((source = va_arg (args, const char *)) != NULL)
    {
      g_autofree char *cuuid = g_uuid_string_random ();
      g_autofree char *role = g_strdup_printf ("%u", d->components->len);
      g_ptr_array_add (d->components, vb_component_config_new (source, role, cuuid));
    }
  va_end (args);
  g_ptr_array_add (state->devices, d);
}

static void
assert_strv (char **actual, const char *const *expected)
{
  g_autofree char *a = g_strjoinv (",", actual);
  g_autofree char *e = g_strjoinv (",", (char **) expected);

  g_assert_cmpstr (a, ==, e);
  g_strfreev (actual);
}

#define STRV(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define EMPTY ((const char *const[]){ NULL })

static void
assert_check_ok (const VbState *state)
{
  g_autoptr (VbGraph) graph = vb_graph_new (state);
  g_autoptr (GError) error = NULL;

  g_assert_true (vb_graph_check (graph, &error));
  g_assert_no_error (error);
}

static void
assert_check_fails (const VbState *state, gint code, const char *message)
{
  g_autoptr (VbGraph) graph = vb_graph_new (state);
  g_autoptr (GError) error = NULL;

  g_assert_false (vb_graph_check (graph, &error));
  g_assert_error (error, VB_ERROR, code);
  g_assert_cmpstr (error->message, ==, message);
}

/* data on left and right, both on base: the diamond. */
static VbState *
diamond (void)
{
  VbState *state = vb_state_new ();

  add_device (state, "data", "vblk:right", "vblk:left", NULL);
  add_device (state, "base", "/srv/base.img", NULL);
  add_device (state, "right", "vblk:base", NULL);
  add_device (state, "left", "vblk:base", NULL);
  return state;
}

/* c on b on a. */
static VbState *
chain (void)
{
  VbState *state = vb_state_new ();

  add_device (state, "c", "vblk:b", NULL);
  add_device (state, "a", "/dev/sdb", NULL);
  add_device (state, "b", "vblk:a", NULL);
  return state;
}

/* ------------------------------------------------------------------ */

static void
test_edges (void)
{
  g_autoptr (VbState) state = vb_state_new ();
  g_autoptr (VbGraph) graph = NULL;

  add_device (state, "b", "vblk:a", "/srv/x.img", "nbd://host/e", NULL);
  add_device (state, "c", "vblk:a", "vblk:b", NULL);
  add_device (state, "a", "/dev/sdb", "/dev/sdc", NULL);
  add_device (state, "solo", NULL);
  graph = vb_graph_new (state);

  assert_strv (vb_graph_components_of (graph, "b"), STRV ("a"));
  assert_strv (vb_graph_components_of (graph, "c"), STRV ("a", "b"));
  assert_strv (vb_graph_components_of (graph, "a"), EMPTY);
  assert_strv (vb_graph_components_of (graph, "solo"), EMPTY);
  assert_strv (vb_graph_dependents_of (graph, "a"), STRV ("b", "c"));
  assert_strv (vb_graph_dependents_of (graph, "b"), STRV ("c"));
  assert_strv (vb_graph_dependents_of (graph, "c"), EMPTY);
  assert_strv (vb_graph_components_of (graph, "unknown"), EMPTY);
  assert_strv (vb_graph_dependents_of (graph, "unknown"), EMPTY);
  g_assert_true (vb_graph_check (graph, NULL));
}

static void
test_edges_missing_kept (void)
{
  g_autoptr (VbState) state = vb_state_new ();
  g_autoptr (VbGraph) graph = NULL;

  add_device (state, "b", "vblk:ghost", NULL);
  graph = vb_graph_new (state);
  assert_strv (vb_graph_components_of (graph, "b"), STRV ("ghost"));
  assert_strv (vb_graph_dependents_of (graph, "ghost"), STRV ("b"));
}

static void
test_check_ok (void)
{
  g_autoptr (VbState) empty = vb_state_new ();
  g_autoptr (VbState) d = diamond ();
  g_autoptr (VbState) c = chain ();

  assert_check_ok (empty);
  assert_check_ok (d);
  assert_check_ok (c);
}

static void
test_cycle_of_one (void)
{
  g_autoptr (VbState) state = vb_state_new ();

  add_device (state, "a", "vblk:a", NULL);
  assert_check_fails (state, VB_ERROR_DEPENDENCY_CYCLE, "dependency cycle: a -> a");
}

static void
test_cycle_of_two (void)
{
  g_autoptr (VbState) state = vb_state_new ();
  g_autoptr (VbState) reversed = vb_state_new ();

  add_device (state, "a", "vblk:b", NULL);
  add_device (state, "b", "vblk:a", NULL);
  assert_check_fails (state, VB_ERROR_DEPENDENCY_CYCLE, "dependency cycle: a -> b -> a");

  /* Creation order does not matter: the smallest name comes first. */
  add_device (reversed, "z", "vblk:m", NULL);
  add_device (reversed, "m", "vblk:z", NULL);
  assert_check_fails (reversed, VB_ERROR_DEPENDENCY_CYCLE, "dependency cycle: m -> z -> m");
}

static void
test_cycle_of_three (void)
{
  g_autoptr (VbState) state = vb_state_new ();
  g_autoptr (VbState) entered = vb_state_new ();

  /* a uses c, c uses b, b uses a: edges followed in their direction. */
  add_device (state, "b", "vblk:a", NULL);
  add_device (state, "c", "vblk:b", NULL);
  add_device (state, "a", "vblk:c", NULL);
  assert_check_fails (state, VB_ERROR_DEPENDENCY_CYCLE, "dependency cycle: a -> c -> b -> a");

  /* Entered from outside (a uses d) at d: still starts at b, the smallest. */
  add_device (entered, "a", "vblk:d", NULL);
  add_device (entered, "c", "vblk:d", NULL);
  add_device (entered, "d", "vblk:b", NULL);
  add_device (entered, "b", "vblk:c", NULL);
  assert_check_fails (entered, VB_ERROR_DEPENDENCY_CYCLE, "dependency cycle: b -> c -> d -> b");
}

static void
test_missing_dependency (void)
{
  g_autoptr (VbState) state = vb_state_new ();

  add_device (state, "a", "/dev/sdb", NULL);
  add_device (state, "b", "vblk:a", "vblk:ghost", NULL);
  assert_check_fails (state, VB_ERROR_NOT_FOUND,
                      "device 'b' uses vblk:ghost, which does not exist");
}

static void
test_order_chain (void)
{
  g_autoptr (VbState) state = chain ();
  g_autoptr (VbGraph) graph = vb_graph_new (state);

  assert_strv (vb_graph_start_order (graph, "c"), STRV ("a", "b", "c"));
  assert_strv (vb_graph_start_order (graph, "b"), STRV ("a", "b"));
  assert_strv (vb_graph_start_order (graph, "a"), STRV ("a"));
  assert_strv (vb_graph_stop_order (graph, "a"), STRV ("c", "b", "a"));
  assert_strv (vb_graph_stop_order (graph, "b"), STRV ("c", "b"));
  assert_strv (vb_graph_stop_order (graph, "c"), STRV ("c"));
  assert_strv (vb_graph_start_order (graph, "unknown"), STRV ("unknown"));
  assert_strv (vb_graph_stop_order (graph, "unknown"), STRV ("unknown"));
}

static void
test_order_diamond (void)
{
  g_autoptr (VbState) state = diamond ();
  g_autoptr (VbGraph) graph = vb_graph_new (state);

  /* base once, before both sides; the sides in name order. */
  assert_strv (vb_graph_start_order (graph, "data"), STRV ("base", "left", "right", "data"));
  assert_strv (vb_graph_stop_order (graph, "base"), STRV ("data", "left", "right", "base"));
  assert_strv (vb_graph_start_order (graph, "left"), STRV ("base", "left"));
  assert_strv (vb_graph_stop_order (graph, "left"), STRV ("data", "left"));
  assert_strv (vb_graph_start_order (graph, "base"), STRV ("base"));
  assert_strv (vb_graph_stop_order (graph, "data"), STRV ("data"));
}

static void
test_order_ties (void)
{
  g_autoptr (VbState) state = vb_state_new ();
  g_autoptr (VbGraph) graph = NULL;

  /* top uses m1 and a2; a2 uses z. Among the ready ones, the smallest
   * name first: m1 is ready before z is, a2 only after z. */
  add_device (state, "top", "vblk:m1", "vblk:a2", NULL);
  add_device (state, "a2", "vblk:z", NULL);
  add_device (state, "m1", NULL);
  add_device (state, "z", NULL);
  graph = vb_graph_new (state);
  assert_strv (vb_graph_start_order (graph, "top"), STRV ("m1", "z", "a2", "top"));
  assert_strv (vb_graph_stop_order (graph, "z"), STRV ("top", "a2", "z"));
}

/* The graph above a device gives its stop order as the whole one does */
static void
test_order_above (void)
{
  g_autoptr (VbState) state = diamond ();
  const char *const stacked[] = { "top", "a2", "m1", "z", "alone" };

  add_device (state, "top", "vblk:m1", "vblk:a2", NULL);
  add_device (state, "a2", "vblk:z", "vblk:data", NULL);
  add_device (state, "m1", NULL);
  add_device (state, "z", NULL);
  add_device (state, "alone", "/dev/sdz", NULL);
  for (guint i = 0; i < state->devices->len + G_N_ELEMENTS (stacked); i++)
    {
      const char *name = i < state->devices->len
                             ? ((VbDeviceConfig *) state->devices->pdata[i])->name
                             : stacked[i - state->devices->len];
      g_autoptr (VbGraph) whole = vb_graph_new (state);
      g_autoptr (VbGraph) above = vb_graph_new_above (state, name);
      g_auto (GStrv) want = vb_graph_stop_order (whole, name);
      g_autofree char *joined = g_strjoinv (",", want);

      assert_strv (vb_graph_stop_order (above, name), (const char *const *) want);
      g_test_message ("%s: %s", name, joined);
    }
  {
    g_autoptr (VbGraph) above = vb_graph_new_above (state, "base");
    assert_strv (vb_graph_stop_order (above, "base"),
                 STRV ("top", "a2", "data", "left", "right", "base"));
  }
}

static void
test_text (void)
{
  g_autoptr (VbState) state = diamond ();
  g_autoptr (VbGraph) graph = NULL;
  g_autofree char *text = NULL;

  add_device (state, "solo", "/srv/solo.img", NULL);
  graph = vb_graph_new (state);
  text = vb_graph_to_text (graph);
  g_assert_cmpstr (text, ==,
                   "data\n"
                   "  ├─ left\n"
                   "    └─ base\n"
                   "  └─ right\n"
                   "    └─ base\n"
                   "solo\n");
}

static void
test_text_chain (void)
{
  g_autoptr (VbState) state = chain ();
  g_autoptr (VbGraph) graph = vb_graph_new (state);
  g_autofree char *text = vb_graph_to_text (graph);

  g_assert_cmpstr (text, ==, "c\n  └─ b\n    └─ a\n");
}

static void
test_text_edge_cases (void)
{
  g_autoptr (VbState) empty = vb_state_new ();
  g_autoptr (VbState) loop = vb_state_new ();
  g_autoptr (VbGraph) g1 = vb_graph_new (empty);
  g_autoptr (VbGraph) g2 = NULL;
  g_autofree char *t1 = vb_graph_to_text (g1);
  g_autofree char *t2 = NULL;

  g_assert_cmpstr (t1, ==, "");

  /* A cycle is shown once, not followed forever. */
  add_device (loop, "a", "vblk:a", NULL);
  g2 = vb_graph_new (loop);
  t2 = vb_graph_to_text (g2);
  g_assert_cmpstr (t2, ==, "a\n  └─ a (cycle)\n");
}

static void
test_dot (void)
{
  g_autoptr (VbState) state = diamond ();
  g_autoptr (VbState) empty = vb_state_new ();
  g_autoptr (VbGraph) graph = NULL;
  g_autoptr (VbGraph) none = vb_graph_new (empty);
  g_autofree char *dot = NULL;
  g_autofree char *dot_empty = vb_graph_to_dot (none);

  add_device (state, "solo", "/srv/solo.img", NULL);
  graph = vb_graph_new (state);
  dot = vb_graph_to_dot (graph);
  g_assert_cmpstr (dot, ==,
                   "digraph vblk {\n"
                   "  \"base\";\n"
                   "  \"data\";\n"
                   "  \"left\";\n"
                   "  \"right\";\n"
                   "  \"solo\";\n"
                   "  \"data\" -> \"left\";\n"
                   "  \"data\" -> \"right\";\n"
                   "  \"left\" -> \"base\";\n"
                   "  \"right\" -> \"base\";\n"
                   "}\n");
  g_assert_cmpstr (dot_empty, ==, "digraph vblk {\n}\n");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/graph/edges", test_edges);
  g_test_add_func ("/graph/edges-missing-kept", test_edges_missing_kept);
  g_test_add_func ("/graph/check/ok", test_check_ok);
  g_test_add_func ("/graph/check/cycle-of-1", test_cycle_of_one);
  g_test_add_func ("/graph/check/cycle-of-2", test_cycle_of_two);
  g_test_add_func ("/graph/check/cycle-of-3", test_cycle_of_three);
  g_test_add_func ("/graph/check/missing-dependency", test_missing_dependency);
  g_test_add_func ("/graph/order/chain", test_order_chain);
  g_test_add_func ("/graph/order/diamond", test_order_diamond);
  g_test_add_func ("/graph/order/ties", test_order_ties);
  g_test_add_func ("/graph/order/above", test_order_above);
  g_test_add_func ("/graph/text/diamond", test_text);
  g_test_add_func ("/graph/text/chain", test_text_chain);
  g_test_add_func ("/graph/text/edge-cases", test_text_edge_cases);
  g_test_add_func ("/graph/dot", test_dot);

  return g_test_run ();
}
