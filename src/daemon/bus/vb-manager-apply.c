/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Manager.Apply: a spec's plan (core/vb-apply.c) carried out as the
 * requests a person would have made, one op each, through the mutates of
 * the Device and Manager methods. Before the first step the whole plan is
 * checked: polkit for every action it needs, then one op that replays
 * every step on a copy of the desired state and checks the devices it
 * touches against their real components. A step that fails (or a Cancel
 * of the apply's job) has the steps done before it undone, last first;
 * the answer names the steps done, undone and not done. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-auth.h"
#include "vb-manager.h"
#include "vb-manager-apply.h"
#include "vb-request.h"
#include "vb-testhook.h"
#include "vb-wipe.h"

#include <string.h>

/* a test's hold (VBLK_TEST_HOLD_AT=apply:step-N) is looked at this often,
 * the main loop going on meanwhile (a Cancel is answered) */
#define HOLD_LOOK_MS 20

static const char *const apply_options[] = { "dry-run:b", "prune:b", "confirm:as", NULL };

static void
apply_free (Apply *a)
{
  for (guint i = 0; a->plan && i < a->plan->len; i++)
    {
      g_clear_pointer (&a->before[i], vb_state_free);
      g_clear_pointer (&a->after[i], vb_state_free);
    }
  g_free (a->before);
  g_free (a->after);
  g_free (a->status);
  g_clear_object (&a->invocation);
  g_clear_pointer (&a->options, g_variant_unref);
  g_free (a->spec_json);
  g_clear_pointer (&a->plan, g_ptr_array_unref);
  g_clear_pointer (&a->actions, g_ptr_array_unref);
  g_clear_error (&a->error);
  g_string_free (a->not_undone, TRUE);
  g_clear_pointer (&a->job, vb_job_unref);
  g_clear_pointer (&a->spec, vb_state_free);
  g_free (a);
}

/* What an undone step had written on components it brought in (a new
 * device's superblocks, a spare's, a new leg's) is wiped, so that they
 * are as blank as before and the same spec can be applied again. Under
 * the world's lock, against what is saved and served at that moment: an
 * op that has just taken one of these paths (saved before it formats)
 * has its component refused to the wipe, and one that takes it after
 * formats it after the wipe. */
typedef struct {
  Apply *apply;
  GPtrArray *paths;
} Leftovers;

static void
leftovers_free (Leftovers *l)
{
  g_ptr_array_unref (l->paths);
  g_free (l);
}

static void
wipe_paths_locked (VbDaemon *daemon, GPtrArray *paths)
{
  g_autoptr (GHashTable) started = g_hash_table_new (g_str_hash, g_str_equal);
  const VbState *state = daemon->world_desired;

  for (guint k = 0; k < state->devices->len; k++)
    {
      const VbDeviceConfig *d = state->devices->pdata[k];
      if (g_hash_table_contains (daemon->world_running, d->uuid))
        g_hash_table_add (started, d->uuid);
    }
  for (guint i = 0; i < paths->len; i++)
    {
      g_autoptr (GError) local = NULL;
      g_auto (GStrv) erased = NULL;
      if (vb_wipe (paths->pdata[i], state, started, FALSE, FALSE, &erased, &local))
        {
          g_autofree char *what = g_strjoinv (", ", erased);
          g_message ("vblk: apply: undone: wiped %s from %s", what, (char *) paths->pdata[i]);
        }
      else
        g_message ("vblk: apply: undone: %s left as it is: %s", (char *) paths->pdata[i],
                   local->message);
    }
}

static void
leftovers_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  Leftovers *l = task_data;
  VbDaemon *daemon = l->apply->daemon;

  g_rec_mutex_lock (&daemon->world_lock);
  wipe_paths_locked (daemon, l->paths);
  g_rec_mutex_unlock (&daemon->world_lock);
  g_task_return_boolean (task, TRUE);
}

static void undo_next (Apply *a);

static void
leftovers_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  Leftovers *l = user_data;
  Apply *a = l->apply;

  leftovers_free (l);
  undo_next (a);
}

