/* org.vblk.VBlk1.Device and .Component method handlers. Each one:
 * polkit check, then argument checks, then a change submitted through the
 * reconciler, then the invocation completed exactly once. */
#include "config.h"

#include "vb-auth.h"
#include "vb-device.h"
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
  VbDeviceConfig *d = vb_state_lookup (candidate, name);

  if (d == NULL)
    g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND, "no device named '%s'", name);
  return d;
}

static const char *const recursive_only[] = { "recursive:b", NULL };

/* Start */

static gboolean
mutate_start (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
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

static gboolean
mutate_stop (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
             GError **error)
{
  VbRequest *req = user_data;
  VbDeviceConfig *d = lookup_or_fail (candidate, req->name, error);
  g_autoptr (VbGraph) graph = vb_graph_new (candidate);
  g_auto (GStrv) order = NULL;
  g_autoptr (GString) users = g_string_new (NULL);

  if (d == NULL)
    return FALSE;
  order = vb_graph_stop_order (graph, req->name);
  for (guint i = 0; order[i]; i++)
    {
      VbDeviceConfig *o = vb_state_lookup (candidate, order[i]);
      if (o != d && o && (o->started || g_hash_table_contains (daemon->running, o->uuid)))
        g_string_append_printf (users, "%s%s", users->len ? ", " : "", o->name);
    }
  if (users->len && !vb_options_get_bool (req->options, "recursive", FALSE))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                   "device '%s' is used by %s (stop those first, or use recursive)", req->name,
                   users->str);
      return FALSE;
    }
  for (guint i = 0; order[i]; i++)
    {
      VbDeviceConfig *o = vb_state_lookup (candidate, order[i]);
      o->started = FALSE;
      vb_op_intent_touch (intent, o->name);
    }
  return TRUE;
}

/* Delete */

static gboolean
mutate_delete (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
               GError **error)
{
  VbRequest *req = user_data;
  VbDeviceConfig *d = lookup_or_fail (candidate, req->name, error);
  g_autoptr (VbGraph) graph = vb_graph_new (candidate);
  g_auto (GStrv) order = NULL;

  if (d == NULL)
    return FALSE;
  order = vb_graph_stop_order (graph, req->name);
  if (order[0] && order[1] && !vb_options_get_bool (req->options, "recursive", FALSE))
    {
      g_autoptr (GString) users = g_string_new (NULL);
      for (guint i = 0; order[i + 1]; i++)
        g_string_append_printf (users, "%s%s", i ? ", " : "", order[i]);
      g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                   "device '%s' is used by %s (delete those first, or use recursive)", req->name,
                   users->str);
      return FALSE;
    }
  for (guint i = 0; order[i]; i++)
    {
      g_ptr_array_remove_index (candidate->devices, vb_state_index_of (candidate, order[i]));
      vb_op_intent_touch (intent, order[i]);
    }
  return TRUE;
}

/* SetAttributes */

static gboolean
mutate_set_attributes (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
                       GError **error)
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
                           "attribute '%s' cannot change while '%s' is started (stop it first)",
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
          g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                       "component '%s' was replaced in its slot of '%s' (a spare took it): remove "
                       "it, then add it again as a spare if it is to serve",
                       source, d->name);
          return FALSE;
        }
    }
  if (g_hash_table_contains (daemon->running, d->uuid) && g_strcmp0 (role, "spare") != 0
      && !is_slot_source (d, source))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   "device '%s' is started: adding a component to a started device needs "
                   "online reconfiguration, which driver '%s' does not have (a spare can be "
                   "added: --spare)",
                   d->name, d->driver);
      return FALSE;
    }
  if (g_strcmp0 (role, "spare") == 0
      && !vb_driver_takes_spares (vb_driver_lookup (d->driver), d->attributes))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   "device '%s': spares need redundancy and on-component metadata (driver "
                   "raid1 or raid10 with metadata=vblk; this is '%s')",
                   d->name, d->driver);
      return FALSE;
    }
  return TRUE;
}

static gboolean
mutate_add_component (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
                      GError **error)
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
                       "component '%s': already a component of '%s'", req->source, d->name);
          return FALSE;
        }
      if (g_strcmp0 (c->role, "spare") != 0)
        slots++;
    }
  if (role && strcmp (role, "spare") != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   "option 'role': '%s' is not allowed (allowed: spare)", role);
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

