/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Manager.Apply's plan (see vb-apply.h): the spec checked as a whole, then
 * each device compared with its desired state, one step per method a
 * person would have called, in an order that never needs a device before
 * it exists or a component while another device holds it. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-apply.h"

#include <string.h>

#include <json-glib/json-glib.h>

#include "driver.h"
#include "vb-error.h"
#include "vb-graph.h"
#include "vb-options.h"
#include "vb-reconfig.h"
#include "vb-util.h"

static const char *const kind_names[] = { "unexport",    "remove", "delete", "stop",  "create",
                                          "reconfigure", "set",    "add",    "start", "export" };

const char *
vb_apply_kind_name (VbApplyKind kind)
{
  return kind_names[kind];
}

void
vb_apply_step_free (VbApplyStep *step)
{
  if (step == NULL)
    return;
  g_free (step->device);
  g_free (step->path);
  g_free (step->reason);
  g_clear_pointer (&step->config, vb_device_config_free);
  g_clear_pointer (&step->attributes, g_hash_table_unref);
  g_free (step->backend);
  g_free (step->driver);
  g_strfreev (step->add);
  g_strfreev (step->remove);
  g_free (step->source);
  g_free (step->listen);
  g_free (step->export);
  g_free (step);
}

char *
vb_apply_step_id (const VbApplyStep *step)
{
  const char *arg = step->source ? step->source : step->listen;

  return g_strdup_printf ("%s:%s%s%s", kind_names[step->kind], step->device, arg ? ":" : "",
                          arg ? arg : "");
}

G_GNUC_PRINTF (4, 5)
static VbApplyStep *
apply_step_new (VbApplyKind kind, const char *device, const char *path, const char *reason_format,
                ...)
{
  VbApplyStep *step = g_new0 (VbApplyStep, 1);
  va_list args;

  step->kind = kind;
  step->device = g_strdup (device);
  step->path = g_strdup (path);
  step->autostart = -1;
  va_start (args, reason_format);
  step->reason = g_strdup_vprintf (_ (reason_format), args);
  va_end (args);
  return step;
}

/* ------------------------------------------------------------------ */
/* The spec as a whole                                                  */

G_GNUC_PRINTF (4, 5)
static gboolean
spec_error (GError **error, gint code, const char *path, const char *format, ...)
{
  g_autofree char *msg = NULL;
  va_list args;

  va_start (args, format);
  msg = g_strdup_vprintf (_ (format), args);
  va_end (args);
  g_set_error (error, VB_ERROR, code, "%s: %s", path, msg);
  return FALSE;
}

static gboolean
is_slot (const VbComponentConfig *c)
{
  return vb_component_config_is_slot (c);
}

static const VbComponentConfig *
component_by_source (const VbDeviceConfig *d, const char *source)
{
  for (guint i = 0; d && i < d->components->len; i++)
    {
      const VbComponentConfig *c = d->components->pdata[i];
      if (strcmp (c->source, source) == 0)
        return c;
    }
  return NULL;
}

/* The driver and attributes of devices[@i]: canonical, defaults filled. */
static gboolean
check_driver (VbDeviceConfig *d, const VbDeviceConfig *old, guint i, GError **error)
{
  g_autofree char *path = g_strdup_printf ("devices[%u]", i);
  const VbDriver *driver = vb_driver_lookup (d->driver);
  g_autoptr (GError) local = NULL;
  GHashTable *resolved;
  guint slots = vb_device_config_n_slots (d);

  if (driver == NULL)
    {
      g_autofree char *known = vb_drivers_known_names ();
      return spec_error (error, VB_ERROR_INVALID_ARGUMENT, path,
                         "driver: '%s' is not a driver (known: %s)", d->driver, known);
    }
  resolved = vb_driver_resolve_attributes (driver, NULL, d->attributes, &local);
  if (resolved == NULL)
    return spec_error (error, VB_ERROR_INVALID_ARGUMENT, path, "attributes: %s", local->message);
  g_hash_table_unref (d->attributes);
  d->attributes = resolved;
  if (old == NULL && g_strcmp0 (g_hash_table_lookup (resolved, "metadata"), "md1") == 0)
    return spec_error (error, VB_ERROR_INVALID_ARGUMENT, path,
                       "attributes.metadata: md1 belongs to arrays mdadm made, which vblk adopts "
                       "(vbmgr scan --adopt) but does not create");
  if (slots > driver->max_components)
    return spec_error (error, VB_ERROR_INVALID_ARGUMENT, path,
                       "components: driver '%s' takes at most %u, %u given", driver->name,
                       driver->max_components, slots);
  return TRUE;
}

