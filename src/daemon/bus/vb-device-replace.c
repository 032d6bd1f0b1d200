/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Component.Replace: a live component of a started raid1 replaced by a new
 * one while it stays in service, as md's want_replacement does: the new
 * one joins as another copy (an online reconfiguration), is filled by the
 * rebuild, and only once it is in sync does the old one leave (a second
 * reconfiguration). A "replace" Job covers it all; cancelling it, or the
 * new component failing, takes the new one out again and leaves the old
 * where it was. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-auth.h"
#include "vb-device.h"
#include "vb-device-mutate.h"
#include "vb-jobs.h"
#include "vb-objects.h"
#include "vb-request.h"

#include <string.h>

/* the new component's state is looked at this often while it is filled */
#define FILL_LOOK_MS 200

typedef struct {
  VbDaemon *daemon;
  GDBusMethodInvocation *invocation;
  char *device;
  char *old_source;
  char *new_source;
  VbJob *job;
  guint look_id;
  gboolean cancelled;
  GError *why_back; /* set when the new component is being taken out again */
} Replace;

static void
replace_free (Replace *r)
{
  g_clear_handle_id (&r->look_id, g_source_remove);
  g_clear_object (&r->invocation);
  g_free (r->device);
  g_free (r->old_source);
  g_free (r->new_source);
  g_clear_pointer (&r->job, vb_job_unref);
  g_clear_error (&r->why_back);
  g_free (r);
}

/* The end: the caller answered, the job finished. */
static void
replace_end (Replace *r, const GError *error)
{
  if (error == NULL)
    {
      g_autofree char *summary
          = g_strdup_printf ("'%s' replaced by '%s'", r->old_source, r->new_source);
      g_message ("vblk: %s: %s", r->device, summary);
      vb_job_finish (r->job, "finished", summary);
      g_dbus_method_invocation_return_value (r->invocation, NULL);
    }
  else
    {
      vb_job_finish (r->job, r->cancelled ? "cancelled" : "failed", error->message);
      vb_invocation_return_gerror (r->invocation, error);
    }
  replace_free (r);
}

/* One reconfiguration's request (first: Reconfigure's mutate takes it as
 * its own) and the replace it is for. */
typedef struct {
  VbRequest req;
  Replace *replace;
} Step;

static void
step_free (Step *step)
{
  vb_request_clear (&step->req);
  g_free (step);
}

/* The device with @source added (@key "add") or removed ("remove"),
 * through the Reconfigure method's own mutate; then @done. */
static void
reconfigure (Replace *r, const char *key, const char *source, VbOpDone done)
{
  Step *step = g_new0 (Step, 1);
  const char *sources[] = { source, NULL };
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  g_variant_builder_add (&b, "{sv}", key, g_variant_new_strv (sources, -1));
  step->req.options = g_variant_ref_sink (g_variant_builder_end (&b));
  step->req.name = g_strdup (r->device);
  step->replace = r;
  vb_daemon_submit (r->daemon, r->device, vb_mutate_reconfigure, VB_OP_RECONFIGURE, "replace", done,
                    step, (GDestroyNotify) step_free);
}

/* The new component is out again: the old one stayed all along. */
static void
taken_back (VbDaemon *daemon, const GError *error, gpointer user_data)
{
  Replace *r = ((Step *) user_data)->replace;
  g_autoptr (GError) why = g_steal_pointer (&r->why_back);
  g_autoptr (GError) both = NULL;

  if (error)
    both = g_error_new (VB_ERROR, why->code, _ ("%s; taking '%s' out again failed too: %s"),
                        why->message, r->new_source, error->message);
  replace_end (r, both ? both : why);
}

static void
take_back (Replace *r, GError *why)
{
  g_warning ("vblk: %s: replacing '%s': %s; '%s' is taken out again", r->device, r->old_source,
             why->message, r->new_source);
  r->why_back = why;
  reconfigure (r, "remove", r->new_source, taken_back);
}

static void
old_removed (VbDaemon *daemon, const GError *error, gpointer user_data)
{
  Replace *r = ((Step *) user_data)->replace;
  g_autoptr (GError) local = NULL;

  if (error)
    local = g_error_new (VB_ERROR, error->domain == VB_ERROR ? error->code : VB_ERROR_FAILED,
                         _ ("'%s' is in sync, but removing '%s' failed (both serve now): %s"),
                         r->new_source, r->old_source, error->message);
  replace_end (r, local);
}

/* The new component's state, as D-Bus shows it; NULL when the device or
 * the component is gone. */
static const char *
new_state (Replace *r)
{
  const VbDeviceConfig *d = vb_state_lookup (r->daemon->desired, r->device);

  for (guint i = 0; d && i < d->components->len; i++)
    if (strcmp (((VbComponentConfig *) d->components->pdata[i])->source, r->new_source) == 0)
      return vb_component_state_of (r->daemon, d, i);
  return NULL;
}

