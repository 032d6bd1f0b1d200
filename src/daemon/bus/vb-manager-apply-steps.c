/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Manager.Apply's steps as requests (see vb-manager-apply.h): each step
 * the request of the method a person would have called, through that
 * method's own mutate where there is one; each undo the inverse request,
 * or a mutate that puts back exactly what the step changed. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-device-mutate.h"
#include "vb-graph.h"
#include "vb-manager.h"
#include "vb-manager-apply.h"
#include "vb-options.h"
#include "vb-request.h"

#include <string.h>

/* ------------------------------------------------------------------ */
/* A step as the request a person would have made                       */

void
vb_apply_step_request_free (StepRequest *sr)
{
  vb_request_clear (&sr->req);
  g_free (sr);
}

static GVariant *
vardict (const char *key, GVariant *value, const char *key2, GVariant *value2)
{
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  if (key && value)
    g_variant_builder_add (&b, "{sv}", key, value);
  if (key2 && value2)
    g_variant_builder_add (&b, "{sv}", key2, value2);
  return g_variant_ref_sink (g_variant_builder_end (&b));
}

/* Export's options for an EXPORT step (its TLS settings as the spec has
 * them), or to stop one (@stop: the address alone); an UNEXPORT undone
 * serves its export again as it was. */
static GVariant *
export_options (const VbApplyStep *step, gboolean stop)
{
  g_auto (VbExportSpec) e = { NULL };
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  g_variant_builder_add (&b, "{sv}", "listen", g_variant_new_string (step->listen));
  if (stop)
    g_variant_builder_add (&b, "{sv}", "stop", g_variant_new_boolean (TRUE));
  else if (step->export && vb_export_spec_parse (step->export, &e, NULL))
    {
      g_variant_builder_add (&b, "{sv}", "tls", g_variant_new_string (vb_export_tls_name (e.tls)));
      if (e.tls_psk)
        g_variant_builder_add (&b, "{sv}", "tls-psk", g_variant_new_string (e.tls_psk));
      if (e.tls_certs)
        g_variant_builder_add (&b, "{sv}", "tls-certs", g_variant_new_string (e.tls_certs));
    }
  return g_variant_ref_sink (g_variant_builder_end (&b));
}

static GVariant *
strv_or_null (char **v)
{
  return v ? g_variant_new_strv ((const char *const *) v, -1) : NULL;
}

static GHashTable *
attributes_copy (GHashTable *from)
{
  GHashTable *h = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  GHashTableIter iter;
  gpointer k, v;

  g_hash_table_iter_init (&iter, from);
  while (g_hash_table_iter_next (&iter, &k, &v))
    g_hash_table_insert (h, g_strdup (k), g_strdup (v));
  return h;
}

static gboolean
mutate_create (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
               GError **error)
{
  StepRequest *sr = user_data;

  return vb_mutate_create_device (
      candidate, vb_device_config_copy (vb_apply_step_at (sr->apply, sr->index)->config), FALSE,
      intent, error);
}

/* Apply's set: attributes as SetAttributes, then backend and autostart. */
static gboolean
mutate_set (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
            GError **error)
{
  StepRequest *sr = user_data;
  const VbApplyStep *step = vb_apply_step_at (sr->apply, sr->index);
  VbDeviceConfig *d = vb_state_lookup_mut (candidate, step->device);
  const VbRunning *r = d ? g_hash_table_lookup (daemon->running, d->uuid) : NULL;

  if (g_hash_table_size (step->attributes) > 0
      && !vb_mutate_set_attributes (daemon, candidate, user_data, intent, error))
    return FALSE;
  if (d == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND, _ ("no device named '%s'"), step->device);
      return FALSE;
    }
  if (step->backend && !vb_backend_option_check (d, r, step->backend, error))
    return FALSE;
  if (step->backend)
    {
      g_free (d->backend);
      d->backend = g_strdup (step->backend);
    }
  if (step->autostart >= 0)
    d->autostart = step->autostart;
  vb_op_intent_touch (intent, d->name);
  return TRUE;
}

