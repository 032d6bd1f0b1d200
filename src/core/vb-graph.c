/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The dependency graph between devices (see vb-graph.h). Every walk visits
 * names in sorted order, so that orders, cycles and renderings are the same
 * on every run for the same state. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-graph.h"

#include <string.h>

#include "vb-error.h"

typedef struct {
  char *name;
  gboolean exists;       /* a device of the state, not only referenced */
  GPtrArray *components; /* char* (names owned by their nodes), sorted */
  GPtrArray *dependents; /* char*, sorted */
} VbGraphNode;

struct _VbGraph {
  GHashTable *nodes; /* name -> VbGraphNode* */
  GPtrArray *names;  /* every node's name, sorted */
};

static void
node_free (VbGraphNode *node)
{
  g_ptr_array_unref (node->components);
  g_ptr_array_unref (node->dependents);
  g_free (node->name);
  g_free (node);
}

static VbGraphNode *
node_get (VbGraph *graph, const char *name)
{
  VbGraphNode *node = g_hash_table_lookup (graph->nodes, name);

  if (node == NULL)
    {
      node = g_new0 (VbGraphNode, 1);
      node->name = g_strdup (name);
      node->components = g_ptr_array_new ();
      node->dependents = g_ptr_array_new ();
      g_hash_table_insert (graph->nodes, node->name, node);
      g_ptr_array_add (graph->names, node->name);
    }
  return node;
}

static const VbGraphNode *
node_lookup (const VbGraph *graph, const char *name)
{
  return g_hash_table_lookup (graph->nodes, name);
}

/* For g_ptr_array_sort, which passes pointers to the elements. */
static gint
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

static void
add_edge (VbGraph *graph, const char *dependent, const char *component)
{
  VbGraphNode *from = node_get (graph, dependent);
  VbGraphNode *to = node_get (graph, component);

  for (guint i = 0; i < from->components->len; i++)
    if (from->components->pdata[i] == to->name)
      return;
  g_ptr_array_add (from->components, to->name);
  g_ptr_array_add (to->dependents, from->name);
}

VbGraph *
vb_graph_new (const VbState *state)
{
  VbGraph *graph;
  GHashTableIter iter;
  gpointer value;

  g_return_val_if_fail (state != NULL, NULL);

  graph = g_new0 (VbGraph, 1);
  graph->nodes = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) node_free);
  graph->names = g_ptr_array_new ();

  for (guint i = 0; i < state->devices->len; i++)
    {
      const VbDeviceConfig *d = state->devices->pdata[i];

      node_get (graph, d->name)->exists = TRUE;
      for (guint j = 0; j < d->components->len; j++)
        {
          const VbComponentConfig *c = d->components->pdata[j];

          if (g_str_has_prefix (c->source, VB_DEVICE_SOURCE_PREFIX))
            add_edge (graph, d->name, c->source + strlen (VB_DEVICE_SOURCE_PREFIX));
        }
    }

  g_ptr_array_sort (graph->names, compare_names);
  g_hash_table_iter_init (&iter, graph->nodes);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      VbGraphNode *node = value;

      g_ptr_array_sort (node->components, compare_names);
      g_ptr_array_sort (node->dependents, compare_names);
    }
  return graph;
}

void
vb_graph_free (VbGraph *graph)
{
  if (graph == NULL)
    return;
  g_hash_table_unref (graph->nodes);
  g_ptr_array_unref (graph->names);
  g_free (graph);
}

/* ------------------------------------------------------------------ */
/* Check                                                                */

typedef enum { WHITE, GREY, BLACK } Colour;

/* Depth-first search along component edges; on the first edge back to a
 * node on the current path, leaves that path's cycle in @cycle. */
static gboolean
find_cycle (const VbGraph *graph, const VbGraphNode *node, GHashTable *colour, GPtrArray *path,
            GPtrArray *cycle)
{
  g_hash_table_insert (colour, node->name, GINT_TO_POINTER (GREY));
  g_ptr_array_add (path, node->name);
  for (guint i = 0; i < node->components->len; i++)
    {
      const char *next = node->components->pdata[i];
      Colour c = GPOINTER_TO_INT (g_hash_table_lookup (colour, next));

      if (c == GREY)
        {
          guint start = 0;

          while (path->pdata[start] != next)
            start++;
          for (guint j = start; j < path->len; j++)
            g_ptr_array_add (cycle, path->pdata[j]);
          return TRUE;
        }
      if (c == WHITE && find_cycle (graph, node_lookup (graph, next), colour, path, cycle))
        return TRUE;
    }
  g_ptr_array_remove_index (path, path->len - 1);
  g_hash_table_insert (colour, node->name, GINT_TO_POINTER (BLACK));
  return FALSE;
}

