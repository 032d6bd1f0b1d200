/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Device.WaitState: a caller held until the device's State is the one it
 * names, looked at each time the objects are published again
 * (vb_objects_sync), or until its timeout. Main thread only. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-device.h"
#include "vb-objects.h"
#include "vb-request.h"

#include <string.h>

typedef struct {
  VbDaemon *daemon;
  GDBusMethodInvocation *invocation;
  char *device;
  char *state;
  guint timeout_ms;
  guint timeout_id;
} StateWait;

static GPtrArray *waits; /* StateWait*, those not answered yet */

static const char *const states[]
    = { "configuring", "ready", "active", "degraded", "failed", "stopped", NULL };
static const char *const wait_options[] = { "timeout:u", NULL };

/* Answers @w (@error NULL: reached) and forgets it. */
static void
wait_end (StateWait *w, const GError *error)
{
  g_ptr_array_remove (waits, w);
  g_clear_handle_id (&w->timeout_id, g_source_remove);
  if (error)
    vb_invocation_return_gerror (w->invocation, error);
  else
    g_dbus_method_invocation_return_value (w->invocation, NULL);
  g_free (w->device);
  g_free (w->state);
  g_free (w);
}

/* NULL while @w waits on; the answer otherwise (OK: an empty error). */
static gboolean
wait_over (StateWait *w, GError **error)
{
  const VbDeviceConfig *d = vb_state_lookup (w->daemon->desired, w->device);

  if (d == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND, _ ("device '%s' was deleted"), w->device);
      return TRUE;
    }
  return strcmp (vb_daemon_device_state (w->daemon, d), w->state) == 0;
}

void
vb_device_waits_check (VbDaemon *daemon)
{
  for (guint i = waits ? waits->len : 0; i > 0; i--)
    {
      StateWait *w = waits->pdata[i - 1];
      g_autoptr (GError) error = NULL;
      if (w->daemon == daemon && wait_over (w, &error))
        wait_end (w, error);
    }
}

static gboolean
timed_out (gpointer data)
{
  StateWait *w = data;
  const VbDeviceConfig *d = vb_state_lookup (w->daemon->desired, w->device);
  g_autoptr (GError) error = NULL;

  w->timeout_id = 0;
  g_set_error (&error, VB_ERROR, VB_ERROR_FAILED,
               _ ("timed out after %u ms: device '%s' is %s, not %s"), w->timeout_ms, w->device,
               d ? vb_daemon_device_state (w->daemon, d) : "gone", w->state);
  wait_end (w, error);
  return G_SOURCE_REMOVE;
}

gboolean
vb_device_handle_wait_state (VbDBusDevice *iface, GDBusMethodInvocation *inv, const char *state,
                             GVariant *options, VbDaemon *daemon)
{
  g_autoptr (GError) error = NULL;
  StateWait *w;

  if (!vb_options_check (options, wait_options, &error))
    {
      vb_invocation_return_gerror (inv, error);
      return TRUE;
    }
  if (!g_strv_contains (states, state))
    {
      g_autofree char *known = g_strjoinv (", ", (char **) states);
      g_dbus_method_invocation_return_error (inv, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                                             _ ("'%s' is not a device state (%s)"), state, known);
      return TRUE;
    }
  if (waits == NULL)
    waits = g_ptr_array_new ();
  w = g_new0 (StateWait, 1);
  w->daemon = daemon;
  w->invocation = inv;
  w->device = g_strdup (vb_dbus_device_get_name (iface));
  w->state = g_strdup (state);
  g_ptr_array_add (waits, w);
  if (wait_over (w, &error))
    {
      wait_end (w, error);
      return TRUE;
    }
  if (g_variant_lookup (options, "timeout", "u", &w->timeout_ms))
    w->timeout_id = g_timeout_add (w->timeout_ms, timed_out, w);
  return TRUE;
}
