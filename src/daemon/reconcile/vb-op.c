/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An op's own parts: the intent its mutate records, the events and status
 * its worker produces, the one save of the desired state, and the
 * helpers every worker step shares. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-devlinks.h"
#include "vb-node-records.h"
#include "vb-op.h"

#include <string.h>

void
vb_device_status_free (VbDeviceStatus *status)
{
  g_free (status->failure);
  g_free (status);
}

/* VbOpIntent: what a mutate asks of its op */

void
vb_op_intent_touch (VbOpIntent *intent, const char *name)
{
  if (!g_ptr_array_find_with_equal_func (intent->touched, name, g_str_equal, NULL))
    g_ptr_array_add (intent->touched, g_strdup (name));
}

void
vb_op_intent_readd (VbOpIntent *intent, const char *device, const VbComponentConfig *slot_component)
{
  VbOpReadd readd
      = { g_strdup (device), (guint) g_ascii_strtoull (slot_component->role, NULL, 10) };

  g_array_append_val (intent->readds, readd);
}

void
vb_op_intent_fault (VbOpIntent *intent, const char *device, guint index, const char *gone_node)
{
  VbOpFault fault = { g_strdup (device), index, g_strdup (gone_node) };

  g_array_append_val (intent->faults, fault);
}

void
vb_op_intent_reconfigure (VbOpIntent *intent, const char *device, guint timeout_ms)
{
  g_free (intent->reconfigure);
  intent->reconfigure = g_strdup (device);
  intent->reconfigure_timeout_ms = timeout_ms;
}

static void
readd_clear (gpointer data)
{
  g_free (((VbOpReadd *) data)->device);
}

static void
fault_clear (gpointer data)
{
  VbOpFault *fault = data;

  g_free (fault->device);
  g_free (fault->gone_node);
}

static void
intent_init (VbOpIntent *intent)
{
  intent->touched = g_ptr_array_new_with_free_func (g_free);
  intent->readds = g_array_new (FALSE, FALSE, sizeof (VbOpReadd));
  g_array_set_clear_func (intent->readds, readd_clear);
  intent->faults = g_array_new (FALSE, FALSE, sizeof (VbOpFault));
  g_array_set_clear_func (intent->faults, fault_clear);
  intent->found = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
}

static void
intent_clear (VbOpIntent *intent)
{
  g_clear_pointer (&intent->touched, g_ptr_array_unref);
  g_clear_pointer (&intent->readds, g_array_unref);
  g_clear_pointer (&intent->faults, g_array_unref);
  g_clear_pointer (&intent->found, g_hash_table_unref);
  g_clear_pointer (&intent->reconfigure, g_free);
}

static void
event_free (gpointer data)
{
  VbOpEvent *event = data;

  g_free (event->kind);
  g_free (event->device);
  g_clear_pointer (&event->details, g_variant_unref);
  g_free (event);
}

void
vb_op_reset (VbOp *op)
{
  g_clear_pointer (&op->previous, vb_state_free);
  g_clear_pointer (&op->candidate, vb_state_free);
  g_clear_pointer (&op->running, g_hash_table_unref);
  g_clear_pointer (&op->part, g_hash_table_unref);
  intent_clear (&op->intent);
  intent_init (&op->intent);
}

void
vb_op_free (VbOp *op)
{
  vb_state_free (op->previous);
  vb_state_free (op->candidate);
  intent_clear (&op->intent);
  g_free (op->what);
  g_free (op->device);
  g_clear_pointer (&op->part, g_hash_table_unref);
  g_clear_pointer (&op->running, g_hash_table_unref);
  g_clear_pointer (&op->status, g_hash_table_unref);
  g_clear_pointer (&op->events, g_ptr_array_unref);
  g_free (op->reconfigured);
  g_free (op->reconfigured_from);
  g_clear_pointer (&op->left_behind, g_hash_table_unref);
  g_clear_error (&op->error);
  if (op->destroy)
    op->destroy (op->user_data);
  g_free (op);
}

GHashTable *
vb_op_running_copy (GHashTable *running)
{
  GHashTable *copy
      = g_hash_table_new_full (vb_uuid_hash, g_str_equal, g_free, (GDestroyNotify) vb_running_free);
  GHashTableIter iter;
  gpointer k, v;

  g_hash_table_iter_init (&iter, running);
  while (g_hash_table_iter_next (&iter, &k, &v))
    g_hash_table_insert (copy, g_strdup (k), vb_running_copy (v));
  return copy;
}

static void
add_block_device (const VbDeviceConfig *d, const VbRunning *r, gpointer map)
{
  g_hash_table_insert (map, g_strdup (d->name), g_strdup (r->block_device));
}

/* name -> block node of every running device of @state */
GHashTable *
vb_op_block_devices_of (const VbState *state, GHashTable *running)
{
  GHashTable *map = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);

  vb_running_foreach_device (state, running, add_block_device, map);
  return map;
}

void
vb_op_world_lock (VbOp *op)
{
  g_rec_mutex_lock (&op->daemon->world_lock);
}

void
vb_op_world_unlock (VbOp *op)
{
  g_rec_mutex_unlock (&op->daemon->world_lock);
}

/* The world's desired state with the op's part of its candidate in (all
 * of it for a whole-daemon op). */