/* The method each kind of step is (Apply's own create and set take the
 * step's whole device, and backend and autostart besides). */
static const StepRun step_runs[] = {
  [VB_APPLY_STOP] = { vb_mutate_stop, VB_OP_CHANGE },
  [VB_APPLY_UNEXPORT] = { vb_mutate_export, VB_OP_CHANGE },
  [VB_APPLY_REMOVE] = { vb_mutate_remove, VB_OP_CHANGE },
  [VB_APPLY_DELETE] = { vb_mutate_delete, VB_OP_CHANGE },
  [VB_APPLY_CREATE] = { mutate_create, VB_OP_CHANGE },
  [VB_APPLY_RECONFIGURE] = { vb_mutate_reconfigure, VB_OP_RECONFIGURE },
  [VB_APPLY_SET] = { mutate_set, VB_OP_CHANGE },
  [VB_APPLY_ADD] = { vb_mutate_add_component, VB_OP_CHANGE },
  [VB_APPLY_START] = { vb_mutate_start, VB_OP_CHANGE },
  [VB_APPLY_EXPORT] = { vb_mutate_export, VB_OP_CHANGE },
};

/* A request about step @i's device and component; export's arguments
 * (@stop: an unexport) when the step is one. */
static StepRequest *
request_new (Apply *a, guint i, gboolean stop)
{
  const VbApplyStep *step = vb_apply_step_at (a, i);
  StepRequest *sr = g_new0 (StepRequest, 1);

  sr->apply = a;
  sr->index = i;
  sr->req.name = g_strdup (step->device);
  sr->req.source = g_strdup (step->source);
  if (step->kind == VB_APPLY_EXPORT || step->kind == VB_APPLY_UNEXPORT)
    {
      g_free (sr->req.source);
      sr->req.source = g_strdup ("nbd");
      sr->req.options = export_options (step, stop);
    }
  return sr;
}

StepRequest *
vb_apply_step_request (Apply *a, guint i, StepRun *run)
{
  const VbApplyStep *step = vb_apply_step_at (a, i);
  StepRequest *sr = request_new (a, i, step->kind == VB_APPLY_UNEXPORT);
  VbRequest *req = &sr->req;

  *run = step_runs[step->kind];
  if (step->kind == VB_APPLY_ADD)
    req->options = vardict ("role", g_variant_new_string ("spare"), NULL, NULL);
  if (step->kind == VB_APPLY_SET || step->kind == VB_APPLY_RECONFIGURE)
    req->attributes = attributes_copy (step->attributes);
  if (step->kind == VB_APPLY_RECONFIGURE)
    {
      req->driver = g_strdup (step->driver);
      req->options
          = vardict ("add", strv_or_null (step->add), "remove", strv_or_null (step->remove));
    }
  if (req->options == NULL)
    req->options = vardict (NULL, NULL, NULL, NULL);
  return sr;
}

/* ------------------------------------------------------------------ */
/* Undo                                                                 */

static gboolean
component_has_source (gconstpointer component, gconstpointer source)
{
  return strcmp (((const VbComponentConfig *) component)->source, source) == 0;
}

static const VbDeviceConfig *
device_in (const VbState *state, const char *name)
{
  return state ? vb_state_lookup (state, name) : NULL;
}

/* The "started" the step changed, back as before: of the device a stop
 * stopped, or of the device a start started and those it started under
 * it — and only where it is still what the step left (a start or stop
 * someone else asked for since stays). */