/* Each component of devices[@i]: a source vblk understands, a device of
 * the spec, not another device's (@owners: source -> "devices[k]..."),
 * its UUID and a "faulty" role agreeing with @old. */
static gboolean
check_components (const VbState *spec, VbDeviceConfig *d, const VbDeviceConfig *old, guint i,
                  GHashTable *owners, GError **error)
{
  for (guint j = 0; j < d->components->len; j++)
    {
      VbComponentConfig *c = d->components->pdata[j];
      const VbComponentConfig *was = component_by_source (old, c->source);
      g_autofree char *path = g_strdup_printf ("devices[%u].components[%u]", i, j);
      g_autofree char *device = NULL;
      g_autoptr (GError) local = NULL;
      const char *other;
      VbSourceKind kind;

      if (!vb_source_parse (c->source, &kind, &device, &local))
        return spec_error (error, VB_ERROR_INVALID_ARGUMENT, path, "source: %s", local->message);
      if (device && vb_state_lookup (spec, device) == NULL)
        return spec_error (error, VB_ERROR_NOT_FOUND, path,
                           "source: %s names no device of the spec", c->source);
      other = g_hash_table_lookup (owners, c->source);
      if (other && !(strcmp (d->driver, "window") == 0 && g_str_has_suffix (other, "/window")))
        return spec_error (error, VB_ERROR_INVALID_ARGUMENT, path,
                           "source: '%s' is a component of two devices (also %.*s)", c->source,
                           (int) strcspn (other, "/"), other);
      g_hash_table_insert (
          owners, c->source,
          g_strdup_printf ("%s/%s", path, strcmp (d->driver, "window") == 0 ? "window" : "device"));
      if (c->uuid && was && g_ascii_strcasecmp (c->uuid, was->uuid) != 0)
        return spec_error (error, VB_ERROR_INVALID_ARGUMENT, path,
                           "uuid: '%s' is component %s of '%s' now", c->source, was->uuid, d->name);
      if (c->uuid == NULL && was)
        c->uuid = g_strdup (was->uuid);
      if (g_strcmp0 (c->role, "faulty") == 0 && g_strcmp0 (was ? was->role : NULL, "faulty") != 0)
        return spec_error (error, VB_ERROR_INVALID_ARGUMENT, path,
                           "role: \"faulty\" is what vblkd records of a component a spare "
                           "replaced; '%s' is not one (leave it out, or make it a spare)",
                           c->source);
    }
  return TRUE;
}

/* devices[@i]'s name and UUID against the desired state's devices. */
static gboolean
check_identity (const VbState *current, VbDeviceConfig *d, const VbDeviceConfig *old, guint i,
                GError **error)
{
  g_autofree char *path = g_strdup_printf ("devices[%u].uuid", i);

  if (d->uuid == NULL)
    {
      d->uuid = old ? g_strdup (old->uuid) : NULL;
      return TRUE;
    }
  if (old && g_ascii_strcasecmp (old->uuid, d->uuid) != 0)
    return spec_error (error, VB_ERROR_INVALID_ARGUMENT, path,
                       "device '%s' has UUID %s, not %s (a different device of the same name)",
                       d->name, old->uuid, d->uuid);
  for (guint k = 0; k < current->devices->len; k++)
    {
      const VbDeviceConfig *o = current->devices->pdata[k];
      if (o != old && g_ascii_strcasecmp (o->uuid, d->uuid) == 0)
        return spec_error (error, VB_ERROR_INVALID_ARGUMENT, path,
                           "%s is device '%s' (a device is not renamed)", d->uuid, o->name);
    }
  return TRUE;
}