static VbState *
world_desired_with (VbOp *op)
{
  VbState *state;

  /* the world's configs are replaced, never edited: shared (the op
   * changes its candidate's through vb_state_lookup_mut, copy on write);
   * the part's come in as copies */
  if (op->part == NULL)
    return vb_state_share (op->candidate);
  state = vb_state_share (op->daemon->world_desired);
  vb_op_part_merge_state (op, state, op->candidate);
  return state;
}

void
vb_op_world_take (VbOp *op)
{
  VbDaemon *daemon = op->daemon;

  if (op->part == NULL)
    {
      vb_state_free (daemon->world_desired);
      daemon->world_desired = vb_state_share (op->candidate);
      g_hash_table_unref (daemon->world_running);
      daemon->world_running = vb_op_running_copy (op->running);
      return;
    }
  /* in place, under the lock: no share of the thousands of configs
   * beside the part (vb_op_save, which must leave the world as it was
   * when the save fails, shares) */
  vb_op_part_merge_state (op, daemon->world_desired, op->candidate);
  vb_op_part_merge_running (op, daemon->world_running, op->running);
}

/* What is saved is the world with this op's part in; the world takes it
 * only once it is on disk, so that it never holds what a failed save did
 * not write. */
gboolean
vb_op_save (VbOp *op, GError **error)
{
  VbDaemon *daemon = op->daemon;
  g_autoptr (VbState) next = NULL;
  gboolean ok;

  vb_op_world_lock (op);
  next = world_desired_with (op);
  ok = vb_state_store_commit (daemon->store, next, error);
  if (ok)
    {
      vb_state_free (daemon->world_desired);
      daemon->world_desired = g_steal_pointer (&next);
    }
  vb_op_world_unlock (op);
  if (!ok)
    g_prefix_error (error, _ ("saving the desired state: "));
  return ok;
}

void
vb_op_sync_links (VbOp *op)
{
  vb_op_world_lock (op);
  vb_op_world_take (op);
  vb_devlinks_sync (op->daemon->dev_dir, op->daemon->world_desired, op->daemon->world_running);
  vb_node_records_sync (op->daemon->run_dir, op->daemon->instance, op->daemon->world_desired,
                        op->daemon->world_running);
  vb_op_world_unlock (op);
}

void
vb_op_save_or_warn (VbOp *op, const char *after)
{
  g_autoptr (GError) local = NULL;

  if (!vb_op_save (op, &local))
    g_warning ("vblk: %s%s: %s", after ? "after " : "", after ? after : "", local->message);
}

void
vb_op_add_event (VbOp *op, const char *kind, const char *name, GVariant *details)
{
  VbOpEvent *event;

  if (name == NULL)
    return;
  event = g_new0 (VbOpEvent, 1);
  event->kind = g_strdup (kind);
  event->device = g_strdup (name);
  event->details = details ? g_variant_ref_sink (details) : NULL;
  g_ptr_array_add (op->events, event);
}

/* Each slot's component UUID, in slot order. */
GPtrArray *
vb_op_slot_uuids (const VbDeviceConfig *config)
{
  GPtrArray *out = g_ptr_array_new ();

  for (guint i = 0; i < config->components->len; i++)
    {
      const VbComponentConfig *c = config->components->pdata[i];
      if (vb_component_config_is_slot (c))
        g_ptr_array_add (out, c->uuid);
    }
  g_ptr_array_add (out, NULL);
  return out;
}

VbOp *
vb_op_new (VbDaemon *daemon, const char *device, VbMutateFunc mutate, VbOpMode mode,
           const char *what, VbOpDone done, gpointer user_data, GDestroyNotify destroy)
{
  VbOp *op = g_new0 (VbOp, 1);

  op->daemon = daemon;
  op->device = g_strdup (device);
  op->mutate = mutate;
  intent_init (&op->intent);
  op->mode = mode;
  op->what = g_strdup (what);
  op->status = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                      (GDestroyNotify) vb_device_status_free);
  op->events = g_ptr_array_new_with_free_func (event_free);
  op->done = done;
  op->user_data = user_data;
  op->destroy = destroy;
  return op;
}

void
vb_op_intent_start (VbOpIntent *intent, VbState *candidate, const char *name)
{
  g_autoptr (VbGraph) graph = vb_graph_new_below (candidate, name);
  g_auto (GStrv) order = vb_graph_start_order (graph, name);

  for (guint i = 0; order[i]; i++)
    {
      VbDeviceConfig *d = vb_state_lookup_mut (candidate, order[i]);
      if (d && !d->started)
        {
          d->started = TRUE;
          vb_op_intent_touch (intent, d->name);
        }
    }
}

void
vb_daemon_publish_sync (VbDaemon *daemon)
{
  if (daemon->publish)
    daemon->publish->sync (daemon);
}

void
vb_daemon_publish_sync_devices (VbDaemon *daemon, GHashTable *names)
{
  if (daemon->publish && daemon->publish->sync_devices)
    daemon->publish->sync_devices (daemon, names);
  else
    vb_daemon_publish_sync (daemon);
}

void
vb_daemon_publish_event (VbDaemon *daemon, const char *kind, const char *device, GVariant *details)
{
  if (daemon->publish)
    daemon->publish->event (daemon, kind, device, details);
  else if (details)
    g_variant_unref (g_variant_ref_sink (details));
}
