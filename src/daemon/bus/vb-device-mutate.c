/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the Device methods change in the desired state: one VbMutateFunc
 * per method (vb-reconcile.h), run by the reconciler on a candidate copy of
 * the state; vb-device.c authorizes, checks options and submits them. */
#include "config.h"

#include "vb-device-mutate.h"
#include "vb-engine-jobs.h"
#include "vb-exports.h"
#include "vb-hotplug.h"
#include "vb-reconfig.h"
#include "vb-request.h"

#include <glib/gi18n.h>
#include <errno.h>
#include <string.h>

static VbDeviceConfig *
lookup_or_fail (VbState *candidate, const char *name, GError **error)
{
  VbDeviceConfig *d = vb_state_lookup_mut (candidate, name);

  if (d == NULL)
    g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND, _ ("no device named '%s'"), name);
  return d;
}

/* Start */

gboolean
vb_mutate_start (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
                 GError **error)
{
  VbRequest *req = user_data;
  VbDeviceConfig *d = lookup_or_fail (candidate, req->name, error);

  if (d == NULL)
    return FALSE;
  vb_op_intent_start (intent, candidate, req->name);
  vb_op_intent_touch (intent, req->name);
  return TRUE;
}

/* Stop */

gboolean
vb_mutate_stop (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
                GError **error)
{
  VbRequest *req = user_data;
  VbDeviceConfig *d = lookup_or_fail (candidate, req->name, error);
  g_autoptr (VbGraph) graph = NULL;
  g_auto (GStrv) order = NULL;
  g_autoptr (GString) users = g_string_new (NULL);

  if (d == NULL)
    return FALSE;
  graph = vb_graph_new_above (candidate, req->name);
  order = vb_graph_stop_order (graph, req->name);
  for (guint i = 0; order[i]; i++)
    {
      VbDeviceConfig *o = vb_state_lookup_mut (candidate, order[i]);
      if (o != d && o && (o->started || g_hash_table_contains (daemon->running, o->uuid)))
        g_string_append_printf (users, "%s%s", users->len ? ", " : "", o->name);
    }
  if (users->len && !vb_options_get_bool (req->options, "recursive", FALSE))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                   _ ("device '%s' is used by %s (stop those first, or use recursive)"), req->name,
                   users->str);
      return FALSE;
    }
  for (guint i = 0; order[i]; i++)
    {
      VbDeviceConfig *o = vb_state_lookup_mut (candidate, order[i]);
      o->started = FALSE;
      vb_op_intent_touch (intent, o->name);
    }
  return TRUE;
}

/* Delete */

gboolean
vb_mutate_delete (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
                  GError **error)
{
  VbRequest *req = user_data;
  VbDeviceConfig *d = lookup_or_fail (candidate, req->name, error);
  g_autoptr (VbGraph) graph = NULL;
  g_auto (GStrv) order = NULL;

  if (d == NULL)
    return FALSE;
  graph = vb_graph_new_above (candidate, req->name);
  order = vb_graph_stop_order (graph, req->name);
  if (order[0] && order[1] && !vb_options_get_bool (req->options, "recursive", FALSE))
    {
      g_autoptr (GString) users = g_string_new (NULL);
      for (guint i = 0; order[i + 1]; i++)
        g_string_append_printf (users, "%s%s", i ? ", " : "", order[i]);
      g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                   _ ("device '%s' is used by %s (delete those first, or use recursive)"),
                   req->name, users->str);
      return FALSE;
    }
  for (guint i = 0; order[i]; i++)
    {
      g_ptr_array_remove_index (candidate->devices, vb_state_index_of (candidate, order[i]));
      vb_state_reindex (candidate);
      vb_op_intent_touch (intent, order[i]);
    }
  return TRUE;
}

/* SetAttributes */