static gboolean
look (gpointer data)
{
  Replace *r = data;
  const char *state = new_state (r);

  if (r->cancelled)
    {
      r->look_id = 0;
      take_back (r, g_error_new (VB_ERROR, VB_ERROR_FAILED,
                                 _ ("cancelled while '%s' was being filled; '%s' stays"),
                                 r->new_source, r->old_source));
      return G_SOURCE_REMOVE;
    }
  if (g_strcmp0 (state, "rebuilding") == 0)
    return G_SOURCE_CONTINUE;
  r->look_id = 0;
  if (g_strcmp0 (state, "in-sync") == 0)
    reconfigure (r, "remove", r->old_source, old_removed);
  else if (state == NULL)
    {
      g_autoptr (GError) gone = g_error_new_literal (
          VB_ERROR, VB_ERROR_FAILED, _ ("the device or the new component went away meanwhile"));
      replace_end (r, gone);
    }
  else
    take_back (r, g_error_new (VB_ERROR, VB_ERROR_FAILED, _ ("'%s' became %s while being filled"),
                               r->new_source, state));
  return G_SOURCE_REMOVE;
}

static void
new_added (VbDaemon *daemon, const GError *error, gpointer user_data)
{
  Replace *r = ((Step *) user_data)->replace;

  if (error)
    {
      replace_end (r, error);
      return;
    }
  r->look_id = g_timeout_add (FILL_LOOK_MS, look, r);
}

static void
cancel_replace (VbJob *job, gpointer user_data)
{
  ((Replace *) user_data)->cancelled = TRUE;
}

/* What Replace refuses before anything is done. */
static gboolean
check_replace (VbDaemon *daemon, const VbDeviceConfig *d, guint index, const char *source,
               GError **error)
{
  const VbComponentConfig *c = d->components->pdata[index];

  if (!vb_component_config_is_slot (c))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("component '%s' of '%s' is a %s, not in a slot: nothing to replace"),
                   c->source, d->name, c->role);
      return FALSE;
    }
  if (strcmp (d->driver, "raid1") != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   _ ("device '%s' is %s: a component is replaced live by adding the new one as "
                      "another copy until it is in sync, which only raid1 has room for (here: add "
                      "a spare, then fail '%s')"),
                   d->name, d->driver, c->source);
      return FALSE;
    }
  if (!g_hash_table_contains (daemon->running, d->uuid))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   _ ("device '%s' is not started: the new component is filled from the others "
                      "while it runs (or, stopped: vbmgr reconfigure --add, then --remove)"),
                   d->name);
      return FALSE;
    }
  if (!g_path_is_absolute (source) && !g_str_has_prefix (source, "vblk:"))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("'%s' is not an absolute path or vblk:NAME"), source);
      return FALSE;
    }
  return TRUE;
}

static const char *const no_options[] = { NULL };

static void
replace_authorized (VbDaemon *daemon, GDBusMethodInvocation *inv, gpointer user_data)
{
  g_autofree char *source = user_data;
  g_autoptr (GVariant) options = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *path = NULL;
  const VbDeviceConfig *d;
  guint index;
  Replace *r;

  g_variant_get (g_dbus_method_invocation_get_parameters (inv), "(&s@a{sv})", NULL, &options);
  if (!vb_options_check (options, no_options, &error)
      || (d = vb_component_of (daemon, inv, &index, &error)) == NULL
      || !check_replace (daemon, d, index, source, &error))
    {
      vb_invocation_return_gerror (inv, error);
      return;
    }
  r = g_new0 (Replace, 1);
  r->daemon = daemon;
  r->invocation = g_object_ref (inv);
  r->device = g_strdup (d->name);
  r->old_source = g_strdup (((VbComponentConfig *) d->components->pdata[index])->source);
  r->new_source = g_steal_pointer (&source);
  path = vb_device_object_path (d->name);
  {
    const char *objects[] = { path, g_dbus_method_invocation_get_object_path (inv), NULL };
    r->job = vb_job_new (daemon, "replace", objects, 0, cancel_replace, r);
  }
  vb_job_set_started_by (r->job, inv);
  g_message ("vblk: %s: replacing '%s' by '%s'", r->device, r->old_source, r->new_source);
  reconfigure (r, "add", r->new_source, new_added);
}

gboolean
vb_component_handle_replace (VbDBusComponent *iface, GDBusMethodInvocation *inv, const char *source,
                             GVariant *options, VbDaemon *daemon)
{
  vb_auth_check (daemon, inv, "org.vblk.manage", NULL, replace_authorized, g_strdup (source),
                 g_free);
  return TRUE;
}