/* The component paths step @i brought in: a node for vblk:NAME. */
static void
add_path (VbDaemon *daemon, GPtrArray *paths, const char *source)
{
  const VbDeviceConfig *d;
  const VbRunning *r;

  if (!g_str_has_prefix (source, VB_DEVICE_SOURCE_PREFIX))
    {
      g_ptr_array_add (paths, g_strdup (source));
      return;
    }
  d = vb_state_lookup (daemon->desired, source + strlen (VB_DEVICE_SOURCE_PREFIX));
  r = d ? g_hash_table_lookup (daemon->running, d->uuid) : NULL;
  if (r)
    g_ptr_array_add (paths, g_strdup (r->block_device));
}

static void
wipe_leftovers (Apply *a, guint i)
{
  const VbApplyStep *step = vb_apply_step_at (a, i);
  Leftovers *l = g_new0 (Leftovers, 1);
  g_autoptr (GTask) task = NULL;

  l->apply = a;
  l->paths = g_ptr_array_new_with_free_func (g_free);
  if (step->kind == VB_APPLY_CREATE)
    for (guint k = 0; k < step->config->components->len; k++)
      add_path (a->daemon, l->paths,
                ((VbComponentConfig *) step->config->components->pdata[k])->source);
  if (step->kind == VB_APPLY_ADD)
    add_path (a->daemon, l->paths, step->source);
  for (guint k = 0; step->kind == VB_APPLY_RECONFIGURE && step->add && step->add[k]; k++)
    add_path (a->daemon, l->paths, step->add[k]);
  task = g_task_new (NULL, NULL, leftovers_done, l);
  g_task_set_task_data (task, l, NULL);
  g_task_run_in_thread (task, leftovers_thread);
}

/* ------------------------------------------------------------------ */
/* The run: steps in order, then (on a failure) undos in reverse        */

/* "3 create:top, 2 create:w" — the steps of @a whose status is @status. */
static char *
steps_with (Apply *a, const char *status, gboolean reverse)
{
  GString *s = g_string_new (NULL);

  for (guint n = 0; n < a->plan->len; n++)
    {
      guint i = reverse ? a->plan->len - 1 - n : n;
      g_autofree char *id = NULL;
      if (strcmp (a->status[i], status) != 0)
        continue;
      id = vb_apply_step_id (vb_apply_step_at (a, i));
      g_string_append_printf (s, "%s%u %s", s->len ? ", " : "", i + 1, id);
    }
  return g_string_free (s, FALSE);
}

static void
finish (Apply *a)
{
  g_autofree char *json = vb_apply_plan_to_json (a->plan, a->status);

  if (a->error == NULL)
    {
      g_autofree char *summary = g_strdup_printf ("%u steps done", a->plan->len);
      g_message ("vblk: apply: %s", summary);
      if (a->job)
        vb_job_finish (a->job, "finished", summary);
      g_dbus_method_invocation_return_value (a->invocation, g_variant_new ("(s)", json));
    }
  else
    {
      g_autofree char *undone = steps_with (a, "undone", TRUE);
      g_autofree char *kept = steps_with (a, "not-undone", TRUE);
      g_autofree char *not_done = steps_with (a, "not-done", FALSE);
      g_autofree char *message
          = g_strdup_printf ("%s; undone: %s; not undone: %s%s; not done: %s", a->error->message,
                             *undone ? undone : "none", *kept ? kept : "none", a->not_undone->str,
                             *not_done ? not_done : "none");
      g_warning ("vblk: apply: %s", message);
      if (a->job)
        vb_job_finish (a->job, a->cancelled ? "cancelled" : "failed", message);
      g_dbus_method_invocation_return_error_literal (a->invocation, VB_ERROR, a->error->code,
                                                     message);
    }
  apply_free (a);
}