gboolean
vb_mutate_set_attributes (VbDaemon *daemon, VbState *candidate, gpointer user_data,
                          VbOpIntent *intent, GError **error)
{
  VbRequest *req = user_data;
  VbDeviceConfig *d = lookup_or_fail (candidate, req->name, error);
  const VbDriver *driver;
  GHashTable *resolved;
  GHashTableIter iter;
  gpointer key, value;

  if (d == NULL)
    return FALSE;
  driver = vb_driver_lookup (d->driver);
  resolved = vb_driver_resolve_attributes (driver, d->attributes, req->attributes, error);
  if (resolved == NULL)
    return FALSE;
  if (g_hash_table_contains (daemon->running, d->uuid))
    {
      g_hash_table_iter_init (&iter, resolved);
      while (g_hash_table_iter_next (&iter, &key, &value))
        {
          const VbAttrSpec *spec = vb_driver_attr_spec (driver, key);
          if (!spec->online && g_strcmp0 (value, g_hash_table_lookup (d->attributes, key)) != 0)
            {
              g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                           _ ("attribute '%s' cannot change while '%s' is started (stop it first)"),
                           (char *) key, d->name);
              g_hash_table_unref (resolved);
              return FALSE;
            }
        }
    }
  g_hash_table_unref (d->attributes);
  d->attributes = resolved;
  vb_op_intent_touch (intent, d->name);
  return TRUE;
}

/* AddComponent */

static gboolean
is_slot_source (const VbDeviceConfig *d, const char *source)
{
  for (guint i = 0; i < d->components->len; i++)
    {
      const VbComponentConfig *c = d->components->pdata[i];
      if (strcmp (c->source, source) == 0 && vb_component_config_is_slot (c))
        return TRUE;
    }
  return FALSE;
}

/* A failed slot's own component named at another path than the desired
 * state's (it came back at another number, the old one taken since;
 * mdadm --re-add finds it by its superblock too): the slot's source
 * becomes that path, when the policy saw this component's superblock
 * there. The engine's re-add reads it again and applies the assembly
 * rule. */
static void
follow_moved_component (VbDaemon *daemon, VbDeviceConfig *d, const char *source)
{
  const char *uuid = vb_hotplug_component_at (source);
  const VbRunning *r = g_hash_table_lookup (daemon->running, d->uuid);

  if (uuid == NULL || r == NULL)
    return;
  for (guint i = 0; i < d->components->len; i++)
    {
      VbComponentConfig *c = d->components->pdata[i];
      if (strcmp (c->source, source) == 0)
        return;
    }
  for (guint i = 0; i < d->components->len; i++)
    {
      VbComponentConfig *c = d->components->pdata[i];
      if (vb_component_config_is_slot (c) && g_strcmp0 (c->uuid, uuid) == 0
          && vb_hotplug_slot_failed (daemon, d, i))
        {
          g_free (c->source);
          c->source = g_strdup (source);
          return;
        }
    }
}

/* What Add refuses before looking for the component: a component a spare
 * replaced, a new slot of a started device, a spare where none can be. */
static gboolean
check_addable (VbDaemon *daemon, const VbDeviceConfig *d, const char *source, const char *role,
               GError **error)
{
  for (guint i = 0; i < d->components->len && g_strcmp0 (role, "spare") != 0; i++)
    {
      const VbComponentConfig *c = d->components->pdata[i];
      if (strcmp (c->source, source) == 0 && g_strcmp0 (c->role, "faulty") == 0)
        {
          g_set_error (
              error, VB_ERROR, VB_ERROR_BUSY,
              _ ("component '%s' was replaced in its slot of '%s' (a spare took it): remove "
                 "it, then add it again as a spare if it is to serve"),
              source, d->name);
          return FALSE;
        }
    }
  if (g_hash_table_contains (daemon->running, d->uuid) && g_strcmp0 (role, "spare") != 0
      && !is_slot_source (d, source))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   _ ("device '%s' is started: adding a component to a started device needs "
                      "online reconfiguration, which driver '%s' does not have (a spare can be "
                      "added: --spare)"),
                   d->name, d->driver);
      return FALSE;
    }
  if (g_strcmp0 (role, "spare") == 0
      && !vb_driver_takes_spares (vb_driver_lookup (d->driver), d->attributes))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   _ ("device '%s': spares need redundancy and on-component metadata (driver "
                      "raid1 or raid10 with metadata=vblk; this is '%s')"),
                   d->name, d->driver);
      return FALSE;
    }
  return TRUE;
}

