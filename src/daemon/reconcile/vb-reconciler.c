/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The reconciler: the op queue and one function per op mode. Each op
 * validates against the real components, saves the desired state,
 * executes the plan through the backends and publishes the outcome — all
 * blocking work on a worker thread, the outcome applied on the main
 * thread. */
#include "config.h"

#include "vb-claim.h"
#include "vb-op.h"
#include "vb-probe.h"
#include "vb-testhook.h"

#include <malloc.h>
#include <string.h>

/* Device by device, in order (as the JSON of the two would compare; that
 * was a sixth of a create's cost at 1,000 devices). */
static gboolean
states_equal (const VbState *a, const VbState *b)
{
  if (a->devices->len != b->devices->len)
    return FALSE;
  for (guint i = 0; i < a->devices->len; i++)
    if (!vb_device_config_equal (a->devices->pdata[i], b->devices->pdata[i]))
      return FALSE;
  return TRUE;
}

/* Start-up found a half-done reconfiguration of @name: a device that
 * outlived the killed vblkd (the kernel's) may run either table: it is
 * loaded again from the configuration chosen. */
static void
reload_resolved (VbOp *op, const char *name)
{
  const VbDeviceConfig *d = vb_state_lookup (op->candidate, name);
  const VbRunning *r = d ? g_hash_table_lookup (op->running, d->uuid) : NULL;
  const VbBackend *b = r ? vb_backend_lookup (r->backend) : NULL;
  g_autoptr (GError) local = NULL;

  if (!(b && (b->capabilities & VB_BACKEND_CAN_RECONFIGURE)
        && !(b->capabilities & VB_BACKEND_SERVES_ENGINE)))
    return;
  VbStep step = { .kind = VB_STEP_UPDATE,
                  .name = d->name,
                  .uuid = d->uuid,
                  .block_device = r->block_device,
                  .backend = r->backend };
  if (!vb_op_step_update (op, &step, &local))
    g_warning ("vblk: %s: loading its configuration again: %s", d->name, local->message);
  else
    g_message ("vblk: %s: its table was loaded again from the configuration chosen", d->name);
}

/* Every device the request changes is checked against its real
 * components, unless it is only being stopped (a stop must work even when
 * a component has vanished); the first failure becomes the op's error.
 * The policy only records where components were found (by their
 * superblocks): a device it touches may well be incomplete still, but
 * what it found is claimed as anything else is. */
static void
check_touched (VbOp *op, GHashTable *before_scan)
{
  g_autoptr (GHashTable) block_devices = vb_op_block_devices_of (op->candidate, before_scan);
  GPtrArray *touched = op->intent.touched;
  VbProbe probe;

  vb_probe_init (&probe, op->candidate, block_devices);
  probe.instance = op->daemon->instance;
  probe.by_superblock = op->mode == VB_OP_POLICY;
  probe.found = op->intent.found;
  for (guint i = 0; i < touched->len && op->error == NULL; i++)
    {
      const VbDeviceConfig *d = vb_state_lookup (op->candidate, touched->pdata[i]);
      const VbDeviceConfig *old = vb_state_lookup (op->previous, touched->pdata[i]);
      const VbDeviceConfig *running_old;
      guint64 size;
      gboolean complete;

      if (d == NULL || (old && !d->started && old->started))
        continue;
      running_old = old && g_hash_table_contains (before_scan, d->uuid) ? old : NULL;
      if (!vb_op_check_spares_kept (op, d, old, &op->error))
        break;
      if (op->mode == VB_OP_POLICY)
        {
          vb_claim_device (&probe, d, old, running_old, &op->error);
          continue;
        }
      if (op->intent.reconfigure && strcmp (op->intent.reconfigure, d->name) == 0
          && !vb_reconfig_keeps_a_copy (op, &op->error))
        break;
      if (vb_probe_validate (&probe, d, d->started, &size, &complete, &op->error)
          && (old == NULL || !vb_device_config_equal (old, d))
          && vb_claim_device (&probe, d, old, running_old, &op->error))
        vb_probe_check_foreign (&probe, d, &op->error);
    }
  vb_probe_clear (&probe);
}

/* check_touched; refused, nothing changes, but what the probe saw (a
 * component gone, say) is still worth showing. */
static gboolean
checked (VbOp *op, GHashTable *before_scan)
{
  check_touched (op, before_scan);
  if (op->error == NULL)
    return TRUE;
  vb_state_free (op->candidate);
  op->candidate = vb_state_share (op->previous);
  vb_op_compute_status (op);
  return FALSE;
}

