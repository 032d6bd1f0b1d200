/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Authorization: every changing method asks polkit first, for the caller's
 * bus name, before any work. Interaction only when the caller allows it. */
#include "config.h"

#include "vb-auth.h"

#include <glib/gi18n.h>

typedef struct {
  VbDaemon *daemon;
  GDBusMethodInvocation *invocation;
  char *action_id;
  VbAuthorizedFunc authorized;
  gpointer user_data;
  GDestroyNotify destroy;
} AuthRequest;

static void
auth_request_free (AuthRequest *req)
{
  g_object_unref (req->invocation);
  g_free (req->action_id);
  if (req->destroy)
    req->destroy (req->user_data);
  g_free (req);
}

static void
auth_done (GObject *source, GAsyncResult *result, gpointer data)
{
  AuthRequest *req = data;
  g_autoptr (GError) error = NULL;
  g_autoptr (PolkitAuthorizationResult) res = NULL;

  res = polkit_authority_check_authorization_finish (POLKIT_AUTHORITY (source), result, &error);
  if (res == NULL)
    {
      g_warning ("vblk: polkit check for %s failed: %s", req->action_id, error->message);
      g_dbus_method_invocation_return_error (req->invocation, VB_ERROR, VB_ERROR_NOT_AUTHORIZED,
                                             _ ("Authorization check failed: %s"), error->message);
    }
  else if (!polkit_authorization_result_get_is_authorized (res))
    {
      g_dbus_method_invocation_return_error (
          req->invocation, VB_ERROR, VB_ERROR_NOT_AUTHORIZED,
          polkit_authorization_result_get_is_challenge (res)
              ? _ ("Not authorized for %s (authentication required)")
              : _ ("Not authorized for %s"),
          req->action_id);
    }
  else
    {
      req->authorized (req->daemon, req->invocation, req->user_data);
      req->destroy = NULL; /* the callback owns user_data now */
    }
  auth_request_free (req);
}

void
vb_auth_check (VbDaemon *daemon, GDBusMethodInvocation *invocation, const char *action_id,
               const char *device_name, VbAuthorizedFunc authorized, gpointer user_data,
               GDestroyNotify destroy)
{
  AuthRequest *req = g_new0 (AuthRequest, 1);
  g_autoptr (PolkitSubject) subject = NULL;
  g_autoptr (PolkitDetails) details = polkit_details_new ();
  PolkitCheckAuthorizationFlags flags = POLKIT_CHECK_AUTHORIZATION_FLAGS_NONE;
  GDBusMessage *message = g_dbus_method_invocation_get_message (invocation);

  req->daemon = daemon;
  req->invocation = g_object_ref (invocation);
  req->action_id = g_strdup (action_id);
  req->authorized = authorized;
  req->user_data = user_data;
  req->destroy = destroy;

  if (daemon->bus->authority == NULL)
    {
      g_dbus_method_invocation_return_error (invocation, VB_ERROR, VB_ERROR_NOT_AUTHORIZED,
                                             _ ("Not authorized for %s: polkit is not available"),
                                             action_id);
      auth_request_free (req);
      return;
    }
  if (g_dbus_message_get_flags (message) & G_DBUS_MESSAGE_FLAGS_ALLOW_INTERACTIVE_AUTHORIZATION)
    flags |= POLKIT_CHECK_AUTHORIZATION_FLAGS_ALLOW_USER_INTERACTION;
  if (device_name)
    polkit_details_insert (details, "vblk.device", device_name);
  subject = polkit_system_bus_name_new (g_dbus_method_invocation_get_sender (invocation));
  polkit_authority_check_authorization (daemon->bus->authority, subject, action_id, details, flags,
                                        NULL, auth_done, req);
}

/* The caller's uid, asked of the bus (never blocking the main loop). */
typedef struct {
  VbCallerUidFunc done;
  gpointer user_data;
} UidRequest;

static void
uid_returned (GObject *source, GAsyncResult *result, gpointer data)
{
  UidRequest *req = data;
  g_autoptr (GVariant) reply = NULL;
  g_autoptr (GError) error = NULL;
  guint32 uid = 0;

  reply = g_dbus_connection_call_finish (G_DBUS_CONNECTION (source), result, &error);
  if (reply)
    g_variant_get (reply, "(u)", &uid);
  else
    g_debug ("vblk: the caller's uid: %s", error->message);
  req->done (reply != NULL, uid, req->user_data);
  g_free (req);
}

void
vb_auth_caller_uid (GDBusMethodInvocation *invocation, VbCallerUidFunc done, gpointer user_data)
{
  UidRequest *req = g_new0 (UidRequest, 1);

  req->done = done;
  req->user_data = user_data;
  g_dbus_connection_call (
      g_dbus_method_invocation_get_connection (invocation), "org.freedesktop.DBus",
      "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetConnectionUnixUser",
      g_variant_new ("(s)", g_dbus_method_invocation_get_sender (invocation)),
      G_VARIANT_TYPE ("(u)"), G_DBUS_CALL_FLAGS_NONE, -1, NULL, uid_returned, req);
}