static void
undo_done (VbDaemon *daemon, const GError *error, gpointer user_data)
{
  StepRequest *sr = user_data;
  Apply *a = sr->apply;
  guint i = sr->index;
  g_autofree char *id = vb_apply_step_id (vb_apply_step_at (a, i));
  VbApplyKind kind = vb_apply_step_at (a, i)->kind;

  a->undoing = (gint) i - 1;
  if (error)
    {
      a->status[i] = "not-undone";
      g_string_append_printf (a->not_undone, " (%u %s: %s)", i + 1, id, error->message);
      undo_next (a);
      return;
    }
  a->status[i] = "undone";
  g_message ("vblk: apply: step %u (%s) undone", i + 1, id);
  if (kind == VB_APPLY_CREATE || kind == VB_APPLY_ADD || kind == VB_APPLY_RECONFIGURE)
    wipe_leftovers (a, i);
  else
    undo_next (a);
}

static void
undo_next (Apply *a)
{
  StepRequest *sr;
  VbOpMode mode;

  while (a->undoing >= 0 && strcmp (a->status[a->undoing], "done") != 0)
    a->undoing--;
  if (a->undoing < 0)
    {
      finish (a);
      return;
    }
  sr = vb_apply_undo_request (a, (guint) a->undoing, &mode);
  vb_daemon_submit (a->daemon, sr->req.name, vb_apply_mutate_undo, mode, "apply-undo", undo_done,
                    sr, (GDestroyNotify) vb_apply_step_request_free);
}

static void run_next (Apply *a);

static void
step_done (VbDaemon *daemon, const GError *error, gpointer user_data)
{
  StepRequest *sr = user_data;
  Apply *a = sr->apply;
  guint i = sr->index;
  g_autofree char *id = vb_apply_step_id (vb_apply_step_at (a, i));

  if (error)
    {
      a->status[i] = "failed";
      a->error = g_error_new (VB_ERROR, error->domain == VB_ERROR ? error->code : VB_ERROR_FAILED,
                              _ ("step %u of %u (%s) failed: %s"), i + 1, a->plan->len, id,
                              error->message);
      a->undoing = (gint) i - 1;
      undo_next (a);
      return;
    }
  a->status[i] = "done";
  a->after[i] = vb_state_copy (daemon->desired);
  a->next = i + 1;
  g_message ("vblk: apply: step %u of %u (%s) done", i + 1, a->plan->len, id);
  if (a->job)
    vb_job_update (a->job, a->next, 0);
  run_next (a);
}

static gboolean
run_next_later (gpointer data)
{
  run_next (data);
  return G_SOURCE_REMOVE;
}

static void
run_next (Apply *a)
{
  StepRequest *sr;
  StepRun run;
  g_autofree char *hook = NULL;

  if (a->cancelled && a->next < a->plan->len)
    {
      a->error = g_error_new (VB_ERROR, VB_ERROR_FAILED, _ ("cancelled before step %u of %u"),
                              a->next + 1, a->plan->len);
      a->undoing = (gint) a->next - 1;
      undo_next (a);
      return;
    }
  if (a->next == a->plan->len)
    {
      finish (a);
      return;
    }
  hook = g_strdup_printf ("apply:step-%u", a->next + 1);
  if (vb_test_hook_holding (hook))
    {
      g_timeout_add (HOLD_LOOK_MS, run_next_later, a);
      return;
    }
  a->before[a->next] = vb_state_copy (a->daemon->desired);
  sr = vb_apply_step_request (a, a->next, &run);
  vb_daemon_submit (a->daemon, sr->req.name, run.mutate, run.mode, "apply", step_done, sr,
                    (GDestroyNotify) vb_apply_step_request_free);
}

static void
cancel_apply (VbJob *job, gpointer user_data)
{
  ((Apply *) user_data)->cancelled = TRUE;
}

/* ------------------------------------------------------------------ */
/* Checks before the first step                                         */

/* A path that is a component of two devices of @state at once (two
 * windows may share one), or NULL. The final state is checked against the
 * real components; this is for the states between the steps (a disk
 * that moves from one device to a new one is taken by the create before
 * the reconfiguration frees it). */
