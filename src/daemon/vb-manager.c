/* org.vblk.VBlk1.Manager: CreateDevice, Apply, Scan, and the properties
 * describing drivers and backends. */
#include "config.h"

#include "vb-request.h"

#include <glib/gi18n.h>
#include <string.h>

static const char *const create_options[] = { "backend:s", "start:b", "autostart:b", NULL };

static gboolean
mutate_create (VbDaemon *daemon, VbState *candidate, gpointer user_data, GPtrArray *touched,
               GError **error)
{
  VbRequest *req = user_data;
  const VbDriver *driver;
  g_autoptr (VbDeviceConfig) d = NULL;
  g_autoptr (VbGraph) graph = NULL;
  g_autofree char *backend = NULL;
  g_autofree char *uuid = vb_uuid_new ();
  GHashTable *resolved;

  if (!vb_name_is_valid (req->name, "name", error))
    return FALSE;
  if (vb_state_lookup (candidate, req->name))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_ALREADY_EXISTS, "device '%s' already exists",
                   req->name);
      return FALSE;
    }
  driver = vb_driver_lookup (req->driver);
  if (driver == NULL)
    {
      g_autofree char *known = vb_drivers_known_names ();
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, "driver '%s': unknown (known: %s)",
                   req->driver, known);
      return FALSE;
    }
  resolved = vb_driver_resolve_attributes (driver, NULL, req->attributes, error);
  if (resolved == NULL)
    return FALSE;
  if (!g_variant_lookup (req->options, "backend", "s", &backend))
    backend = g_strdup ("auto");
  if (strcmp (backend, "auto") != 0 && vb_backend_choose (backend, driver, error) == NULL)
    {
      g_hash_table_unref (resolved);
      return FALSE;
    }

  d = vb_device_config_new (req->name, uuid, driver->name, backend);
  g_hash_table_unref (d->attributes);
  d->attributes = resolved;
  d->autostart = vb_options_get_bool (req->options, "autostart", TRUE);
  for (guint i = 0; req->components[i]; i++)
    {
      const char *source = req->components[i];
      VbSourceKind kind;
      g_autofree char *role = g_strdup_printf ("%u", i);
      g_autofree char *cuuid = vb_uuid_new ();

      if (!vb_source_parse (source, &kind, NULL, error))
        return FALSE;
      for (guint j = 0; j < i; j++)
        if (strcmp (req->components[j], source) == 0)
          {
            g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, "component '%s': given twice",
                         source);
            return FALSE;
          }
      g_ptr_array_add (d->components, vb_component_config_new (source, role, cuuid));
    }
  if (d->components->len > driver->max_components)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   "components: driver '%s' takes at most %u, %u given", driver->name,
                   driver->max_components, d->components->len);
      return FALSE;
    }

  g_ptr_array_add (candidate->devices, g_steal_pointer (&d));
  graph = vb_graph_new (candidate);
  if (!vb_graph_check (graph, error))
    return FALSE;
  g_ptr_array_add (touched, g_strdup (req->name));
  if (vb_options_get_bool (req->options, "start", FALSE))
    vb_request_mark_started (candidate, req->name, touched);
  req->result_path = vb_device_object_path (req->name);
  return TRUE;
}

static void
create_authorized (VbDaemon *daemon, GDBusMethodInvocation *invocation, gpointer user_data)
{
  VbRequest *req = user_data;
  g_autoptr (GError) error = NULL;

  if (!vb_options_check (req->options, create_options, &error))
    {
      vb_invocation_return_gerror (invocation, error);
      vb_request_free (req);
      return;
    }
  vb_daemon_submit (daemon, mutate_create, VB_OP_CHANGE, "create:after-persist", vb_request_done,
                    req, (GDestroyNotify) vb_request_free);
}

static gboolean
handle_create_device (VbDBusManager *iface, GDBusMethodInvocation *invocation, const char *name,
                      const char *driver, GVariant *attributes, const char *const *components,
                      GVariant *options, VbDaemon *daemon)
{
  VbRequest *req = vb_request_new (invocation, name, options);

  req->driver = g_strdup (driver);
  req->attributes = vb_attributes_from_variant (attributes);
  req->components = g_strdupv ((char **) components);
  vb_auth_check (daemon, invocation, "org.vblk.manage", name, create_authorized, req,
                 (GDestroyNotify) vb_request_free);
  return TRUE;
}

static gboolean
handle_apply (VbDBusManager *iface, GDBusMethodInvocation *invocation, const char *json,
              GVariant *options, VbDaemon *daemon)
{
  g_dbus_method_invocation_return_error (invocation, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                                         _ ("Apply is not in this version; use CreateDevice"));
  return TRUE;
}

static gboolean
handle_scan (VbDBusManager *iface, GDBusMethodInvocation *invocation, GVariant *options,
             VbDaemon *daemon)
{
  g_dbus_method_invocation_return_error (
      invocation, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
      _ ("Scan needs on-component metadata, which this version lacks"));
  return TRUE;
}

static GVariant *
drivers_variant (void)
{
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a{sa(sssb)}"));
  for (const VbDriver *const *d = vb_drivers (); *d; d++)
    {
      GVariantBuilder attrs;
      static const char *const types[] = { "bool", "uint", "size", "choice" };
      g_variant_builder_init (&attrs, G_VARIANT_TYPE ("a(sssb)"));
      for (const VbAttrSpec *a = (*d)->attributes; a && a->name; a++)
        g_variant_builder_add (&attrs, "(sssb)", a->name, types[a->type], a->default_value,
                               a->online);
      g_variant_builder_add (&b, "{sa(sssb)}", (*d)->name, &attrs);
    }
  return g_variant_builder_end (&b);
}

static GVariant *
backends_variant (void)
{
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE ("a{s(bs)}"));
  for (const VbBackend *const *be = vb_backends (); *be; be++)
    {
      g_autofree char *reason = NULL;
      gboolean ok = (*be)->available (&reason);
      g_variant_builder_add (&b, "{s(bs)}", (*be)->name, ok, ok ? "" : reason);
    }
  return g_variant_builder_end (&b);
}

void
vb_manager_export (VbDaemon *daemon)
{
  g_autoptr (VbDBusObjectSkeleton) object = vb_dbus_object_skeleton_new (VB_OBJECT_ROOT "/Manager");

  daemon->manager = vb_dbus_manager_skeleton_new ();
  vb_dbus_manager_set_version (daemon->manager, VB_VERSION);
  vb_dbus_manager_set_drivers (daemon->manager, drivers_variant ());
  vb_dbus_manager_set_backends (daemon->manager, backends_variant ());
  g_signal_connect (daemon->manager, "handle-create-device", G_CALLBACK (handle_create_device),
                    daemon);
  g_signal_connect (daemon->manager, "handle-apply", G_CALLBACK (handle_apply), daemon);
  g_signal_connect (daemon->manager, "handle-scan", G_CALLBACK (handle_scan), daemon);
  vb_dbus_object_skeleton_set_manager (object, daemon->manager);
  g_dbus_object_manager_server_export (daemon->object_manager, G_DBUS_OBJECT_SKELETON (object));
}