/* A started device needs every device it is built on started. */
static gboolean
check_started (const VbState *spec, GError **error)
{
  for (guint i = 0; i < spec->devices->len; i++)
    {
      const VbDeviceConfig *d = spec->devices->pdata[i];
      for (guint j = 0; d->started && j < d->components->len; j++)
        {
          const VbComponentConfig *c = d->components->pdata[j];
          const VbDeviceConfig *under = NULL;
          if (g_str_has_prefix (c->source, VB_DEVICE_SOURCE_PREFIX))
            under = vb_state_lookup (spec, c->source + strlen (VB_DEVICE_SOURCE_PREFIX));
          if (under && !under->started)
            {
              g_autofree char *path = g_strdup_printf ("devices[%u].started", i);
              return spec_error (error, VB_ERROR_INVALID_ARGUMENT, path,
                                 "'%s' runs on '%s', which the spec has stopped", d->name,
                                 under->name);
            }
        }
    }
  return TRUE;
}

static gboolean
check_spec (const VbState *current, VbState *spec, GError **error)
{
  g_autoptr (GHashTable) owners = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, g_free);
  g_autoptr (VbGraph) graph = NULL;
  g_autoptr (GError) local = NULL;

  for (guint i = 0; i < spec->devices->len; i++)
    {
      VbDeviceConfig *d = spec->devices->pdata[i];
      const VbDeviceConfig *old = vb_state_lookup (current, d->name);
      if (!check_identity (current, d, old, i, error) || !check_driver (d, old, i, error)
          || !check_components (spec, d, old, i, owners, error))
        return FALSE;
    }
  graph = vb_graph_new (spec);
  if (!vb_graph_check (graph, &local))
    return spec_error (error, local->code, "devices", "%s", local->message);
  return check_started (spec, error);
}

/* ------------------------------------------------------------------ */
/* The steps of one device                                              */

static char **
sources_where (const VbDeviceConfig *d, gboolean (*pick) (const VbComponentConfig *c, gpointer),
               gpointer data)
{
  g_autoptr (GPtrArray) out = g_ptr_array_new ();

  for (guint i = 0; d && i < d->components->len; i++)
    if (pick (d->components->pdata[i], data))
      g_ptr_array_add (out, g_strdup (((VbComponentConfig *) d->components->pdata[i])->source));
  g_ptr_array_add (out, NULL);
  return (char **) g_ptr_array_free (g_steal_pointer (&out), FALSE);
}

static gboolean
pick_slot (const VbComponentConfig *c, gpointer data)
{
  return is_slot (c);
}

/* Slots of @of whose source is not a slot of @in. */
static gboolean
pick_slot_not_in (const VbComponentConfig *c, gpointer data)
{
  const VbComponentConfig *other = component_by_source (data, c->source);

  return is_slot (c) && !(other && is_slot (other));
}

static char **
null_if_empty (char **v)
{
  if (v && v[0] == NULL)
    g_clear_pointer (&v, g_strfreev);
  return v;
}

static gboolean
strv_equal0 (char **a, char **b)
{
  return g_strv_equal ((const char *const *) a, (const char *const *) b);
}

/* The reconfiguration from @old's slots and driver to @want's, when they
 * differ; *@after: @old's configuration after it. */
static gboolean
plan_reconfigure (const VbDeviceConfig *old, const VbDeviceConfig *want, const char *path,
                  GPtrArray *steps, VbDeviceConfig **after, GError **error)
{
  g_auto (GStrv) had = sources_where (old, pick_slot, NULL);
  g_auto (GStrv) wanted = sources_where (want, pick_slot, NULL);
  g_auto (GStrv) got = NULL;
  g_autofree char *from = NULL, *to = NULL, *order = NULL;
  g_autoptr (GError) local = NULL;
  g_autoptr (GHashTable) given = g_hash_table_new (g_str_hash, g_str_equal);
  VbApplyStep *step;
  GHashTableIter iter;
  gpointer k, v;

  *after = vb_device_config_copy (old);
  if (strcmp (old->driver, want->driver) == 0 && strv_equal0 (had, wanted))
    return TRUE;
  from = vb_reconfig_describe (old);
  to = vb_reconfig_describe (want);
  step = apply_step_new (VB_APPLY_RECONFIGURE, want->name, path, "%s -> %s", from, to);
  if (strcmp (old->driver, want->driver) != 0)
    step->driver = g_strdup (want->driver);
  step->add = null_if_empty (sources_where (want, pick_slot_not_in, (gpointer) old));
  step->remove = null_if_empty (sources_where (old, pick_slot_not_in, (gpointer) want));
  step->attributes = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  g_hash_table_iter_init (&iter, want->attributes);
  while (g_hash_table_iter_next (&iter, &k, &v))
    if (g_strcmp0 (v, g_hash_table_lookup (old->attributes, k)) != 0)
      {
        g_hash_table_insert (step->attributes, g_strdup (k), g_strdup (v));
        g_hash_table_insert (given, k, v);
      }
  VbReconfigRequest request = {
    .driver = step->driver,
    .attributes = given,
    .add = (const char *const *) step->add,
    .remove = (const char *const *) step->remove,
  };
  g_clear_pointer (after, vb_device_config_free);
  *after = vb_reconfig_plan (old, &request, &local);
  if (*after == NULL)
    {
      vb_apply_step_free (step);
      return spec_error (error, local->code, path, "%s", local->message);
    }
  got = sources_where (*after, pick_slot, NULL);
  if (!strv_equal0 (got, wanted))
    {
      vb_apply_step_free (step);
      order = g_strjoinv (", ", got);
      return spec_error (error, VB_ERROR_NOT_SUPPORTED, path,
                         "components: a reconfiguration gives slots in the order %s; the slots "
                         "of a device keep their order (new ones go last)",
                         order);
    }
  g_ptr_array_add (steps, step);
  return TRUE;
}