gboolean
vb_mutate_add_component (VbDaemon *daemon, VbState *candidate, gpointer user_data,
                         VbOpIntent *intent, GError **error)
{
  VbRequest *req = user_data;
  VbDeviceConfig *d = lookup_or_fail (candidate, req->name, error);
  g_autofree char *role = NULL;
  g_autoptr (VbGraph) graph = NULL;
  VbSourceKind kind;
  guint slots = 0, at;

  if (d == NULL)
    return FALSE;
  if (!vb_source_parse (req->source, &kind, NULL, error))
    return FALSE;
  if (req->options)
    g_variant_lookup (req->options, "role", "s", &role);
  if (role == NULL)
    follow_moved_component (daemon, d, req->source);
  if (!check_addable (daemon, d, req->source, role, error))
    return FALSE;
  for (guint i = 0; i < d->components->len; i++)
    {
      VbComponentConfig *c = d->components->pdata[i];
      if (strcmp (c->source, req->source) == 0)
        {
          /* a slot's own component, on a started device: a re-add (mdadm
           * --re-add), done by the op's worker; the engine refuses it
           * unless the slot is faulty */
          if (vb_component_config_is_slot (c) && role == NULL
              && g_hash_table_contains (daemon->running, d->uuid))
            {
              vb_op_intent_readd (intent, d->name, c);
              g_free (req->result_path); /* a mutate may run again, after a wait */
              req->result_path = vb_component_object_path (d->name, i);
              vb_op_intent_touch (intent, d->name);
              return TRUE;
            }
          g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                       _ ("component '%s': already a component of '%s'"), req->source, d->name);
          return FALSE;
        }
      if (g_strcmp0 (c->role, "spare") != 0)
        slots++;
    }
  if (role && strcmp (role, "spare") != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("option 'role': '%s' is not allowed (allowed: spare)"), role);
      return FALSE;
    }
  if (role == NULL)
    role = g_strdup_printf ("%u", slots);
  /* slots come first: a new slot goes after the last one */
  at = role[0] == 's' ? d->components->len : slots;
  g_ptr_array_insert (d->components, at, vb_component_config_new (req->source, role, NULL));
  ((VbComponentConfig *) d->components->pdata[at])->uuid = vb_uuid_new ();
  graph = vb_graph_new (candidate);
  if (!vb_graph_check (graph, error))
    return FALSE;
  g_free (req->result_path);
  req->result_path = vb_component_object_path (d->name, at);
  vb_op_intent_touch (intent, d->name);
  return TRUE;
}

/* Export */

/* Whether @spec (an export of the desired state) is served on @address. */
static gboolean
export_is_on (const char *spec, const char *address)
{
  g_auto (VbExportSpec) parsed = { NULL };

  return vb_export_spec_parse (spec, &parsed, NULL) && strcmp (parsed.address, address) == 0;
}

/* Export's option 'listen', or the device's socket in the run directory. */
static char *
export_listen (VbDaemon *daemon, const VbDeviceConfig *d, GVariant *options)
{
  char *listen = NULL;

  if (!g_variant_lookup (options, "listen", "s", &listen))
    listen = g_strdup_printf ("unix:%s/nbd/%s.sock", daemon->run_dir, d->name);
  return listen;
}

/* The spec of an Export call: its address, and TLS as the options say —
 * required by default on TCP (as qemu-nbd and nbdkit have it for
 * exports meant to leave the host), and whenever credentials are given;
 * the address, as the saved text reads back, into *@address. */