static char *
shared_component (const VbState *state)
{
  g_autoptr (GHashTable) owner = g_hash_table_new (g_str_hash, g_str_equal);

  for (guint i = 0; i < state->devices->len; i++)
    {
      const VbDeviceConfig *d = state->devices->pdata[i];
      for (guint j = 0; j < d->components->len; j++)
        {
          const char *source = ((VbComponentConfig *) d->components->pdata[j])->source;
          const VbDeviceConfig *other = g_hash_table_lookup (owner, source);
          if (g_str_has_prefix (source, VB_DEVICE_SOURCE_PREFIX))
            continue;
          if (other && other != d
              && !(strcmp (other->driver, "window") == 0 && strcmp (d->driver, "window") == 0))
            return g_strdup_printf ("'%s' is a component of '%s' and '%s' at once", source,
                                    other->name, d->name);
          g_hash_table_insert (owner, (gpointer) source, (gpointer) d);
        }
    }
  return NULL;
}

/* Every step, in order, on the op's copy of the desired state. */
static gboolean
mutate_replay (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
               GError **error)
{
  Apply *a = user_data;

  for (guint i = 0; i < a->plan->len; i++)
    {
      StepRun run;
      StepRequest *sr = vb_apply_step_request (a, i, &run);
      gboolean ok = run.mutate (daemon, candidate, sr, intent, error);
      g_autofree char *id = vb_apply_step_id (vb_apply_step_at (a, i));

      g_autofree char *shared = NULL;

      vb_apply_step_request_free (sr);
      if (ok && (shared = shared_component (candidate)) != NULL)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                       _ ("%s (the plan cannot order this change: apply it in two specs, the "
                          "first freeing the component)"),
                       shared);
          ok = FALSE;
        }
      if (!ok)
        {
          g_prefix_error (error, _ ("step %u of %u (%s): "), i + 1, a->plan->len, id);
          return FALSE;
        }
    }
  return TRUE;
}

static void
start_steps (Apply *a)
{
  g_autoptr (GPtrArray) objects = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; i < a->plan->len; i++)
    {
      g_autofree char *path = vb_device_object_path (vb_apply_step_at (a, i)->device);
      if (!g_ptr_array_find_with_equal_func (objects, path, g_str_equal, NULL))
        g_ptr_array_add (objects, g_steal_pointer (&path));
    }
  g_ptr_array_add (objects, NULL);
  a->job = vb_job_new (a->daemon, "apply", (const char *const *) objects->pdata, a->plan->len,
                       cancel_apply, a);
  vb_job_set_started_by (a->job, a->invocation);
  g_message ("vblk: apply: %u steps", a->plan->len);
  run_next (a);
}

/* The JSON path of the spec's component that @message names ('SOURCE'),
 * or NULL: the check against the real components says what is wrong with
 * a path, this says where the spec has it. */
static char *
spec_place (const VbState *spec, const char *message)
{
  for (guint i = 0; spec && i < spec->devices->len; i++)
    {
      const VbDeviceConfig *d = spec->devices->pdata[i];
      for (guint j = 0; j < d->components->len; j++)
        {
          g_autofree char *quoted
              = g_strdup_printf ("'%s'", ((VbComponentConfig *) d->components->pdata[j])->source);
          if (strstr (message, quoted))
            return g_strdup_printf ("devices[%u].components[%u]", i, j);
        }
    }
  return NULL;
}

static void
checked (VbDaemon *daemon, const GError *error, gpointer user_data)
{
  Apply *a = user_data;

  if (error)
    {
      g_autoptr (GError) placed = g_error_copy (error);
      g_autofree char *where = spec_place (a->spec, error->message);
      if (where)
        g_prefix_error (&placed, _ ("spec: %s: "), where);
      vb_invocation_return_gerror (a->invocation, placed);
      apply_free (a);
    }
  else if (vb_options_get_bool (a->options, "dry-run", FALSE))
    {
      g_autofree char *json = vb_apply_plan_to_json (a->plan, NULL);
      g_dbus_method_invocation_return_value (a->invocation, g_variant_new ("(s)", json));
      apply_free (a);
    }
  else
    start_steps (a);
}

static void
check (Apply *a)
{
  /* the op does not own @a: its done decides */
  vb_daemon_submit (a->daemon, NULL, mutate_replay, VB_OP_CHECK, "apply-check", checked, a, NULL);
}

static void authorize_next (Apply *a);