/* Whether size attribute @name going from @was to @to loses what the
 * device holds: a smaller size (0 is "to the end": any other is smaller),
 * or a window's offset moved (the device shows other bytes). */
static gboolean
loses_data (const char *name, const char *was, const char *to)
{
  guint64 before = g_ascii_strtoull (was, NULL, 10), after = g_ascii_strtoull (to, NULL, 10);

  if (strcmp (name, "size") == 0)
    return before == 0 ? after != 0 : after != 0 && after < before;
  return strcmp (name, "offset") == 0;
}

/* Attributes, backend, autostart: one step, from @now (after a
 * reconfiguration) to @want. */
static void
plan_set (const VbDeviceConfig *now, const VbDeviceConfig *want, const char *path, GPtrArray *steps)
{
  g_autoptr (GString) why = g_string_new (NULL);
  g_autoptr (VbApplyStep) step = apply_step_new (VB_APPLY_SET, want->name, path, "%s", "");
  g_autoptr (GList) keys
      = g_list_sort (g_hash_table_get_keys (want->attributes), (GCompareFunc) g_strcmp0);
  const VbDriver *driver = vb_driver_lookup (want->driver);

  step->attributes = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  for (GList *l = keys; l; l = l->next)
    {
      const char *was = g_hash_table_lookup (now->attributes, l->data);
      const char *to = g_hash_table_lookup (want->attributes, l->data);
      const VbAttrSpec *spec = vb_driver_attr_spec (driver, l->data);
      if (g_strcmp0 (was, to) == 0)
        continue;
      g_hash_table_insert (step->attributes, g_strdup (l->data), g_strdup (to));
      g_string_append_printf (why, "%s%s: %s -> %s", why->len ? "; " : "", (char *) l->data,
                              was ? was : "(none)", to);
      if (spec && spec->type == VB_ATTR_SIZE && was && loses_data (l->data, was, to))
        {
          step->loses_data = TRUE;
          g_string_append (why, strcmp (l->data, "size") == 0 ? " (shrinks the device)"
                                                              : " (the device shows other bytes)");
        }
    }
  if (strcmp (now->backend, want->backend) != 0)
    {
      step->backend = g_strdup (want->backend);
      g_string_append_printf (why, "%sbackend: %s -> %s", why->len ? "; " : "", now->backend,
                              want->backend);
    }
  if (now->autostart != want->autostart)
    {
      step->autostart = want->autostart;
      g_string_append_printf (why, "%sautostart: %s", why->len ? "; " : "",
                              want->autostart ? "on" : "off");
    }
  if (why->len == 0)
    return;
  g_free (step->reason);
  step->reason = g_strdup (why->str);
  g_ptr_array_add (steps, g_steal_pointer (&step));
}

/* An export as it is served, whichever way its text says it ("nbd tcp:H:P"
 * of a state of before TLS is "nbd tcp:H:P tls=off"). */
static char *
export_normal (const char *e)
{
  g_auto (VbExportSpec) spec = { NULL };

  return vb_export_spec_parse (e, &spec, NULL) ? vb_export_spec_format (&spec) : g_strdup (e);
}