static gboolean
mutate_export (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
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
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED, "protocol '%s': only nbd is known",
                   req->source);
      return FALSE;
    }
  if (!g_variant_lookup (req->options, "listen", "s", &listen))
    listen = g_strdup_printf ("unix:%s/nbd/%s.sock", daemon->run_dir, d->name);
  spec = g_strconcat ("nbd ", listen, NULL);
  if (!vb_export_spec_parse (spec, NULL, error))
    return FALSE;
  if (stop)
    {
      if (!g_ptr_array_find_with_equal_func (d->exports, spec, g_str_equal, &at))
        {
          g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND, "device '%s' is not exported on %s",
                       d->name, listen);
          return FALSE;
        }
      g_ptr_array_remove_index (d->exports, at);
    }
  else
    {
      for (guint i = 0; i < candidate->devices->len; i++)
        {
          VbDeviceConfig *o = candidate->devices->pdata[i];
          if (g_ptr_array_find_with_equal_func (o->exports, spec, g_str_equal, NULL))
            {
              g_set_error (error, VB_ERROR, VB_ERROR_ALREADY_EXISTS,
                           "%s already serves device '%s'", listen, o->name);
              return FALSE;
            }
        }
      g_ptr_array_add (d->exports, g_steal_pointer (&spec));
    }
  vb_op_intent_touch (intent, d->name);
  return TRUE;
}

/* Reconfigure */

#define RECONFIGURE_TIMEOUT_MS 10000

/* Reconfigure's option 'backend': one built in here, and for a started
 * device the one it runs on. */
static gboolean
check_backend_option (const VbDeviceConfig *d, const VbRunning *r, const char *backend,
                      GError **error)
{
  if (strcmp (backend, "auto") != 0 && vb_backend_lookup (backend) == NULL)
    {
      g_autofree char *known = vb_backends_known_names ();
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   "option 'backend': '%s' is not known (known: %s)", backend, known);
      return FALSE;
    }
  if (r && strcmp (backend, r->backend) != 0 && strcmp (backend, "auto") != 0)
    {
      /* every engine backend makes its own kind of node: /dev/loopN is not
       * /dev/nbdN, so a move would take the node away from its users */
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   "device '%s' is started on backend %s (%s); backend %s would give it another "
                   "block node, which a started device cannot change: stop it, reconfigure, "
                   "start it",
                   d->name, r->backend, r->block_device, backend);
      return FALSE;
    }
  return TRUE;
}

static gboolean
mutate_reconfigure (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
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
                   "option 'timeout': must be at least 1 (milliseconds)");
      return FALSE;
    }
  if (backend && !check_backend_option (d, r, backend, error))
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

/* the common shape: authorize, check options, submit */

typedef struct {
  const char *action;
  const char *const *options;
  VbMutateFunc mutate;
  const char *what; /* the request's name, for the reconciler */
  VbOpMode mode;
} Method;

static const Method method_start = { "org.vblk.start-stop", recursive_only, mutate_start, "start" };
static const Method method_stop = { "org.vblk.start-stop", recursive_only, mutate_stop, "stop" };
static const Method method_delete = { "org.vblk.delete", recursive_only, mutate_delete, "delete" };
static const char *const no_options[] = { NULL };
static const Method method_set = { "org.vblk.manage", no_options, mutate_set_attributes, "set" };
static const char *const add_options[] = { "role:s", NULL };
static const char *const export_options[] = { "listen:s", "stop:b", NULL };
static const Method method_export = { "org.vblk.manage", export_options, mutate_export, "export" };
static const Method method_export_tcp
    = { "org.vblk.export", export_options, mutate_export, "export" };
static const Method method_add = { "org.vblk.manage", add_options, mutate_add_component, "add" };
static const char *const reconfigure_options[]
    = { "add:as", "remove:as", "backend:s", "timeout:u", NULL };
static const Method method_reconfigure = { "org.vblk.manage", reconfigure_options,
                                           mutate_reconfigure, "reconfigure", VB_OP_RECONFIGURE };

typedef struct {
  const Method *method;
  VbRequest *req;
  VbDaemon *daemon; /* a start waiting for events to settle */
} Pending;

static void
pending_free (Pending *p)
{
  vb_request_free (p->req);
  g_free (p);
}

