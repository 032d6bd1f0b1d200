/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The plan (see vb-plan.h): stops first (dependents before what they are
 * built on), then online updates, then starts (dependencies first). */
#include "config.h"

#include "vb-plan.h"

#include "vb-graph.h"
#include "vb-util.h"

#include <json-glib/json-glib.h>
#include <stdlib.h>
#include <string.h>

static GHashTable *
attributes_copy (GHashTable *attributes)
{
  GHashTable *copy = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  GHashTableIter iter;
  gpointer k, v;

  if (attributes)
    {
      g_hash_table_iter_init (&iter, attributes);
      while (g_hash_table_iter_next (&iter, &k, &v))
        g_hash_table_insert (copy, g_strdup (k), g_strdup (v));
    }
  return copy;
}

VbRunning *
vb_running_new (const char *block_device, const char *backend, GHashTable *attributes)
{
  VbRunning *r = g_new0 (VbRunning, 1);

  r->refs = 1;
  r->block_device = g_strdup (block_device);
  r->backend = g_strdup (backend);
  r->attributes = attributes ? attributes_copy (attributes) : NULL;
  return r;
}

VbRunning *
vb_running_copy (const VbRunning *running)
{
  VbRunning *r = (VbRunning *) running;

  g_atomic_int_inc (&r->refs);
  return r;
}

void
vb_running_free (VbRunning *running)
{
  if (running == NULL || !g_atomic_int_dec_and_test (&running->refs))
    return;
  g_free (running->block_device);
  g_free (running->backend);
  g_free (running->why);
  g_free (running->device);
  g_clear_pointer (&running->attributes, g_hash_table_unref);
  g_free (running);
}

const VbDeviceConfig *
vb_running_device (const VbState *state, const char *uuid, const VbRunning *running)
{
  const VbDeviceConfig *d = running->device ? vb_state_lookup (state, running->device) : NULL;

  return d && d->uuid && strcmp (d->uuid, uuid) == 0 ? d : NULL;
}

void
vb_running_foreach_device (const VbState *state, GHashTable *running, VbRunningDeviceFunc func,
                           gpointer data)
{
  g_autoptr (GPtrArray) found = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer uuid, value;
  gboolean known = TRUE;

  g_hash_table_iter_init (&iter, running);
  while (known && g_hash_table_iter_next (&iter, &uuid, &value))
    {
      const VbDeviceConfig *d = vb_running_device (state, uuid, value);
      g_ptr_array_add (found, (gpointer) d);
      g_ptr_array_add (found, value);
      known = d != NULL;
    }
  if (known)
    {
      for (guint i = 0; i < found->len; i += 2)
        func (found->pdata[i], found->pdata[i + 1], data);
      return;
    }
  for (guint i = 0; g_hash_table_size (running) > 0 && i < state->devices->len; i++)
    {
      const VbDeviceConfig *d = state->devices->pdata[i];
      const VbRunning *r = g_hash_table_lookup (running, d->uuid);
      if (r)
        func (d, r, data);
    }
}

void
vb_step_free (VbStep *step)
{
  if (step == NULL)
    return;
  g_free (step->name);
  g_free (step->uuid);
  g_free (step->block_device);
  g_free (step->backend);
  g_free (step);
}

static VbStep *
step_new (VbStepKind kind, const char *name, const char *uuid, const char *block_device,
          const char *backend)
{
  VbStep *step = g_new0 (VbStep, 1);

  step->kind = kind;
  step->name = g_strdup (name);
  step->uuid = g_strdup (uuid);
  step->block_device = g_strdup (block_device);
  step->backend = g_strdup (backend);
  return step;
}

static void
add_by_uuid (const VbDeviceConfig *d, const VbRunning *r, gpointer table)
{
  if (!g_hash_table_contains (table, d->uuid)) /* the first, as a search would */
    g_hash_table_insert (table, d->uuid, (gpointer) d);
}

/* UUID -> device of @state, of those that run: only what runs is ever
 * looked up (thousands of devices may not) */
static GHashTable *
by_uuid (const VbState *state, GHashTable *running)
{
  GHashTable *table = g_hash_table_new (vb_uuid_hash, g_str_equal);

  if (state)
    vb_running_foreach_device (state, running, add_by_uuid, table);
  return table;
}

static gint
by_state_order (gconstpointer a, gconstpointer b, gpointer state)
{
  gint i = vb_state_index_of (state, (*(const VbDeviceConfig *const *) a)->name);
  gint j = vb_state_index_of (state, (*(const VbDeviceConfig *const *) b)->name);

  return (i > j) - (i < j);
}

static gboolean
wants_running (GHashTable *desired, const char *uuid)
{
  const VbDeviceConfig *d = g_hash_table_lookup (desired, uuid);

  return d != NULL && d->started;
}

/* Stops: nodes no desired device owns first (their graph is gone), then
 * devices in the stop order of the state they were started from. The
 * tables and the graph are made only when something runs: a change of a
 * host with thousands of devices and none started looks at none. */