static gboolean
exports_have (GPtrArray *exports, const char *e)
{
  g_autofree char *want = export_normal (e);

  for (guint i = 0; i < exports->len; i++)
    {
      g_autofree char *have = export_normal (exports->pdata[i]);
      if (strcmp (have, want) == 0)
        return TRUE;
    }
  return FALSE;
}

/* Spares and replaced components, exports, started. */
static void
plan_members (const VbDeviceConfig *old, const VbDeviceConfig *want, const char *path,
              GPtrArray *steps)
{
  for (guint i = 0; old && i < old->components->len; i++)
    {
      const VbComponentConfig *c = old->components->pdata[i];
      const VbComponentConfig *to = component_by_source (want, c->source);
      if (is_slot (c) || (to && g_strcmp0 (to->role, c->role) == 0))
        continue;
      VbApplyStep *step = apply_step_new (
          VB_APPLY_REMOVE, want->name, path, "%s %s",
          strcmp (c->role, "spare") == 0 ? "a spare" : "a component a spare replaced",
          to ? "that the spec has in a slot" : "that the spec does not have");
      step->source = g_strdup (c->source);
      g_ptr_array_add (steps, step);
    }
  for (guint i = 0; i < want->components->len; i++)
    {
      const VbComponentConfig *c = want->components->pdata[i];
      const VbComponentConfig *was = component_by_source (old, c->source);
      if (g_strcmp0 (c->role, "spare") != 0 || (was && g_strcmp0 (was->role, "spare") == 0))
        continue;
      VbApplyStep *step = apply_step_new (VB_APPLY_ADD, want->name, path, "a spare of the spec");
      step->source = g_strdup (c->source);
      g_ptr_array_add (steps, step);
    }
  for (guint i = 0; old && i < old->exports->len; i++)
    if (!exports_have (want->exports, old->exports->pdata[i]))
      {
        VbApplyStep *step = apply_step_new (VB_APPLY_UNEXPORT, want->name, path, "not in the spec");
        g_auto (VbExportSpec) e = { NULL };
        if (vb_export_spec_parse (old->exports->pdata[i], &e, NULL))
          {
            step->listen = g_strdup (e.address);
            /* what an undo serves again, TLS settings included */
            step->export = vb_export_spec_format (&e);
          }
        else
          step->listen = g_strdup ((char *) old->exports->pdata[i] + strlen ("nbd "));
        g_ptr_array_add (steps, step);
      }
  for (guint i = 0; i < want->exports->len; i++)
    if (!old || !exports_have (old->exports, want->exports->pdata[i]))
      {
        VbApplyStep *step = apply_step_new (VB_APPLY_EXPORT, want->name, path, "in the spec");
        g_auto (VbExportSpec) e = { NULL };
        /* (checked by check_exports) */
        if (vb_export_spec_parse (want->exports->pdata[i], &e, NULL))
          {
            step->listen = g_strdup (e.address);
            step->export = vb_export_spec_format (&e);
          }
        g_ptr_array_add (steps, step);
      }
  if (want->started && !(old && old->started))
    g_ptr_array_add (steps,
                     apply_step_new (VB_APPLY_START, want->name, path, "started in the spec"));
  if (!want->started && old && old->started)
    g_ptr_array_add (steps,
                     apply_step_new (VB_APPLY_STOP, want->name, path, "stopped in the spec"));
}

/* The exports of a spec are what state.json holds ("nbd LISTEN" and its
 * TLS settings); on TCP the spec must say tls= (plaintext only when
 * asked for, as Export has it), and credentials are checked when the
 * export is made. */
static gboolean
check_exports (const VbDeviceConfig *d, const char *path, GError **error)
{
  for (guint j = 0; j < d->exports->len; j++)
    {
      const char *text = d->exports->pdata[j];
      g_auto (VbExportSpec) e = { NULL };
      g_autoptr (GError) local = NULL;

      if (!vb_export_spec_parse (text, &e, &local))
        return spec_error (error, VB_ERROR_INVALID_ARGUMENT, path,
                           "exports[%u]: %s (\"nbd LISTEN\", LISTEN unix:PATH or tcp:HOST:PORT, "
                           "then tls=MODE and tls-psk=FILE or tls-certs=DIR)",
                           j, local->message);
      if (g_str_has_prefix (e.address, "tcp:") && e.tls == VB_EXPORT_TLS_OFF
          && strstr (text, " tls=off") == NULL)
        return spec_error (error, VB_ERROR_INVALID_ARGUMENT, path,
                           "exports[%u]: '%s': TLS is required on TCP: give tls=require with "
                           "tls-psk=FILE or tls-certs=DIR, or tls=off for plaintext",
                           j, text);
    }
  return TRUE;
}