static void
authorized (VbDaemon *daemon, GDBusMethodInvocation *invocation, gpointer user_data)
{
  Pending *p = user_data;
  g_autoptr (GError) error = NULL;
  VbRequest *req;

  if (!vb_options_check (p->req->options, p->method->options, &error))
    {
      vb_invocation_return_gerror (invocation, error);
      pending_free (p);
      return;
    }
  req = g_steal_pointer (&p->req);
  vb_daemon_submit (daemon, req->name, p->method->mutate, p->method->mode, p->method->what,
                    vb_request_done, req, (GDestroyNotify) vb_request_free);
  g_free (p);
}

/* A start goes after the block events vblkd has been told of: one may say
 * where a component is now (torture seed 3, 120-s run, step 242: a leg
 * plugged back at a new number just before the start; the start found the
 * old number empty and a spare took the slot). */
static void
authorized_when_settled (gpointer user_data, gpointer unused)
{
  Pending *p = user_data;

  authorized (p->daemon, p->req->invocation, p);
}

static void
authorized_start (VbDaemon *daemon, GDBusMethodInvocation *invocation, gpointer user_data)
{
  Pending *p = user_data;

  p->daemon = daemon;
  vb_hotplug_when_settled (authorized_when_settled, p);
}

static void
dispatch (VbDaemon *daemon, GDBusMethodInvocation *invocation, const char *name, GVariant *options,
          const Method *method, GVariant *attributes, const char *source)
{
  Pending *p = g_new0 (Pending, 1);

  p->method = method;
  p->req = vb_request_new (invocation, name, options);
  if (attributes)
    p->req->attributes = vb_attributes_from_variant (attributes);
  p->req->source = g_strdup (source);
  vb_auth_check (daemon, invocation, method->action, name,
                 method == &method_start ? authorized_start : authorized, p,
                 (GDestroyNotify) pending_free);
}

static gboolean
handle_start (VbDBusDevice *iface, GDBusMethodInvocation *inv, GVariant *options, VbDaemon *daemon)
{
  dispatch (daemon, inv, vb_dbus_device_get_name (iface), options, &method_start, NULL, NULL);
  return TRUE;
}

static gboolean
handle_stop (VbDBusDevice *iface, GDBusMethodInvocation *inv, GVariant *options, VbDaemon *daemon)
{
  dispatch (daemon, inv, vb_dbus_device_get_name (iface), options, &method_stop, NULL, NULL);
  return TRUE;
}

static gboolean
handle_delete (VbDBusDevice *iface, GDBusMethodInvocation *inv, GVariant *options, VbDaemon *daemon)
{
  dispatch (daemon, inv, vb_dbus_device_get_name (iface), options, &method_delete, NULL, NULL);
  return TRUE;
}

static gboolean
handle_set_attributes (VbDBusDevice *iface, GDBusMethodInvocation *inv, GVariant *attributes,
                       GVariant *options, VbDaemon *daemon)
{
  dispatch (daemon, inv, vb_dbus_device_get_name (iface), options, &method_set, attributes, NULL);
  return TRUE;
}

static gboolean
handle_add_component (VbDBusDevice *iface, GDBusMethodInvocation *inv, const char *source,
                      GVariant *options, VbDaemon *daemon)
{
  dispatch (daemon, inv, vb_dbus_device_get_name (iface), options, &method_add, NULL, source);
  return TRUE;
}

static gboolean
handle_reconfigure (VbDBusDevice *iface, GDBusMethodInvocation *inv, const char *driver,
                    GVariant *attributes, GVariant *options, VbDaemon *daemon)
{
  Pending *p = g_new0 (Pending, 1);

  p->method = &method_reconfigure;
  p->req = vb_request_new (inv, vb_dbus_device_get_name (iface), options);
  p->req->attributes = vb_attributes_from_variant (attributes);
  p->req->driver = g_strdup (driver);
  vb_auth_check (daemon, inv, method_reconfigure.action, p->req->name, authorized, p,
                 (GDestroyNotify) pending_free);
  return TRUE;
}

static gboolean
handle_export (VbDBusDevice *iface, GDBusMethodInvocation *inv, const char *protocol,
               GVariant *options, VbDaemon *daemon)
{
  const char *listen = NULL;

  /* network exposure is its own action; a local socket is management */
  g_variant_lookup (options, "listen", "&s", &listen);
  dispatch (daemon, inv, vb_dbus_device_get_name (iface), options,
            listen && g_str_has_prefix (listen, "tcp:") ? &method_export_tcp : &method_export, NULL,
            protocol);
  return TRUE;
}