static void
action_authorized (VbDaemon *daemon, GDBusMethodInvocation *invocation, gpointer user_data)
{
  authorize_next (user_data);
}

/* Each polkit action the plan needs beyond org.vblk.manage, in turn. */
static void
authorize_next (Apply *a)
{
  g_autofree char *action = NULL;

  if (a->actions->len == 0)
    {
      check (a);
      return;
    }
  action = g_ptr_array_steal_index (a->actions, 0);
  vb_auth_check (a->daemon, a->invocation, action, NULL, action_authorized, a,
                 (GDestroyNotify) apply_free);
}

static const char *
action_of (const VbApplyStep *step)
{
  switch (step->kind)
    {
    case VB_APPLY_START:
    case VB_APPLY_STOP:
      return "org.vblk.start-stop";
    case VB_APPLY_DELETE:
      return "org.vblk.delete";
    case VB_APPLY_EXPORT:
      return g_str_has_prefix (step->listen, "tcp:") ? "org.vblk.export" : NULL;
    default:
      return NULL;
    }
}

/* The plan, or the invocation completed with why there is none. */
static gboolean
make_plan (Apply *a)
{
  g_autoptr (GError) error = NULL;
  VbState *spec = a->spec = vb_spec_from_json (a->spec_json, -1, "spec", &error);
  g_autofree const char **confirm = NULL;
  VbApplyOptions options = { .prune = vb_options_get_bool (a->options, "prune", FALSE) };

  g_variant_lookup (a->options, "confirm", "^a&s", &confirm);
  options.confirm = confirm;
  if (spec)
    {
      a->plan = vb_apply_plan (a->daemon->desired, spec, &options, &error);
      if (a->plan == NULL)
        g_prefix_error (&error, _ ("spec: "));
    }
  if (a->plan == NULL)
    {
      vb_invocation_return_gerror (a->invocation, error);
      return FALSE;
    }
  a->status = g_new0 (const char *, a->plan->len + 1);
  a->before = g_new0 (VbState *, a->plan->len + 1);
  a->after = g_new0 (VbState *, a->plan->len + 1);
  a->actions = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < a->plan->len; i++)
    {
      const char *action = action_of (vb_apply_step_at (a, i));
      a->status[i] = "not-done";
      if (action && !g_ptr_array_find_with_equal_func (a->actions, action, g_str_equal, NULL))
        g_ptr_array_add (a->actions, g_strdup (action));
    }
  return TRUE;
}

/* After the polkit check (none for a dry run, which changes nothing, as
 * reading). An empty plan touches nothing and emits no event. */
static void
plan_and_go (Apply *a)
{
  if (!make_plan (a))
    apply_free (a);
  else if (a->plan->len == 0)
    {
      g_autofree char *json = vb_apply_plan_to_json (a->plan, NULL);
      g_dbus_method_invocation_return_value (a->invocation, g_variant_new ("(s)", json));
      apply_free (a);
    }
  else if (vb_options_get_bool (a->options, "dry-run", FALSE))
    check (a);
  else
    authorize_next (a);
}

static void
apply_authorized (VbDaemon *daemon, GDBusMethodInvocation *invocation, gpointer user_data)
{
  plan_and_go (user_data);
}

gboolean
vb_manager_handle_apply (VbDBusManager *iface, GDBusMethodInvocation *invocation, const char *json,
                         GVariant *options, VbDaemon *daemon)
{
  g_autoptr (GError) error = NULL;
  Apply *a;

  if (!vb_options_check (options, apply_options, &error))
    {
      vb_invocation_return_gerror (invocation, error);
      return TRUE;
    }
  a = g_new0 (Apply, 1);
  a->daemon = daemon;
  a->invocation = g_object_ref (invocation);
  a->options = g_variant_ref (options);
  a->spec_json = g_strdup (json);
  a->not_undone = g_string_new (NULL);
  if (vb_options_get_bool (options, "dry-run", FALSE))
    {
      plan_and_go (a);
      return TRUE;
    }
  vb_auth_check (daemon, invocation, "org.vblk.manage", NULL, apply_authorized, a,
                 (GDestroyNotify) apply_free);
  return TRUE;
}