/* "a -> b -> a", starting from the smallest name of the cycle. */
static char *
cycle_to_string (GPtrArray *cycle)
{
  GString *s = g_string_new (NULL);
  guint first = 0;

  for (guint i = 1; i < cycle->len; i++)
    if (strcmp (cycle->pdata[i], cycle->pdata[first]) < 0)
      first = i;
  for (guint i = 0; i < cycle->len; i++)
    {
      g_string_append (s, cycle->pdata[(first + i) % cycle->len]);
      g_string_append (s, " -> ");
    }
  g_string_append (s, cycle->pdata[first]);
  return g_string_free (s, FALSE);
}

VbGraph *
vb_graph_new_above (const VbState *state, const char *name)
{
  g_autoptr (GHashTable) users
      = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify) g_ptr_array_unref);
  g_autoptr (GHashTable) above = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GPtrArray) todo = g_ptr_array_new ();
  VbState some = { .devices = g_ptr_array_new () };
  VbGraph *graph;

  /* who is built on whom, from one pass that reads only the sources */
  for (guint i = 0; i < state->devices->len; i++)
    {
      const VbDeviceConfig *d = state->devices->pdata[i];
      for (guint j = 0; j < d->components->len; j++)
        {
          const char *below = vb_device_source_name (
              ((const VbComponentConfig *) d->components->pdata[j])->source);
          GPtrArray *list;

          if (below == NULL)
            continue;
          if ((list = g_hash_table_lookup (users, below)) == NULL)
            g_hash_table_insert (users, (gpointer) below, list = g_ptr_array_new ());
          g_ptr_array_add (list, d->name);
        }
    }
  g_ptr_array_add (todo, (gpointer) name);
  for (guint i = 0; i < todo->len; i++)
    {
      GPtrArray *list;
      if (!g_hash_table_add (above, todo->pdata[i]))
        continue;
      if ((list = g_hash_table_lookup (users, todo->pdata[i])) != NULL)
        g_ptr_array_extend (todo, list, NULL, NULL);
    }
  for (guint i = 0; i < state->devices->len; i++)
    {
      const VbDeviceConfig *d = state->devices->pdata[i];
      if (g_hash_table_contains (above, d->name))
        g_ptr_array_add (some.devices, (gpointer) d);
    }
  graph = vb_graph_new (&some);
  vb_state_reindex (&some); /* its index, if a lookup built one */
  g_ptr_array_unref (some.devices);
  return graph;
}

VbGraph *
vb_graph_new_below (const VbState *state, const char *name)
{
  VbState below = { .devices = g_ptr_array_new () };
  g_autoptr (GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GPtrArray) todo = g_ptr_array_new ();
  VbGraph *graph;

  g_ptr_array_add (todo, (gpointer) name);
  for (guint i = 0; i < todo->len; i++)
    {
      const VbDeviceConfig *d = vb_state_lookup (state, todo->pdata[i]);

      if (d == NULL || !g_hash_table_add (seen, d->name))
        continue;
      g_ptr_array_add (below.devices, (gpointer) d);
      for (guint j = 0; j < d->components->len; j++)
        {
          const char *source = ((const VbComponentConfig *) d->components->pdata[j])->source;
          if (g_str_has_prefix (source, VB_DEVICE_SOURCE_PREFIX))
            g_ptr_array_add (todo, (gpointer) (source + strlen (VB_DEVICE_SOURCE_PREFIX)));
        }
    }
  graph = vb_graph_new (&below);
  vb_state_reindex (&below); /* its index, if a lookup built one */
  g_ptr_array_unref (below.devices);
  return graph;
}