/* Check: compare every copy (option repair (b): rewrite mismatches). */
static const char *const check_options[] = { "repair:b", NULL };

static void
check_authorized (VbDaemon *daemon, GDBusMethodInvocation *inv, gpointer user_data)
{
  g_autofree char *name = user_data;
  GVariant *options = g_variant_get_child_value (g_dbus_method_invocation_get_parameters (inv), 0);
  g_autoptr (GVariant) owned = options;
  g_autoptr (GError) error = NULL;
  const VbDeviceConfig *d = vb_state_lookup (daemon->desired, name);
  const VbRunning *r = d ? g_hash_table_lookup (daemon->running, d->uuid) : NULL;
  const VbBackend *backend = r ? vb_backend_lookup (r->backend) : NULL;
  gboolean repair = vb_options_get_bool (options, "repair", FALSE);
  g_autoptr (GError) failed = NULL;
  guint64 id = 0;

  if (!vb_options_check (options, check_options, &error))
    {
      vb_invocation_return_gerror (inv, error);
      return;
    }
  if (d == NULL)
    {
      g_dbus_method_invocation_return_error (inv, VB_ERROR, VB_ERROR_NOT_FOUND,
                                             "no device named '%s'", name);
      return;
    }
  if (r == NULL)
    {
      g_dbus_method_invocation_return_error (inv, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                                             "device '%s' is not started", d->name);
      return;
    }
  if (backend == NULL || backend->engine == NULL)
    g_set_error_literal (&failed, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, "no engine");
  else
    backend->engine->check (r->block_device, repair, &id, &failed);
  if (g_error_matches (failed, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED))
    g_dbus_method_invocation_return_error (
        inv, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
        "device '%s' (driver '%s') has no redundancy: there are no copies to compare", d->name,
        d->driver);
  else if (g_error_matches (failed, G_IO_ERROR, G_IO_ERROR_BUSY))
    g_dbus_method_invocation_return_error (
        inv, VB_ERROR, VB_ERROR_BUSY, "device '%s' runs another job; wait for it first", d->name);
  else if (failed)
    g_dbus_method_invocation_return_error (inv, VB_ERROR, VB_ERROR_FAILED, "device '%s': %s",
                                           d->name, failed->message);
  else
    g_dbus_method_invocation_return_value (
        inv, g_variant_new ("(o)",
                            vb_engine_jobs_register (daemon, d, id, repair ? "repair" : "check")));
}

static gboolean
handle_check (VbDBusDevice *iface, GDBusMethodInvocation *inv, GVariant *options, VbDaemon *daemon)
{
  const char *name = vb_dbus_device_get_name (iface);

  vb_auth_check (daemon, inv, "org.vblk.manage", name, check_authorized, g_strdup (name), g_free);
  return TRUE;
}

void
vb_device_connect_handlers (VbDaemon *daemon, VbDBusDevice *device)
{
  g_signal_connect (device, "handle-start", G_CALLBACK (handle_start), daemon);
  g_signal_connect (device, "handle-stop", G_CALLBACK (handle_stop), daemon);
  g_signal_connect (device, "handle-delete", G_CALLBACK (handle_delete), daemon);
  g_signal_connect (device, "handle-set-attributes", G_CALLBACK (handle_set_attributes), daemon);
  g_signal_connect (device, "handle-add-component", G_CALLBACK (handle_add_component), daemon);
  g_signal_connect (device, "handle-reconfigure", G_CALLBACK (handle_reconfigure), daemon);
  g_signal_connect (device, "handle-export", G_CALLBACK (handle_export), daemon);
  g_signal_connect (device, "handle-check", G_CALLBACK (handle_check), daemon);
}

static gboolean
component_not_supported (GDBusMethodInvocation *inv)
{
  g_dbus_method_invocation_return_error (inv, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                                         _ ("removing and replacing components needs "
                                            "on-component metadata, which this version lacks"));
  return TRUE;
}