static char *
export_spec_from_options (VbDaemon *daemon, const VbDeviceConfig *d, GVariant *options,
                          char **address, GError **error)
{
  g_auto (VbExportSpec) spec = { NULL };
  g_autoptr (VbNbdTls) tls = NULL;
  const char *tls_name = NULL;
  g_autofree char *text = NULL;

  spec.address = export_listen (daemon, d, options);
  g_variant_lookup (options, "tls-psk", "s", &spec.tls_psk);
  g_variant_lookup (options, "tls-certs", "s", &spec.tls_certs);
  if (g_variant_lookup (options, "tls", "&s", &tls_name))
    {
      if (!vb_export_tls_from_name (tls_name, &spec.tls, error))
        return NULL;
    }
  else if (spec.tls_psk || spec.tls_certs || g_str_has_prefix (spec.address, "tcp:"))
    spec.tls = VB_EXPORT_TLS_REQUIRE;
  if (spec.tls == VB_EXPORT_TLS_OFF && (spec.tls_psk || spec.tls_certs))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("export on %s: tls=off takes no credentials"), spec.address);
      return NULL;
    }
  if (spec.tls_psk && spec.tls_certs)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("export on %s: give tls-psk or tls-certs, not both"), spec.address);
      return NULL;
    }
  if (spec.tls != VB_EXPORT_TLS_OFF && !spec.tls_psk && !spec.tls_certs)
    {
      if (tls_name)
        g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                     _ ("export on %s: tls=%s needs tls-psk (a keys file) or tls-certs (a "
                        "certificate directory)"),
                     spec.address, tls_name);
      else
        g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                     _ ("export on %s: TLS is required on TCP unless tls=off is given: give "
                        "tls-psk (a keys file) or tls-certs (a certificate directory)"),
                     spec.address);
      return NULL;
    }
  text = vb_export_spec_format (&spec);
  /* what is saved is what is read back (and served), and the credentials
   * must load before anything is saved */
  vb_export_spec_clear (&spec);
  if (!vb_export_spec_parse (text, &spec, error) || !vb_export_tls_load (&spec, &tls, error))
    return NULL;
  *address = g_steal_pointer (&spec.address);
  return g_steal_pointer (&text);
}

gboolean
vb_mutate_export (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
                  GError **error)
{
  VbRequest *req = user_data;
  VbDeviceConfig *d = lookup_or_fail (candidate, req->name, error);
  g_autofree char *listen = NULL;
  g_autofree char *spec = NULL;
  gboolean stop = vb_options_get_bool (req->options, "stop", FALSE);
  guint at;

  if (d == NULL)
    return FALSE;
  if (g_strcmp0 (req->source, "nbd") != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED, _ ("protocol '%s': only nbd is known"),
                   req->source);
      return FALSE;
    }
  if (stop)
    {
      listen = export_listen (daemon, d, req->options);
      for (at = 0; at < d->exports->len; at++)
        if (export_is_on (d->exports->pdata[at], listen))
          break;
      if (at == d->exports->len)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND, _ ("device '%s' is not exported on %s"),
                       d->name, listen);
          return FALSE;
        }
      g_ptr_array_remove_index (d->exports, at);
      vb_op_intent_touch (intent, d->name);
      return TRUE;
    }
  spec = export_spec_from_options (daemon, d, req->options, &listen, error);
  if (spec == NULL)
    return FALSE;
  for (guint i = 0; i < candidate->devices->len; i++)
    {
      const VbDeviceConfig *o = candidate->devices->pdata[i];
      for (guint k = 0; k < o->exports->len; k++)
        if (export_is_on (o->exports->pdata[k], listen))
          {
            g_set_error (error, VB_ERROR, VB_ERROR_ALREADY_EXISTS,
                         _ ("%s already serves device '%s'"), listen, o->name);
            return FALSE;
          }
    }
  g_ptr_array_add (d->exports, g_steal_pointer (&spec));
  vb_op_intent_touch (intent, d->name);
  return TRUE;
}

/* Reconfigure */

#define RECONFIGURE_TIMEOUT_MS 10000

/* Reconfigure's option 'backend': one built in here, and for a started
 * device the one it runs on. */
gboolean
vb_backend_option_check (const VbDeviceConfig *d, const VbRunning *r, const char *backend,
                         GError **error)
{
  if (strcmp (backend, "auto") != 0 && vb_backend_lookup (backend) == NULL)
    {
      g_autofree char *known = vb_backends_known_names ();
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("option 'backend': '%s' is not known (known: %s)"), backend, known);
      return FALSE;
    }
  if (r && strcmp (backend, r->backend) != 0 && strcmp (backend, "auto") != 0)
    {
      /* every engine backend makes its own kind of node: /dev/loopN is not
       * /dev/nbdN, so a move would take the node away from its users */
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   _ ("device '%s' is started on backend %s (%s); backend %s would give it another "
                      "block node, which a started device cannot change: stop it, reconfigure, "
                      "start it"),
                   d->name, r->backend, r->block_device, backend);
      return FALSE;
    }
  return TRUE;
}