static void
plan_stops (GPtrArray *plan, const VbState *previous, const VbState *desired, GHashTable *running)
{
  g_autoptr (GHashTable) planned = NULL;
  const VbState *order_from = previous ? previous : desired;
  g_autoptr (VbGraph) graph = NULL;
  g_autoptr (GHashTable) from_uuid = NULL;
  g_autoptr (GHashTable) desired_uuid = NULL;
  g_autofree gpointer *uuids = NULL;
  g_autoptr (GPtrArray) unwanted = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer key, value;
  guint n = 0;

  if (g_hash_table_size (running) == 0)
    return;
  planned = g_hash_table_new (g_str_hash, g_str_equal);
  from_uuid = by_uuid (order_from, running);
  desired_uuid = by_uuid (desired, running);
  uuids = g_hash_table_get_keys_as_array (running, &n);
  qsort (uuids, n, sizeof (gpointer), vb_compare_string_pointers);
  for (guint i = 0; i < n; i++)
    {
      const VbRunning *r = g_hash_table_lookup (running, uuids[i]);
      if (!g_hash_table_contains (from_uuid, uuids[i]) && !wants_running (desired_uuid, uuids[i]))
        {
          g_ptr_array_add (plan,
                           step_new (VB_STEP_STOP, NULL, uuids[i], r->block_device, r->backend));
          g_hash_table_add (planned, uuids[i]);
        }
    }
  /* the devices of @order_from that run and are no longer wanted, in its
   * order: from its running ones, not a walk of thousands configured */
  g_hash_table_iter_init (&iter, from_uuid);
  while (g_hash_table_iter_next (&iter, &key, &value))
    if (!wants_running (desired_uuid, key))
      g_ptr_array_add (unwanted, value);
  g_ptr_array_sort_with_data (unwanted, by_state_order, (gpointer) order_from);
  for (guint i = 0; i < unwanted->len; i++)
    {
      const VbDeviceConfig *d = unwanted->pdata[i];
      g_auto (GStrv) order = NULL;

      if (graph == NULL)
        graph = vb_graph_new (order_from);
      order = vb_graph_stop_order (graph, d->name);
      for (guint j = 0; order[j]; j++)
        {
          const VbDeviceConfig *o = vb_state_lookup (order_from, order[j]);
          const VbRunning *r = o ? g_hash_table_lookup (running, o->uuid) : NULL;
          if (r == NULL || wants_running (desired_uuid, o->uuid)
              || g_hash_table_contains (planned, o->uuid))
            continue;
          g_ptr_array_add (plan,
                           step_new (VB_STEP_STOP, o->name, o->uuid, r->block_device, r->backend));
          g_hash_table_add (planned, o->uuid);
        }
    }
}

GPtrArray *
vb_plan_compute (const VbState *previous, const VbState *desired, GHashTable *running)
{
  GPtrArray *plan = g_ptr_array_new_with_free_func ((GDestroyNotify) vb_step_free);
  g_autoptr (VbGraph) graph = NULL; /* made for the first start */
  g_autoptr (GHashTable) planned = g_hash_table_new (g_str_hash, g_str_equal);

  plan_stops (plan, previous, desired, running);

  for (guint i = 0; i < desired->devices->len; i++)
    {
      const VbDeviceConfig *d = desired->devices->pdata[i];
      /* (a device not started is not looked up: thousands may be configured) */
      const VbRunning *r = d->started ? g_hash_table_lookup (running, d->uuid) : NULL;
      if (r && r->attributes && !vb_attributes_equal (r->attributes, d->attributes))
        g_ptr_array_add (plan,
                         step_new (VB_STEP_UPDATE, d->name, d->uuid, r->block_device, r->backend));
    }

  for (guint i = 0; i < desired->devices->len; i++)
    {
      const VbDeviceConfig *d = desired->devices->pdata[i];
      g_auto (GStrv) order = NULL;

      if (!d->started || g_hash_table_contains (running, d->uuid))
        continue;
      if (graph == NULL)
        graph = vb_graph_new (desired);
      order = vb_graph_start_order (graph, d->name);
      for (guint j = 0; order[j]; j++)
        {
          const VbDeviceConfig *o = vb_state_lookup (desired, order[j]);
          /* a dependency is started with its dependent even when not asked */
          if (o == NULL || g_hash_table_contains (running, o->uuid)
              || g_hash_table_contains (planned, o->uuid))
            continue;
          g_ptr_array_add (plan, step_new (VB_STEP_START, o->name, o->uuid, NULL, o->backend));
          g_hash_table_add (planned, o->uuid);
        }
    }
  return plan;
}

char *
vb_plan_to_json (GPtrArray *plan)
{
  static const char *const kinds[] = { "stop", "update", "start" };
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = NULL;

  json_builder_begin_array (b);
  for (guint i = 0; i < plan->len; i++)
    {
      const VbStep *s = plan->pdata[i];
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "step");
      json_builder_add_string_value (b, kinds[s->kind]);
      json_builder_set_member_name (b, "device");
      if (s->name)
        json_builder_add_string_value (b, s->name);
      else
        json_builder_add_null_value (b);
      json_builder_set_member_name (b, "uuid");
      json_builder_add_string_value (b, s->uuid);
      if (s->block_device)
        {
          json_builder_set_member_name (b, "block_device");
          json_builder_add_string_value (b, s->block_device);
        }
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  return json_generator_to_data (gen, NULL);
}