/* What every applied op ends with: exports, status, the stable links. */
static void
publish (VbOp *op)
{
  vb_op_sync_exports (op);
  vb_op_compute_status (op);
  vb_op_sync_links (op);
}

static void
hook_after_persist (VbOp *op)
{
  g_autofree char *point = op->what ? g_strconcat (op->what, ":after-persist", NULL) : NULL;

  if (point)
    vb_test_hook (point);
}

/* VB_OP_CHANGE, VB_OP_POLICY: check, save, execute the plan and the
 * steps beyond it. */
static void
op_run_change (VbOp *op, GHashTable *before_scan)
{
  if (!checked (op, before_scan))
    return;
  if (!states_equal (op->previous, op->candidate))
    {
      if (!vb_op_save (op, &op->error))
        return;
      hook_after_persist (op);
    }
  op->applied = TRUE;
  vb_op_format_new (op);
  vb_op_execute_plan (op);
  vb_op_run_readds (op);
  vb_op_run_faults (op);
  vb_op_sync_spares (op);
  publish (op);
}

/* VB_OP_STARTUP: a half-done reconfiguration resolved, the running nodes
 * found again, then as a change (which re-drives every device). */
static void
op_run_startup (VbOp *op, GHashTable *before_scan)
{
  g_autofree char *resolved = vb_reconfig_resolve_intent (op);

  vb_op_scan_running (op, before_scan);
  if (resolved)
    reload_resolved (op, resolved);
  op_run_change (op, before_scan);
}

/* VB_OP_OBSERVE: the running nodes found again and published (those of
 * the op's part, for an op on one device: udev's events about its node). */
static void
op_run_observe (VbOp *op, GHashTable *before_scan)
{
  if (op->part)
    vb_op_observe_part (op);
  else
    vb_op_scan_running (op, before_scan);
  vb_op_note_vanished (op, before_scan);
  op->applied = TRUE;
  publish (op);
}

/* VB_OP_RECONFIGURE: saved by the reconfiguration itself, once the swap
 * is done; no plan: the node stays. */
static void
op_run_reconfigure (VbOp *op, GHashTable *before_scan)
{
  if (!checked (op, before_scan))
    return;
  op->applied = TRUE;
  vb_op_reconfigure (op);
  publish (op);
}

/* VB_OP_CHECK */
static void
op_run_check (VbOp *op, GHashTable *before_scan)
{
  check_touched (op, before_scan);
}

/* VB_OP_SHUTDOWN */
static void
op_run_shutdown (VbOp *op, GHashTable *before_scan)
{
  char **lingering;

  /* also at each look again while staying: an engine device no longer in
   * use is stopped cleanly before vblkd leaves */
  vb_op_stop_self_served (op);
  lingering = vb_op_lingering (op);
  g_strfreev (g_atomic_pointer_exchange (&op->daemon->lingering, lingering));
  if (g_atomic_int_compare_and_exchange (&op->daemon->settle_asked, TRUE, FALSE))
    vb_op_settle (op);
  op->applied = TRUE;
  vb_op_sync_links (op);
}

typedef void (*VbOpRunFunc) (VbOp *op, GHashTable *before_scan);

static const VbOpRunFunc op_runs[] = {
  [VB_OP_CHANGE] = op_run_change,   [VB_OP_STARTUP] = op_run_startup,
  [VB_OP_OBSERVE] = op_run_observe, [VB_OP_SHUTDOWN] = op_run_shutdown,
  [VB_OP_POLICY] = op_run_change,   [VB_OP_RECONFIGURE] = op_run_reconfigure,
  [VB_OP_CHECK] = op_run_check,
};

static void
op_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  VbOp *op = data;
  g_autoptr (GHashTable) before_scan = vb_op_running_copy (op->running);

  op_runs[op->mode](op, before_scan);
  g_task_return_boolean (task, TRUE);
}

static void op_run_next (VbDaemon *daemon);

/* A failure stays until the device runs again; "stopped" rather than
 * "ready" once it has run. */
static void
merge_status (VbDaemon *daemon, VbOp *op, const VbDeviceConfig *d)
{
  VbDeviceStatus *st = g_hash_table_lookup (op->status, d->name);
  VbDeviceStatus *old = g_hash_table_lookup (daemon->status, d->name);
  char *key = NULL;
  gboolean running = g_hash_table_contains (daemon->running, d->uuid);

  if (st == NULL)
    return;
  /* the key goes with it: stealing keeps the table from freeing it */
  g_hash_table_steal_extended (op->status, d->name, (gpointer *) &key, NULL);
  g_free (key);
  st->was_started = running || (old && old->was_started);
  if (running)
    g_clear_pointer (&st->failure, g_free);
  else if (st->failure == NULL && old && old->failure)
    st->failure = g_strdup (old->failure);
  g_hash_table_replace (daemon->status, g_strdup (d->name), st);
}