gboolean
vb_mutate_reconfigure (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
                       GError **error)
{
  VbRequest *req = user_data;
  VbDeviceConfig *d = lookup_or_fail (candidate, req->name, error);
  g_autofree const char **add = NULL;
  g_autofree const char **remove = NULL;
  const char *backend = NULL;
  guint32 timeout = RECONFIGURE_TIMEOUT_MS;
  const VbRunning *r;
  VbDeviceConfig *nd;
  g_autoptr (VbGraph) graph = NULL;
  gint at;

  if (d == NULL)
    return FALSE;
  r = g_hash_table_lookup (daemon->running, d->uuid);
  g_variant_lookup (req->options, "add", "^a&s", &add);
  g_variant_lookup (req->options, "remove", "^a&s", &remove);
  g_variant_lookup (req->options, "backend", "&s", &backend);
  g_variant_lookup (req->options, "timeout", "u", &timeout);
  if (timeout == 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("option 'timeout': must be at least 1 (milliseconds)"));
      return FALSE;
    }
  if (backend && !vb_backend_option_check (d, r, backend, error))
    return FALSE;
  if (backend
      && (req->driver == NULL || req->driver[0] == '\0' || strcmp (req->driver, d->driver) == 0)
      && add == NULL && remove == NULL
      && (req->attributes == NULL || g_hash_table_size (req->attributes) == 0))
    {
      /* only the backend, of a stopped device (or the same one) */
      g_free (d->backend);
      d->backend = g_strdup (backend);
      vb_op_intent_touch (intent, d->name);
      return TRUE;
    }
  VbReconfigRequest request = {
    .driver = req->driver,
    .attributes = req->attributes,
    .add = add,
    .remove = remove,
  };
  nd = vb_reconfig_plan (d, &request, error);
  if (nd == NULL)
    return FALSE;
  if (backend)
    {
      g_free (nd->backend);
      nd->backend = g_strdup (backend);
    }
  at = vb_state_index_of (candidate, d->name);
  vb_device_config_free (candidate->devices->pdata[at]);
  candidate->devices->pdata[at] = nd;
  graph = vb_graph_new (candidate);
  if (!vb_graph_check (graph, error))
    return FALSE;
  vb_op_intent_reconfigure (intent, nd->name, timeout);
  vb_op_intent_touch (intent, nd->name);
  return TRUE;
}

/* SetFaulty: the engine writes the survivors' superblocks, so the call
 * runs on the op's worker (run_faults), never on the main loop. */
gboolean
vb_mutate_fault (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
                 GError **error)
{
  VbRequest *req = user_data;
  VbDeviceConfig *d = lookup_or_fail (candidate, req->name, error);

  if (d == NULL)
    return FALSE;
  if (!g_hash_table_contains (daemon->running, d->uuid))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED, _ ("device '%s' is not started"),
                   d->name);
      return FALSE;
    }
  vb_op_intent_fault (intent, d->name, req->index, NULL);
  return TRUE;
}

/* Remove: a spare, a component replaced by a spare (role "faulty"), or
 * any component of a stopped device that keeps enough of them. */
gboolean
vb_mutate_remove (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
                  GError **error)
{
  VbRequest *req = user_data;
  VbDeviceConfig *d = lookup_or_fail (candidate, req->name, error);
  VbComponentConfig *c = NULL;
  guint index = 0;

  if (d == NULL)
    return FALSE;
  for (guint i = 0; i < d->components->len; i++)
    if (strcmp (((VbComponentConfig *) d->components->pdata[i])->source, req->source) == 0)
      {
        c = d->components->pdata[i];
        index = i;
      }
  if (c == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND,
                   _ ("component '%s': not a component of '%s'"), req->source, d->name);
      return FALSE;
    }
  if (vb_component_config_is_slot (c))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                   _ ("component '%s' holds slot %s of '%s': only a spare or a replaced (faulty) "
                      "component can be removed; removing a slot is a reconfiguration"),
                   req->source, c->role, d->name);
      return FALSE;
    }
  g_ptr_array_remove_index (d->components, index);
  vb_op_intent_touch (intent, d->name);
  return TRUE;
}