static gboolean
plan_device (const VbDeviceConfig *old, const VbDeviceConfig *want, guint i, GPtrArray *steps,
             GError **error)
{
  g_autofree char *path = g_strdup_printf ("devices[%u]", i);
  g_autoptr (VbDeviceConfig) after = NULL;

  if (!check_exports (want, path, error))
    return FALSE;
  if (old == NULL)
    {
      VbApplyStep *step
          = apply_step_new (VB_APPLY_CREATE, want->name, path, "%s", "not in the desired state");
      step->config = vb_device_config_copy (want);
      for (guint j = step->config->components->len; j > 0; j--)
        if (!is_slot (step->config->components->pdata[j - 1]))
          g_ptr_array_remove_index (step->config->components, j - 1);
      g_ptr_array_set_size (step->config->exports, 0);
      step->config->started = FALSE;
      g_ptr_array_add (steps, step);
      plan_members (NULL, want, path, steps);
      return TRUE;
    }
  if (!plan_reconfigure (old, want, path, steps, &after, error))
    return FALSE;
  plan_set (after, want, path, steps);
  plan_members (old, want, path, steps);
  return TRUE;
}

/* ------------------------------------------------------------------ */
/* Order                                                                */

/* The longest chain of devices under @name in @state (0: on no device). */
static guint
depth_of (const VbState *state, const char *name, GHashTable *memo)
{
  const VbDeviceConfig *d = vb_state_lookup (state, name);
  gpointer known;
  guint depth = 0;

  if (d == NULL)
    return 0;
  if (g_hash_table_lookup_extended (memo, name, NULL, &known))
    return GPOINTER_TO_UINT (known);
  g_hash_table_insert (memo, (gpointer) name, GUINT_TO_POINTER (0)); /* cycles: checked before */
  for (guint j = 0; j < d->components->len; j++)
    {
      const char *source = ((VbComponentConfig *) d->components->pdata[j])->source;
      if (g_str_has_prefix (source, VB_DEVICE_SOURCE_PREFIX))
        depth = MAX (depth, 1 + depth_of (state, source + strlen (VB_DEVICE_SOURCE_PREFIX), memo));
    }
  g_hash_table_insert (memo, (gpointer) name, GUINT_TO_POINTER (depth));
  return depth;
}

typedef struct {
  const VbState *current;
  const VbState *spec;
  GHashTable *current_depth;
  GHashTable *spec_depth;
} Order;

/* Stops, removals and deletes go dependents first, in the desired state's
 * graph; the rest dependencies first, in the spec's. */
static gint
order_key (const VbApplyStep *step, Order *o)
{
  if (step->kind <= VB_APPLY_STOP)
    return -(gint) depth_of (o->current, step->device, o->current_depth);
  return (gint) depth_of (o->spec, step->device, o->spec_depth);
}

static gint
compare_steps (gconstpointer a, gconstpointer b, gpointer data)
{
  const VbApplyStep *x = *(VbApplyStep *const *) a, *y = *(VbApplyStep *const *) b;

  if (x->kind != y->kind)
    return x->kind < y->kind ? -1 : 1;
  return order_key (x, data) - order_key (y, data);
}

/* ------------------------------------------------------------------ */

static gboolean
check_losses (GPtrArray *steps, const VbApplyOptions *options, GError **error)
{
  g_autoptr (GString) refused = g_string_new (NULL);

  for (guint i = 0; i < steps->len; i++)
    {
      const VbApplyStep *step = steps->pdata[i];
      g_autofree char *id = vb_apply_step_id (step);
      if (!step->loses_data
          || (step->kind == VB_APPLY_DELETE
                  ? options->prune
                  : options->confirm && g_strv_contains (options->confirm, id)))
        continue;
      g_string_append_printf (refused, "%s%s (%s)", refused->len ? ", " : "", id, step->reason);
    }
  if (refused->len == 0)
    return TRUE;
  g_set_error (error, VB_ERROR, VB_ERROR_WOULD_LOSE_DATA,
               _ ("the plan would lose data: %s; a device that is not in the spec is deleted only "
                  "with prune, any other such step only when confirmed by its id"),
               refused->str);
  return FALSE;
}

