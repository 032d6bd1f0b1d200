/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* org.vblk.VBlk1.Device and .Component method handlers. Each one:
 * polkit check, then argument checks, then a change submitted through the
 * reconciler (the change itself: vb-device-mutate.c), then the invocation
 * completed exactly once. */
#include "config.h"

#include "vb-auth.h"
#include "vb-device.h"
#include "vb-device-mutate.h"
#include "vb-engine-jobs.h"
#include "vb-exports.h"
#include "vb-hotplug.h"
#include "vb-reconfig.h"
#include "vb-request.h"

#include <glib/gi18n.h>
#include <errno.h>
#include <string.h>

static const char *const recursive_only[] = { "recursive:b", NULL };

/* the common shape: authorize, check options, submit */

typedef struct {
  const char *action;
  const char *const *options;
  VbMutateFunc mutate;
  const char *what; /* the request's name, for the reconciler */
  VbOpMode mode;
  gboolean after_events; /* submitted once vblkd's pending block events are decided */
  const char *job;       /* the Job it runs as, or NULL */
} Method;

static const Method method_start = {
  "org.vblk.start-stop", recursive_only, vb_mutate_start, "start", VB_OP_CHANGE, TRUE, "start"
};
static const Method method_stop = { "org.vblk.start-stop", recursive_only, vb_mutate_stop, "stop",
                                    VB_OP_CHANGE,          FALSE,          "stop" };
static const Method method_delete = { "org.vblk.delete", recursive_only, vb_mutate_delete, "delete",
                                      VB_OP_CHANGE,      FALSE,          "delete" };
static const char *const no_options[] = { NULL };
static const Method method_set = { "org.vblk.manage", no_options, vb_mutate_set_attributes, "set" };
static const char *const add_options[] = { "role:s", NULL };
static const char *const export_options[]
    = { "listen:s", "stop:b", "tls:s", "tls-psk:s", "tls-certs:s", NULL };
static const Method method_export
    = { "org.vblk.manage", export_options, vb_mutate_export, "export" };
static const Method method_export_tcp
    = { "org.vblk.export", export_options, vb_mutate_export, "export" };
static const Method method_add
    = { "org.vblk.manage", add_options, vb_mutate_add_component, "add", VB_OP_CHANGE, TRUE };
static const char *const reconfigure_options[]
    = { "add:as", "remove:as", "backend:s", "timeout:u", NULL };
static const Method method_reconfigure
    = { "org.vblk.manage", reconfigure_options, vb_mutate_reconfigure,
        "reconfigure",     VB_OP_RECONFIGURE,   FALSE,
        "reconfigure" };

typedef struct {
  const Method *method;
  VbRequest *req;
  VbDaemon *daemon; /* a start or an add waiting for events to settle */
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
  /* a job for a device that is there (the op refuses the others at once) */
  if (p->method->job && vb_state_lookup (daemon->desired, req->name))
    vb_request_start_job (req, daemon, p->method->job);
  vb_daemon_submit (daemon, req->name, p->method->mutate, p->method->mode, p->method->what,
                    vb_request_done, req, (GDestroyNotify) vb_request_free);
  g_free (p);
}

/* A start and an add go after the block events vblkd has been told of:
 * one may say where a component is now (torture seed 3, 120-s run, step
 * 242: a leg plugged back at a new number just before the start; the
 * start found the old number empty and a spare took the slot). An add
 * names a component back at a new number by that number. */
static void
authorized_when_settled (gpointer user_data, gpointer unused)
{
  Pending *p = user_data;

  authorized (p->daemon, p->req->invocation, p);
}

static void
authorized_after_events (VbDaemon *daemon, GDBusMethodInvocation *invocation, gpointer user_data)
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
                 method->after_events ? authorized_after_events : authorized, p,
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
                                             _ ("no device named '%s'"), name);
      return;
    }
  if (r == NULL)
    {
      g_dbus_method_invocation_return_error (inv, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                                             _ ("device '%s' is not started"), d->name);
      return;
    }
  if (backend == NULL || backend->engine == NULL)
    {
      /* (md's own check, sync_action, is not driven by vblkd yet) */
      g_dbus_method_invocation_return_error (
          inv, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
          _ ("device '%s' runs on backend '%s': vblkd checks only devices on the engine"), d->name,
          r->backend);
      return;
    }
  backend->engine->check (r->block_device, repair, &id, &failed);
  if (g_error_matches (failed, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED))
    g_dbus_method_invocation_return_error (
        inv, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
        _ ("device '%s' (driver '%s') has no redundancy: there are no copies to compare"), d->name,
        d->driver);
  else if (g_error_matches (failed, G_IO_ERROR, G_IO_ERROR_BUSY))
    g_dbus_method_invocation_return_error (inv, VB_ERROR, VB_ERROR_BUSY,
                                           _ ("device '%s' runs another job; wait for it first"),
                                           d->name);
  else if (failed)
    g_dbus_method_invocation_return_error (inv, VB_ERROR, VB_ERROR_FAILED, _ ("device '%s': %s"),
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
  g_signal_connect (device, "handle-wait-state", G_CALLBACK (vb_device_handle_wait_state), daemon);
}

const VbDeviceConfig *
vb_component_of (VbDaemon *daemon, GDBusMethodInvocation *inv, guint *index, GError **error)
{
  const char *path = g_dbus_method_invocation_get_object_path (inv);
  const char *slash = strrchr (path, '/');
  g_autofree char *device_path = NULL;

  for (guint i = 0; i < daemon->desired->devices->len; i++)
    {
      const VbDeviceConfig *d = daemon->desired->devices->pdata[i];
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
  g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND, _ ("no component at %s"), path);
  return NULL;
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
      || (d = vb_component_of (daemon, inv, &index, &error)) == NULL)
    {
      vb_invocation_return_gerror (inv, error);
      return;
    }
  /* (an earlier going away of its disk is no return to re-add now) */
  vb_hotplug_forget_gone (((const VbComponentConfig *) d->components->pdata[index])->uuid);
  req = vb_request_new (inv, d->name, options);
  req->index = index;
  vb_daemon_submit (daemon, d->name, vb_mutate_fault, VB_OP_CHANGE, NULL, vb_request_done, req,
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

static const Method method_remove
    = { "org.vblk.manage", no_options, vb_mutate_remove, "remove:after-persist" };

static gboolean
handle_remove (VbDBusComponent *iface, GDBusMethodInvocation *inv, GVariant *options,
               VbDaemon *daemon)
{
  g_autoptr (GError) error = NULL;
  guint index;
  const VbDeviceConfig *d = vb_component_of (daemon, inv, &index, &error);

  if (d == NULL)
    {
      vb_invocation_return_gerror (inv, error);
      return TRUE;
    }
  dispatch (daemon, inv, d->name, options, &method_remove, NULL,
            ((VbComponentConfig *) d->components->pdata[index])->source);
  return TRUE;
}

void
vb_component_connect_handlers (VbDaemon *daemon, VbDBusComponent *component)
{
  g_signal_connect (component, "handle-set-faulty", G_CALLBACK (handle_set_faulty), daemon);
  g_signal_connect (component, "handle-remove", G_CALLBACK (handle_remove), daemon);
  g_signal_connect (component, "handle-replace", G_CALLBACK (vb_component_handle_replace), daemon);
}