/* The worker's outcome becomes what the daemon shows: all of it for a
 * whole-daemon op, else its part (other parts may have moved since). */
static void
take_outcome (VbDaemon *daemon, VbOp *op)
{
  if (op->part == NULL)
    {
      vb_state_free (daemon->desired);
      daemon->desired = g_steal_pointer (&op->candidate);
      g_hash_table_unref (daemon->running);
      daemon->running = g_steal_pointer (&op->running);
      return;
    }
  vb_op_part_merge_state (op, daemon->desired, op->candidate);
  vb_op_part_merge_running (op, daemon->running, op->running);
}

static gboolean meets_running (VbDaemon *daemon, GHashTable *part);

/* A device outside the op's part: what the op saw of it (size, missing
 * paths, slots) counts only if it is configured as the op saw it and no
 * op on its part runs, which would show it after. @seen: the op's
 * candidate by name; @busy: the devices on the part of an op that runs
 * (vb_op_parts_busy). */
static gboolean
saw_current (GHashTable *seen, GHashTable *busy, const VbDeviceConfig *d)
{
  const VbDeviceConfig *as_seen = g_hash_table_lookup (seen, d->name);

  return as_seen != NULL && vb_device_config_equal (as_seen, d)
         && !g_hash_table_contains (busy, d->name);
}

/* What an op on a part shows: the status of its part's devices (all that
 * vb_op_compute_status computed), and that of a device outside it (a step
 * failed there) if saw_current; then their objects — everything, when
 * one from outside came in, whose dependents the part may not hold. */
static void
show_part (VbDaemon *daemon, VbOp *op)
{
  g_autoptr (GHashTable) names = vb_op_part_devices (op);
  g_autoptr (GHashTable) busy = NULL;
  g_autoptr (GHashTable) seen = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GPtrArray) outside = g_ptr_array_new_with_free_func (g_free);
  gboolean all = FALSE;
  GHashTableIter iter;
  gpointer key;

  g_hash_table_iter_init (&iter, names);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    {
      const VbDeviceConfig *d = vb_state_lookup (daemon->desired, key);
      if (d)
        merge_status (daemon, op, d);
    }
  g_hash_table_iter_init (&iter, op->status);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    g_ptr_array_add (outside, g_strdup (key));
  for (guint i = 0; i < outside->len; i++)
    {
      const VbDeviceConfig *d = vb_state_lookup (daemon->desired, outside->pdata[i]);
      const VbDeviceConfig *as_seen = vb_state_lookup (op->candidate, outside->pdata[i]);

      if (d == NULL || as_seen == NULL)
        continue;
      if (busy == NULL)
        busy = vb_op_parts_busy (daemon->desired, daemon->running_ops);
      g_hash_table_insert (seen, as_seen->name, (gpointer) as_seen);
      if (saw_current (seen, busy, d))
        {
          merge_status (daemon, op, d);
          all = TRUE;
        }
    }
  if (all)
    vb_daemon_publish_sync (daemon);
  else
    vb_daemon_publish_sync_devices (daemon, names);
}

/* Nothing runs or waits: the memory ops freed goes back to the system,
 * at most once a second (a trim put off runs a second later, if still
 * idle). Each op runs on a pool thread with its own malloc arena; their
 * free pages stayed (10,000 creates left 22 MiB more than a restart on
 * the same state). */
static gint64 trimmed_at;
static guint trim_later_id;
/* a read of every object (GetManagedObjects) is made and sent by then */
#define TRIM_AFTER_READ_S 3

static gboolean
idle (VbDaemon *daemon)
{
  /* (no op submitted yet: a read before the first, waiting for the name) */
  return (daemon->running_ops == NULL || daemon->running_ops->len == 0)
         && g_queue_is_empty (&daemon->ops);
}

static void
trim_now (void)
{
  trimmed_at = g_get_monotonic_time ();
  malloc_trim (0);
}

static gboolean
trim_later (gpointer data)
{
  trim_later_id = 0;
  if (idle (data))
    trim_now ();
  return G_SOURCE_REMOVE;
}

void
vb_daemon_give_back_memory_soon (VbDaemon *daemon)
{
  /* after the last read: the timer of one before it (or of an op) may
   * fire while this one's reply is still being made */
  if (trim_later_id != 0)
    g_source_remove (trim_later_id);
  trim_later_id = g_timeout_add_seconds (TRIM_AFTER_READ_S, trim_later, daemon);
}

