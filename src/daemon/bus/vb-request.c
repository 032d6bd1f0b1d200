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

gboolean
vb_options_check (GVariant *options, const char *const *allowed, GError **error)
{
  GVariantIter iter;
  const char *key;
  GVariant *value;

  g_variant_iter_init (&iter, options);
  while (g_variant_iter_next (&iter, "{&sv}", &key, &value))
    {
      gboolean known = FALSE;
      for (guint i = 0; allowed && allowed[i]; i++)
        {
          const char *colon = strchr (allowed[i], ':');
          if (strncmp (allowed[i], key, colon - allowed[i]) != 0 || key[colon - allowed[i]] != '\0')
            continue;
          known = TRUE;
          if (strcmp (g_variant_get_type_string (value), colon + 1) != 0)
            {
              g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                           _ ("option '%s': expected type '%s', got '%s'"), key, colon + 1,
                           g_variant_get_type_string (value));
              g_variant_unref (value);
              return FALSE;
            }
        }
      g_variant_unref (value);
      if (!known)
        {
          g_autofree char *list = g_strjoinv (", ", (char **) allowed);
          g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                       _ ("option '%s': unknown (known: %s)"), key, *list ? list : "none");
          return FALSE;
        }
    }
  return TRUE;
}

GHashTable *
vb_attributes_from_variant (GVariant *attributes)
{
  GHashTable *h = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  GVariantIter iter;
  const char *k, *v;

  g_variant_iter_init (&iter, attributes);
  while (g_variant_iter_next (&iter, "{&s&s}", &k, &v))
    g_hash_table_insert (h, g_strdup (k), g_strdup (v));
  return h;
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

gboolean
vb_options_get_bool (GVariant *options, const char *key, gboolean fallback)
{
  gboolean value;

  if (options && g_variant_lookup (options, key, "b", &value))
    return value;
  return fallback;
}