static void
undo_started (Apply *a, guint i, VbState *candidate, VbOpIntent *intent)
{
  const VbApplyStep *step = vb_apply_step_at (a, i);
  g_autoptr (VbGraph) graph = vb_graph_new (a->after[i]);
  g_auto (GStrv) scope = step->kind == VB_APPLY_START
                             ? vb_graph_start_order (graph, step->device)
                             : g_strdupv ((char *[]){ step->device, NULL });

  for (guint k = 0; scope[k]; k++)
    {
      const VbDeviceConfig *after = device_in (a->after[i], scope[k]);
      const VbDeviceConfig *before = device_in (a->before[i], scope[k]);
      VbDeviceConfig *now = vb_state_lookup_mut (candidate, scope[k]);
      if (before && after && now && before->started != after->started
          && now->started == after->started)
        {
          now->started = before->started;
          vb_op_intent_touch (intent, now->name);
        }
    }
}

/* A later step of the apply, done, that wrote on a component of @d (a
 * create, a spare or a leg added): its index, or -1. */
static gint
reused_by (Apply *a, guint i, const VbDeviceConfig *d)
{
  for (guint k = i + 1; k < a->plan->len; k++)
    {
      const VbApplyStep *later = vb_apply_step_at (a, k);
      if (strcmp (a->status[k], "not-done") == 0)
        continue;
      for (guint c = 0; c < d->components->len; c++)
        {
          const char *source = ((VbComponentConfig *) d->components->pdata[c])->source;
          if ((later->config
               && g_ptr_array_find_with_equal_func (later->config->components, source,
                                                    component_has_source, NULL))
              || g_strcmp0 (later->source, source) == 0
              || (later->add && g_strv_contains ((const char *const *) later->add, source)))
            return (gint) k;
        }
    }
  return -1;
}

/* The device the step deleted, back where it was — unless a later step
 * wrote on its components (its superblocks are gone: it stays deleted). */
static gboolean
undo_delete (Apply *a, guint i, VbState *candidate, VbOpIntent *intent, GError **error)
{
  const VbApplyStep *step = vb_apply_step_at (a, i);
  const VbDeviceConfig *d = device_in (a->before[i], step->device);
  gint k = d ? vb_state_index_of (a->before[i], d->name) : -1;
  gint later;

  if (d == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND, _ ("device '%s' was not there before"),
                   step->device);
      return FALSE;
    }
  if ((later = reused_by (a, i, d)) >= 0)
    {
      g_autofree char *id = vb_apply_step_id (vb_apply_step_at (a, later));
      g_set_error (error, VB_ERROR, VB_ERROR_WOULD_LOSE_DATA,
                   _ ("step %d (%s) wrote its own superblocks on components of '%s', which stays "
                      "deleted"),
                   later + 1, id, d->name);
      return FALSE;
    }
  if (vb_state_lookup (candidate, d->name))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_ALREADY_EXISTS,
                   _ ("device '%s' exists again meanwhile"), d->name);
      return FALSE;
    }
  g_ptr_array_insert (candidate->devices, MIN ((guint) k, candidate->devices->len),
                      vb_device_config_copy (d));
  vb_state_reindex (candidate);
  vb_op_intent_touch (intent, d->name);
  return TRUE;
}

/* Attributes, backend and autostart the step set, back as before where
 * they are still what it left. */
static void
undo_set (const VbDeviceConfig *before, const VbDeviceConfig *after, VbDeviceConfig *now,
          VbOpIntent *intent)
{
  GHashTableIter iter;
  gpointer k, v;

  g_hash_table_iter_init (&iter, after->attributes);
  while (g_hash_table_iter_next (&iter, &k, &v))
    {
      const char *was = g_hash_table_lookup (before->attributes, k);
      if (g_strcmp0 (was, v) != 0 && g_strcmp0 (g_hash_table_lookup (now->attributes, k), v) == 0
          && was)
        g_hash_table_insert (now->attributes, g_strdup (k), g_strdup (was));
    }
  if (strcmp (before->backend, after->backend) != 0 && strcmp (now->backend, after->backend) == 0)
    {
      g_free (now->backend);
      now->backend = g_strdup (before->backend);
    }
  if (before->autostart != after->autostart && now->autostart == after->autostart)
    now->autostart = before->autostart;
  vb_op_intent_touch (intent, now->name);
}