static void
give_back_memory (VbDaemon *daemon)
{
  if (!idle (daemon))
    return;
  if (g_get_monotonic_time () - trimmed_at >= G_USEC_PER_SEC)
    trim_now ();
  else if (trim_later_id == 0)
    trim_later_id = g_timeout_add_seconds (1, trim_later, daemon);
}

static void
op_finished (GObject *source, GAsyncResult *result, gpointer data)
{
  VbOp *op = data;
  VbDaemon *daemon = op->daemon;

  if (op->applied)
    take_outcome (daemon, op);
  if (op->part)
    show_part (daemon, op);
  else
    {
      /* a whole-daemon op computed every device's status */
      for (guint i = 0; i < daemon->desired->devices->len; i++)
        merge_status (daemon, op, daemon->desired->devices->pdata[i]);
      vb_daemon_publish_sync (daemon);
    }
  for (guint i = 0; i < op->events->len; i++)
    {
      const VbOpEvent *event = op->events->pdata[i];
      vb_daemon_publish_event (daemon, event->kind, event->device, event->details);
    }
  if (op->reconfigured)
    {
      g_hash_table_replace (daemon->reconfigured, g_steal_pointer (&op->reconfigured),
                            g_steal_pointer (&op->reconfigured_from));
      vb_daemon_publish_sync (daemon);
    }
  if (op->done)
    op->done (daemon, op->error, op->user_data);
  g_ptr_array_remove (daemon->running_ops, op);
  vb_op_free (op);
  if (daemon->quit_pending)
    vb_daemon_quit (daemon);
  else
    {
      op_run_next (daemon);
      give_back_memory (daemon);
    }
}

/* A node runs that belongs to no device: the next op's plan stops it, so
 * that op runs alone. Asked for every op the dispatcher looks at: one
 * lookup per node, else per device (a search of the state for each node
 * cost 10 million comparisons with 1,000 started among 10,000). */
static gboolean
orphans_run (VbDaemon *daemon)
{
  g_autoptr (GHashTable) owned = NULL;
  GHashTableIter iter;
  gpointer key, running;
  gboolean all_known = TRUE;

  /* each node's device by the name it records (vb_running_device) */
  g_hash_table_iter_init (&iter, daemon->running);
  while (all_known && g_hash_table_iter_next (&iter, &key, &running))
    all_known = vb_running_device (daemon->desired, key, running) != NULL;
  if (all_known)
    return FALSE;
  owned = g_hash_table_new (vb_uuid_hash, g_str_equal);
  for (guint i = 0; i < daemon->desired->devices->len; i++)
    {
      const char *uuid = ((VbDeviceConfig *) daemon->desired->devices->pdata[i])->uuid;
      if (g_hash_table_contains (daemon->running, uuid))
        g_hash_table_add (owned, (gpointer) uuid);
    }
  return g_hash_table_size (owned) < g_hash_table_size (daemon->running);
}

static gboolean
meets_any (GPtrArray *parts, GHashTable *part)
{
  for (guint i = 0; i < parts->len; i++)
    if (vb_op_parts_meet (part, parts->pdata[i]))
      return TRUE;
  return FALSE;
}

static gboolean
meets_running (VbDaemon *daemon, GHashTable *part)
{
  for (guint i = 0; i < daemon->running_ops->len; i++)
    if (vb_op_parts_meet (part, ((VbOp *) daemon->running_ops->pdata[i])->part))
      return TRUE;
  return FALSE;
}

/* Built now, not at submit time, so that each op sees those before it on
 * its part; then its mutate. FALSE: the mutate refused (done, freed). */
static gboolean
prepare (VbDaemon *daemon, VbOp *op)
{
  /* the desired state's configs are replaced, never edited in place: both
   * share them, and the few a mutate or the worker changes are copied in
   * the candidate (vb_state_lookup_mut): no copy of the thousands beside */
  op->previous = vb_state_share (daemon->desired);
  op->candidate = vb_state_share (daemon->desired);
  op->running = vb_op_running_copy (daemon->running);
  if (op->mutate == NULL
      || op->mutate (daemon, op->candidate, op->user_data, &op->intent, &op->error))
    return TRUE;
  if (op->done)
    op->done (daemon, op->error, op->user_data);
  vb_op_free (op);
  return FALSE;
}

static void
start (VbDaemon *daemon, VbOp *op)
{
  g_autoptr (GTask) task = g_task_new (NULL, NULL, op_finished, op);

  if (daemon->world_desired == NULL)
    {
      /* before the first worker: the world is the state as loaded */
      g_rec_mutex_init (&daemon->world_lock);
      daemon->world_desired = vb_state_share (daemon->desired);
      daemon->world_running = vb_op_running_copy (daemon->running);
    }
  g_ptr_array_add (daemon->running_ops, op);
  g_task_set_task_data (task, op, NULL);
  g_task_run_in_thread (task, op_thread);
}