/* The device and index a component object stands for. */
static VbDeviceConfig *
component_of (VbDaemon *daemon, GDBusMethodInvocation *inv, guint *index, GError **error)
{
  const char *path = g_dbus_method_invocation_get_object_path (inv);
  const char *slash = strrchr (path, '/');
  g_autofree char *device_path = NULL;

  for (guint i = 0; i < daemon->desired->devices->len; i++)
    {
      VbDeviceConfig *d = daemon->desired->devices->pdata[i];
      g_free (device_path);
      device_path = vb_device_object_path (d->name);
      if (g_str_has_prefix (path, device_path)
          && strncmp (path + strlen (device_path), "/components/", 12) == 0)
        {
          *index = (guint) g_ascii_strtoull (slash + 1, NULL, 10);
          if (*index < d->components->len)
            return d;
        }
    }
  g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND, "no component at %s", path);
  return NULL;
}

/* SetFaulty: the engine writes the survivors' superblocks, so the call
 * runs on the op's worker (run_faults), never on the main loop. */
static gboolean
mutate_fault (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
              GError **error)
{
  VbRequest *req = user_data;
  VbDeviceConfig *d = lookup_or_fail (candidate, req->name, error);

  if (d == NULL)
    return FALSE;
  if (!g_hash_table_contains (daemon->running, d->uuid))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED, "device '%s' is not started", d->name);
      return FALSE;
    }
  vb_op_intent_fault (intent, d->name, req->index, NULL);
  return TRUE;
}

static void
set_faulty_authorized (VbDaemon *daemon, GDBusMethodInvocation *inv, gpointer user_data)
{
  g_autoptr (GVariant) options = user_data;
  g_autoptr (GError) error = NULL;
  const VbDeviceConfig *d;
  guint index;
  VbRequest *req;

  if (!vb_options_check (options, no_options, &error)
      || (d = component_of (daemon, inv, &index, &error)) == NULL)
    {
      vb_invocation_return_gerror (inv, error);
      return;
    }
  req = vb_request_new (inv, d->name, options);
  req->index = index;
  vb_daemon_submit (daemon, d->name, mutate_fault, VB_OP_CHANGE, NULL, vb_request_done, req,
                    (GDestroyNotify) vb_request_free);
}

static gboolean
handle_set_faulty (VbDBusComponent *iface, GDBusMethodInvocation *inv, GVariant *options,
                   VbDaemon *daemon)
{
  vb_auth_check (daemon, inv, "org.vblk.manage", NULL, set_faulty_authorized,
                 g_variant_ref (options), (GDestroyNotify) g_variant_unref);
  return TRUE;
}

/* Remove: a spare, a component replaced by a spare (role "faulty"), or
 * any component of a stopped device that keeps enough of them. */
static gboolean
mutate_remove (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
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
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND, "component '%s': not a component of '%s'",
                   req->source, d->name);
      return FALSE;
    }
  if (vb_component_config_is_slot (c))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                   "component '%s' holds slot %s of '%s': only a spare or a replaced (faulty) "
                   "component can be removed; removing a slot is a reconfiguration",
                   req->source, c->role, d->name);
      return FALSE;
    }
  g_ptr_array_remove_index (d->components, index);
  vb_op_intent_touch (intent, d->name);
  return TRUE;
}

static const Method method_remove
    = { "org.vblk.manage", no_options, mutate_remove, "remove:after-persist" };

static gboolean
handle_remove (VbDBusComponent *iface, GDBusMethodInvocation *inv, GVariant *options,
               VbDaemon *daemon)
{
  g_autoptr (GError) error = NULL;
  guint index;
  VbDeviceConfig *d = component_of (daemon, inv, &index, &error);

  if (d == NULL)
    {
      vb_invocation_return_gerror (inv, error);
      return TRUE;
    }
  dispatch (daemon, inv, d->name, options, &method_remove, NULL,
            ((VbComponentConfig *) d->components->pdata[index])->source);
  return TRUE;
}

static gboolean
handle_replace (VbDBusComponent *iface, GDBusMethodInvocation *inv, const char *source,
                GVariant *options, VbDaemon *daemon)
{
  return component_not_supported (inv);
}

void
vb_component_connect_handlers (VbDaemon *daemon, VbDBusComponent *component)
{
  g_signal_connect (component, "handle-set-faulty", G_CALLBACK (handle_set_faulty), daemon);
  g_signal_connect (component, "handle-remove", G_CALLBACK (handle_remove), daemon);
  g_signal_connect (component, "handle-replace", G_CALLBACK (handle_replace), daemon);
}