gboolean
vb_graph_check (const VbGraph *graph, GError **error)
{
  g_autoptr (GHashTable) colour = NULL;
  g_autoptr (GPtrArray) path = NULL;
  g_autoptr (GPtrArray) cycle = NULL;

  g_return_val_if_fail (graph != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  for (guint i = 0; i < graph->names->len; i++)
    {
      const VbGraphNode *node = node_lookup (graph, graph->names->pdata[i]);

      if (!node->exists)
        continue;
      for (guint j = 0; j < node->components->len; j++)
        {
          const char *component = node->components->pdata[j];

          if (!node_lookup (graph, component)->exists)
            {
              g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND,
                           _ ("device '%s' uses vblk:%s, which does not exist"), node->name,
                           component);
              return FALSE;
            }
        }
    }

  colour = g_hash_table_new (g_str_hash, g_str_equal);
  path = g_ptr_array_new ();
  cycle = g_ptr_array_new ();
  for (guint i = 0; i < graph->names->len; i++)
    {
      const char *name = graph->names->pdata[i];

      if (g_hash_table_contains (colour, name))
        continue;
      if (find_cycle (graph, node_lookup (graph, name), colour, path, cycle))
        {
          g_autofree char *text = cycle_to_string (cycle);

          g_set_error (error, VB_ERROR, VB_ERROR_DEPENDENCY_CYCLE, _ ("dependency cycle: %s"),
                       text);
          return FALSE;
        }
    }
  return TRUE;
}

/* ------------------------------------------------------------------ */
/* Neighbours and orders                                                */

static char **
strv_from_names (GPtrArray *names)
{
  char **strv = g_new0 (char *, names->len + 1);

  for (guint i = 0; i < names->len; i++)
    strv[i] = g_strdup (names->pdata[i]);
  return strv;
}

char **
vb_graph_components_of (const VbGraph *graph, const char *name)
{
  const VbGraphNode *node;

  g_return_val_if_fail (graph != NULL, NULL);
  g_return_val_if_fail (name != NULL, NULL);

  node = node_lookup (graph, name);
  return node ? strv_from_names (node->components) : g_new0 (char *, 1);
}

char **
vb_graph_dependents_of (const VbGraph *graph, const char *name)
{
  const VbGraphNode *node;

  g_return_val_if_fail (graph != NULL, NULL);
  g_return_val_if_fail (name != NULL, NULL);

  node = node_lookup (graph, name);
  return node ? strv_from_names (node->dependents) : g_new0 (char *, 1);
}

static GPtrArray *
edges_of (const VbGraphNode *node, gboolean towards_components)
{
  return towards_components ? node->components : node->dependents;
}

static void
collect_reachable (const VbGraph *graph, const VbGraphNode *node, gboolean towards_components,
                   GHashTable *reached)
{
  GPtrArray *next = edges_of (node, towards_components);

  if (!g_hash_table_add (reached, node->name))
    return;
  for (guint i = 0; i < next->len; i++)
    collect_reachable (graph, node_lookup (graph, next->pdata[i]), towards_components, reached);
}

/* Every node reachable from @name (following components, or dependents),
 * each after all the nodes it leads to; the smallest ready name first.
 * Since @name reaches every other node, it comes last. A cycle (which
 * vb_graph_check refuses) is broken at its smallest name rather than
 * leaving nodes out. */
static char **
order_from (const VbGraph *graph, const char *name, gboolean towards_components)
{
  const VbGraphNode *start = node_lookup (graph, name);
  g_autoptr (GHashTable) reached = NULL;
  g_autoptr (GHashTable) done = NULL;
  g_autoptr (GPtrArray) order = NULL;

  if (start == NULL)
    {
      char **strv = g_new0 (char *, 2);
      strv[0] = g_strdup (name);
      return strv;
    }

  reached = g_hash_table_new (g_str_hash, g_str_equal);
  collect_reachable (graph, start, towards_components, reached);
  done = g_hash_table_new (g_str_hash, g_str_equal);
  order = g_ptr_array_new ();

  while (order->len < g_hash_table_size (reached))
    {
      const char *pick = NULL;
      const char *fallback = NULL;

      for (guint i = 0; i < graph->names->len && pick == NULL; i++)
        {
          const char *candidate = graph->names->pdata[i];
          GPtrArray *needs;
          gboolean ready = TRUE;

          if (!g_hash_table_contains (reached, candidate)
              || g_hash_table_contains (done, candidate))
            continue;
          if (fallback == NULL)
            fallback = candidate;
          needs = edges_of (node_lookup (graph, candidate), towards_components);
          for (guint j = 0; j < needs->len && ready; j++)
            if (!g_hash_table_contains (done, needs->pdata[j]))
              ready = FALSE;
          if (ready)
            pick = candidate;
        }
      if (pick == NULL)
        pick = fallback;
      g_hash_table_add (done, (gpointer) pick);
      g_ptr_array_add (order, (gpointer) pick);
    }
  return strv_from_names (order);
}