/* A component the step removed, back as it was (a spare or a replaced one). */
static gboolean
undo_remove (const VbDeviceConfig *before, VbDeviceConfig *now, const char *source,
             VbOpIntent *intent, GError **error)
{
  for (guint k = 0; before && now && k < before->components->len; k++)
    {
      const VbComponentConfig *c = before->components->pdata[k];
      if (strcmp (c->source, source) == 0)
        {
          g_ptr_array_add (now->components, vb_component_config_copy (c));
          vb_op_intent_touch (intent, now->name);
          return TRUE;
        }
    }
  g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND, _ ("component '%s' of '%s' is gone"), source,
               before ? before->name : "?");
  return FALSE;
}

gboolean
vb_apply_mutate_undo (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
                      GError **error)
{
  StepRequest *sr = user_data;
  Apply *a = sr->apply;
  guint i = sr->index;
  const VbApplyStep *step = vb_apply_step_at (a, i);
  const VbDeviceConfig *before = device_in (a->before[i], step->device);
  VbDeviceConfig *now = vb_state_lookup_mut (candidate, step->device);

  switch (step->kind)
    {
    case VB_APPLY_START:
    case VB_APPLY_STOP:
      undo_started (a, i, candidate, intent);
      return TRUE;
    case VB_APPLY_CREATE:
      return vb_mutate_delete (daemon, candidate, user_data, intent, error);
    case VB_APPLY_DELETE:
      return undo_delete (a, i, candidate, intent, error);
    case VB_APPLY_ADD:
      return vb_mutate_remove (daemon, candidate, user_data, intent, error);
    case VB_APPLY_REMOVE:
      return undo_remove (before, now, step->source, intent, error);
    case VB_APPLY_EXPORT:
    case VB_APPLY_UNEXPORT:
      return vb_mutate_export (daemon, candidate, user_data, intent, error);
    case VB_APPLY_SET:
      if (now == NULL || before == NULL || device_in (a->after[i], step->device) == NULL)
        break;
      undo_set (before, device_in (a->after[i], step->device), now, intent);
      return TRUE;
    case VB_APPLY_RECONFIGURE:
      return vb_mutate_reconfigure (daemon, candidate, user_data, intent, error);
    }
  g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND, _ ("device '%s' is gone"), step->device);
  return FALSE;
}

/* The request of step @i's undo: the inverse request where there is one
 * (a reconfiguration back, an export stopped, a spare removed). */
StepRequest *
vb_apply_undo_request (Apply *a, guint i, VbOpMode *mode)
{
  const VbApplyStep *step = vb_apply_step_at (a, i);
  const VbDeviceConfig *before = device_in (a->before[i], step->device);
  const VbDeviceConfig *after = device_in (a->after[i], step->device);
  StepRequest *sr = request_new (a, i, step->kind == VB_APPLY_EXPORT);
  VbRequest *req = &sr->req;
  GHashTableIter iter;
  gpointer k, v;

  *mode = VB_OP_CHANGE;
  if (step->kind == VB_APPLY_RECONFIGURE && before && after)
    {
      *mode = VB_OP_RECONFIGURE;
      if (strcmp (before->driver, after->driver) != 0)
        req->driver = g_strdup (before->driver);
      req->attributes = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
      g_hash_table_iter_init (&iter, before->attributes);
      while (g_hash_table_iter_next (&iter, &k, &v))
        if (g_strcmp0 (v, g_hash_table_lookup (after->attributes, k)) != 0)
          g_hash_table_insert (req->attributes, g_strdup (k), g_strdup (v));
      req->options
          = vardict ("add", strv_or_null (step->remove), "remove", strv_or_null (step->add));
    }
  if (req->options == NULL)
    req->options = vardict (NULL, NULL, NULL, NULL);
  return sr;
}
