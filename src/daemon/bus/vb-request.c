/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A D-Bus request on its way through authorize -> submit -> done, and
 * the helpers every method handler shares: options, attributes, errors. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-request.h"

#include <string.h>

VbRequest *
vb_request_new (GDBusMethodInvocation *invocation, const char *name, GVariant *options)
{
  VbRequest *req = g_new0 (VbRequest, 1);

  req->invocation = g_object_ref (invocation);
  req->name = g_strdup (name);
  req->options = options ? g_variant_ref (options) : NULL;
  return req;
}

void
vb_request_clear (VbRequest *req)
{
  g_clear_object (&req->invocation);
  g_clear_pointer (&req->name, g_free);
  g_clear_pointer (&req->options, g_variant_unref);
  g_clear_pointer (&req->attributes, g_hash_table_unref);
  g_clear_pointer (&req->driver, g_free);
  g_clear_pointer (&req->components, g_strfreev);
  g_clear_pointer (&req->source, g_free);
  g_clear_pointer (&req->result_path, g_free);
  g_clear_pointer (&req->job, vb_job_unref);
}

void
vb_request_start_job (VbRequest *req, VbDaemon *daemon, const char *operation)
{
  g_autofree char *path = vb_device_object_path (req->name);
  const char *objects[] = { path, NULL };

  req->job = vb_job_new (daemon, operation, objects, 0, NULL, NULL);
  vb_job_set_started_by (req->job, req->invocation);
}

void
vb_request_free (VbRequest *req)
{
  vb_request_clear (req);
  g_free (req);
}

void
vb_request_done (VbDaemon *daemon, const GError *error, gpointer user_data)
{
  VbRequest *req = user_data;

  if (req->job)
    vb_job_finish (req->job, error ? "failed" : "finished", error ? error->message : NULL);
  if (error)
    vb_invocation_return_gerror (req->invocation, error);
  else if (req->result_path)
    g_dbus_method_invocation_return_value (req->invocation,
                                           g_variant_new ("(o)", req->result_path));
  else
    g_dbus_method_invocation_return_value (req->invocation, NULL);
  g_clear_object (&req->invocation);
}

void
vb_invocation_return_gerror (GDBusMethodInvocation *invocation, const GError *error)
{
  if (error->domain == VB_ERROR)
    g_dbus_method_invocation_return_gerror (invocation, error);
  else
    g_dbus_method_invocation_return_error_literal (invocation, VB_ERROR, VB_ERROR_FAILED,
                                                   error->message);
}