char **
vb_graph_start_order (const VbGraph *graph, const char *name)
{
  g_return_val_if_fail (graph != NULL, NULL);
  g_return_val_if_fail (name != NULL, NULL);

  return order_from (graph, name, TRUE);
}

char **
vb_graph_stop_order (const VbGraph *graph, const char *name)
{
  g_return_val_if_fail (graph != NULL, NULL);
  g_return_val_if_fail (name != NULL, NULL);

  return order_from (graph, name, FALSE);
}

/* ------------------------------------------------------------------ */
/* Rendering                                                            */

/* The components of @node as tree lines, two spaces deeper per level.
 * @path holds the names above, so that a cycle is shown once, not followed. */
static void
text_children (const VbGraph *graph, const VbGraphNode *node, guint depth, GHashTable *path,
               GHashTable *printed, GString *out)
{
  g_hash_table_add (path, node->name);
  for (guint i = 0; i < node->components->len; i++)
    {
      const VbGraphNode *child = node_lookup (graph, node->components->pdata[i]);
      gboolean last = i + 1 == node->components->len;
      gboolean loops = g_hash_table_contains (path, child->name);

      for (guint d = 0; d < depth; d++)
        g_string_append (out, "  ");
      g_string_append (out, last ? "└─ " : "├─ ");
      g_string_append (out, child->name);
      g_string_append (out, loops ? " (cycle)\n" : "\n");
      g_hash_table_add (printed, child->name);
      if (!loops)
        text_children (graph, child, depth + 1, path, printed, out);
    }
  g_hash_table_remove (path, node->name);
}

static void
text_tree (const VbGraph *graph, const VbGraphNode *root, GHashTable *printed, GString *out)
{
  g_autoptr (GHashTable) path = g_hash_table_new (g_str_hash, g_str_equal);

  g_string_append (out, root->name);
  g_string_append_c (out, '\n');
  g_hash_table_add (printed, root->name);
  text_children (graph, root, 1, path, printed, out);
}

char *
vb_graph_to_text (const VbGraph *graph)
{
  g_autoptr (GHashTable) printed = NULL;
  GString *out;

  g_return_val_if_fail (graph != NULL, NULL);

  out = g_string_new (NULL);
  printed = g_hash_table_new (g_str_hash, g_str_equal);
  for (guint i = 0; i < graph->names->len; i++)
    {
      const VbGraphNode *node = node_lookup (graph, graph->names->pdata[i]);

      if (node->dependents->len == 0)
        text_tree (graph, node, printed, out);
    }
  /* Devices of a cycle that nothing else is built on have no root above
   * them; show them rather than hide them. */
  for (guint i = 0; i < graph->names->len; i++)
    {
      const VbGraphNode *node = node_lookup (graph, graph->names->pdata[i]);

      if (!g_hash_table_contains (printed, node->name))
        text_tree (graph, node, printed, out);
    }
  return g_string_free (out, FALSE);
}

static void
dot_quoted (GString *out, const char *name)
{
  g_string_append_c (out, '"');
  for (const char *p = name; *p; p++)
    {
      if (*p == '"' || *p == '\\')
        g_string_append_c (out, '\\');
      g_string_append_c (out, *p);
    }
  g_string_append_c (out, '"');
}

char *
vb_graph_to_dot (const VbGraph *graph)
{
  GString *out;

  g_return_val_if_fail (graph != NULL, NULL);

  out = g_string_new ("digraph vblk {\n");
  for (guint i = 0; i < graph->names->len; i++)
    {
      g_string_append (out, "  ");
      dot_quoted (out, graph->names->pdata[i]);
      g_string_append (out, ";\n");
    }
  for (guint i = 0; i < graph->names->len; i++)
    {
      const VbGraphNode *node = node_lookup (graph, graph->names->pdata[i]);

      for (guint j = 0; j < node->components->len; j++)
        {
          g_string_append (out, "  ");
          dot_quoted (out, node->name);
          g_string_append (out, " -> ");
          dot_quoted (out, node->components->pdata[j]);
          g_string_append (out, ";\n");
        }
    }
  g_string_append (out, "}\n");
  return g_string_free (out, FALSE);
}