GPtrArray *
vb_apply_plan (const VbState *current, const VbState *spec_in, const VbApplyOptions *options,
               GError **error)
{
  g_autoptr (VbState) spec = vb_state_copy (spec_in);
  g_autoptr (GPtrArray) steps
      = g_ptr_array_new_with_free_func ((GDestroyNotify) vb_apply_step_free);
  g_autoptr (GHashTable) current_depth = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GHashTable) spec_depth = g_hash_table_new (g_str_hash, g_str_equal);
  Order order = { current, NULL, current_depth, spec_depth };

  if (!check_spec (current, spec, error))
    return NULL;
  order.spec = spec;
  for (guint i = 0; i < spec->devices->len; i++)
    {
      const VbDeviceConfig *want = spec->devices->pdata[i];
      if (!plan_device (vb_state_lookup (current, want->name), want, i, steps, error))
        return NULL;
    }
  for (guint i = 0; i < current->devices->len; i++)
    {
      const VbDeviceConfig *d = current->devices->pdata[i];
      VbApplyStep *step;
      if (vb_state_lookup (spec, d->name))
        continue;
      step = apply_step_new (VB_APPLY_DELETE, d->name, NULL, "not in the spec");
      step->loses_data = TRUE;
      g_ptr_array_add (steps, step);
    }
  g_ptr_array_sort_with_data (steps, compare_steps, &order);
  if (!check_losses (steps, options, error))
    return NULL;
  return g_steal_pointer (&steps);
}

/* ------------------------------------------------------------------ */
/* JSON                                                                 */

static void
add_strv (JsonBuilder *b, const char *name, char **v)
{
  if (v == NULL)
    return;
  json_builder_set_member_name (b, name);
  json_builder_begin_array (b);
  for (guint i = 0; v[i]; i++)
    json_builder_add_string_value (b, v[i]);
  json_builder_end_array (b);
}

static void
add_string (JsonBuilder *b, const char *name, const char *value)
{
  if (value == NULL)
    return;
  json_builder_set_member_name (b, name);
  json_builder_add_string_value (b, value);
}

static void
add_attributes (JsonBuilder *b, GHashTable *attributes)
{
  g_autoptr (GList) keys = NULL;

  if (attributes == NULL || g_hash_table_size (attributes) == 0)
    return;
  keys = g_list_sort (g_hash_table_get_keys (attributes), (GCompareFunc) g_strcmp0);
  json_builder_set_member_name (b, "attributes");
  json_builder_begin_object (b);
  for (GList *l = keys; l; l = l->next)
    add_string (b, l->data, g_hash_table_lookup (attributes, l->data));
  json_builder_end_object (b);
}

static void
build_step (JsonBuilder *b, const VbApplyStep *step, const char *status)
{
  g_autofree char *id = vb_apply_step_id (step);

  json_builder_begin_object (b);
  add_string (b, "id", id);
  add_string (b, "action", kind_names[step->kind]);
  add_string (b, "device", step->device);
  add_string (b, "reason", step->reason);
  json_builder_set_member_name (b, "loses_data");
  json_builder_add_boolean_value (b, step->loses_data);
  add_string (b, "status", status);
  add_string (b, "driver", step->config ? step->config->driver : step->driver);
  add_attributes (b, step->config ? step->config->attributes : step->attributes);
  if (step->config)
    {
      g_auto (GStrv) slots = sources_where (step->config, pick_slot, NULL);
      add_strv (b, "components", slots);
      add_string (b, "backend", step->config->backend);
    }
  else
    add_string (b, "backend", step->backend);
  add_strv (b, "add", step->add);
  add_strv (b, "remove", step->remove);
  add_string (b, "source", step->source);
  add_string (b, "listen", step->listen);
  if (step->autostart >= 0)
    {
      json_builder_set_member_name (b, "autostart");
      json_builder_add_boolean_value (b, step->autostart);
    }
  json_builder_end_object (b);
}

char *
vb_apply_plan_to_json (GPtrArray *plan, const char *const *status)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "steps");
  json_builder_begin_array (b);
  for (guint i = 0; i < plan->len; i++)
    build_step (b, plan->pdata[i], status ? status[i] : NULL);
  json_builder_end_array (b);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  json_generator_set_pretty (gen, TRUE);
  return json_generator_to_data (gen, NULL);
}