/* A whole-daemon op starts when nothing runs and none waits before it;
 * nothing behind it starts meanwhile — but an observe op (it only finds
 * the nodes again, whenever it runs) lets the ops behind it pass, so that
 * udev's events about one device's node never hold the others. FALSE:
 * stop looking. */
static gboolean
dispatch_whole (VbDaemon *daemon, GList *link, GPtrArray *waiting)
{
  VbOp *op = link->data;

  if (daemon->running_ops->len > 0 || waiting->len > 0)
    return op->mode == VB_OP_OBSERVE;
  g_queue_delete_link (&daemon->ops, link);
  if (!prepare (daemon, op))
    return TRUE;
  start (daemon, op);
  return FALSE;
}

/* In queue order, an op whose part meets no running op's part and no
 * waiting op's before it (so that ops on one part keep their order)
 * starts. Its part is known for sure once its mutate ran: one that
 * reached a part in use goes back to wait in its place. FALSE: stop
 * looking. */
static gboolean
dispatch_one (VbDaemon *daemon, GList *link, GPtrArray *waiting, GHashTable **above)
{
  VbOp *op = link->data;
  GList *next = link->next;
  GHashTable *before;

  /* the desired state stays while the dispatcher runs (only an op's end
   * changes it): one index of it for every waiting op's part */
  if (*above == NULL)
    *above = vb_op_part_index (daemon->desired);
  before = vb_op_part_in (daemon->desired, *above, op->device);

  if (meets_running (daemon, before) || meets_any (waiting, before))
    {
      g_ptr_array_add (waiting, before);
      return TRUE;
    }
  g_hash_table_unref (before);
  g_queue_delete_link (&daemon->ops, link);
  if (!prepare (daemon, op))
    return TRUE;
  /* op->previous shares the desired state that @above indexes */
  op->part = vb_op_part_of (op, *above);
  if (meets_running (daemon, op->part))
    {
      g_ptr_array_add (waiting, g_hash_table_ref (op->part));
      vb_op_reset (op);
      g_queue_insert_before (&daemon->ops, next, op);
      return TRUE;
    }
  start (daemon, op);
  return TRUE;
}

static void
dispatch (VbDaemon *daemon)
{
  g_autoptr (GPtrArray) waiting
      = g_ptr_array_new_with_free_func ((GDestroyNotify) g_hash_table_unref);
  g_autoptr (GHashTable) above = NULL;
  GList *next;

  for (GList *l = daemon->ops.head; l && !daemon->quit_pending; l = next)
    {
      VbOp *op = l->data;
      gboolean go_on;

      next = l->next;
      if (op->device == NULL || orphans_run (daemon))
        go_on = dispatch_whole (daemon, l, waiting);
      else
        go_on = dispatch_one (daemon, l, waiting, &above);
      if (!go_on)
        return;
    }
}

static void
op_run_next (VbDaemon *daemon)
{
  if (daemon->running_ops == NULL)
    daemon->running_ops = g_ptr_array_new ();
  /* a refusing mutate's done may submit: that op is looked at after */
  if (daemon->dispatching)
    {
      daemon->dispatch_again = TRUE;
      return;
    }
  daemon->dispatching = TRUE;
  do
    {
      daemon->dispatch_again = FALSE;
      dispatch (daemon);
    }
  while (daemon->dispatch_again);
  daemon->dispatching = FALSE;
}

gboolean
vb_daemon_queued (VbDaemon *daemon, VbOpMode mode, const char *device)
{
  for (GList *l = daemon->ops.head; l; l = l->next)
    {
      const VbOp *op = l->data;
      if (op->mode == mode && g_strcmp0 (op->device, device) == 0)
        return TRUE;
    }
  return FALSE;
}

void
vb_daemon_submit (VbDaemon *daemon, const char *device, VbMutateFunc mutate, VbOpMode mode,
                  const char *what, VbOpDone done, gpointer user_data, GDestroyNotify destroy)
{
  g_queue_push_tail (&daemon->ops,
                     vb_op_new (daemon, device, mutate, mode, what, done, user_data, destroy));
  op_run_next (daemon);
}

void
vb_daemon_quit (VbDaemon *daemon)
{
  if (daemon->running_ops && daemon->running_ops->len > 0)
    {
      daemon->quit_pending = TRUE;
      return;
    }
  g_clear_handle_id (&trim_later_id, g_source_remove);
  g_main_loop_quit (daemon->loop);
}
