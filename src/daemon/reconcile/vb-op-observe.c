/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What an op observes: the block nodes running (found again by every
 * backend's scan), those that vanished, each device's status for D-Bus,
 * and at exit the nodes vblkd serves itself taken down. Worker thread. */
#include "config.h"

#include "engine-runtime.h"
#include "vb-claim.h"
#include "vb-op.h"
#include "vb-probe.h"

#include <string.h>
#include <sys/stat.h>

/* A device that does not run: its slots' states as its metadata says —
 * the newest of its components' superblocks (what a start would go by),
 * or the desired state for a redundant device without superblocks. */
static void
slot_states_of_stopped (VbOp *op, VbProbe *probe, const VbDeviceConfig *d, VbDeviceStatus *st)
{
  const VbSuperblock *best = NULL;

  st->faulty = st->rebuilding = 0;
  if (g_hash_table_contains (op->running, d->uuid))
    return;
  for (guint c = 0; c < d->components->len && c < 64; c++)
    {
      const VbComponentConfig *cc = d->components->pdata[c];
      g_autoptr (GError) local = NULL;
      const VbPathFacts *f;

      if (!vb_component_config_is_slot (cc))
        continue;
      if (cc->faulty)
        st->faulty |= G_GUINT64_CONSTANT (1) << c;
      else if (cc->behind)
        st->rebuilding |= G_GUINT64_CONSTANT (1) << c;
      if (!vb_driver_has_metadata (d->attributes) || cc->source[0] != '/')
        continue;
      f = vb_probe_facts (probe, cc->source, VB_INSPECT_SUPERBLOCK, &local);
      if (f && f->has_superblock && strcmp (f->superblock.device_uuid, d->uuid) == 0
          && (best == NULL || f->superblock.events > best->events))
        best = &f->superblock;
    }
  for (guint c = 0, slot = 0; best && c < d->components->len && c < 64; c++)
    {
      const VbComponentConfig *cc = d->components->pdata[c];
      if (!vb_component_config_is_slot (cc))
        continue;
      if (slot < best->n_roles && best->roles[slot].state == VB_ROLE_FAULTY)
        st->faulty |= G_GUINT64_CONSTANT (1) << c;
      /* went away (engine_meta_record_gone, md_release): not in sync,
       * whatever is at its path now (torture seed 3, step 47) */
      else if (slot < best->n_roles && best->roles[slot].state == VB_ROLE_MISSING)
        st->missing |= G_GUINT64_CONSTANT (1) << c;
      else if (slot < best->n_roles && best->roles[slot].state == VB_ROLE_REBUILDING)
        st->rebuilding |= G_GUINT64_CONSTANT (1) << c;
      slot++;
    }
}

/* Size and completeness of every device of the op's part, for D-Bus
 * (op_finished shows no other; a whole-daemon op — start-up, udev's
 * events, the policy, a scan — looks at every device: one device's
 * change costs no look at the thousands beside it). */
void
vb_op_compute_status (VbOp *op)
{
  g_autoptr (GHashTable) block_devices = vb_op_block_devices_of (op->candidate, op->running);
  g_autoptr (GArray) part = vb_op_part_positions (op, op->candidate);
  VbProbe probe;

  vb_probe_init (&probe, op->candidate, block_devices);
  for (guint p = 0; p < part->len; p++)
    {
      const VbDeviceConfig *d = op->candidate->devices->pdata[g_array_index (part, gint, p)];
      VbDeviceStatus *st = g_hash_table_lookup (op->status, d->name);
      g_autoptr (GError) local = NULL;

      if (st == NULL)
        {
          st = g_new0 (VbDeviceStatus, 1);
          g_hash_table_insert (op->status, g_strdup (d->name), st);
        }
      if (!vb_probe_validate (&probe, d, FALSE, &st->size, &st->complete, &local))
        {
          st->size = 0;
          st->complete = FALSE;
        }
      /* a running device is as large as its node, whatever became of a
       * component's path meanwhile (a disk unplugged, another disk at its
       * number) */
      const VbRunning *r = g_hash_table_lookup (op->running, d->uuid);
      if (r)
        {
          g_autoptr (GError) ignored = NULL;
          const VbPathFacts *node
              = vb_probe_facts (&probe, r->block_device, VB_INSPECT_TYPE, &ignored);
          if (node)
            st->size = node->size;
        }
      /* published as component state by the main thread, which never stats */
      st->missing = 0;
      for (guint c = 0; c < d->components->len && c < 64; c++)
        {
          const char *source = ((VbComponentConfig *) d->components->pdata[c])->source;
          if (vb_probe_source_missing (&probe, source))
            st->missing |= G_GUINT64_CONSTANT (1) << c;
        }
      slot_states_of_stopped (op, &probe, d, st);
    }
  vb_probe_clear (&probe);
}

/* Nothing holds running device @d's node (the claim's look: mounts,
 * holders, an exclusive open); @error says what does. */
static gboolean
node_unused (VbOp *op, const VbDeviceConfig *d, const char *block_device, GError **error)
{
  VbProbe probe;
  gboolean unused;

  vb_probe_init (&probe, op->candidate, NULL);
  unused = vb_claim_node_unused (&probe, d->name, block_device, error);
  vb_probe_clear (&probe);
  return unused;
}

/* At exit: exports end, and the block nodes this process serves itself
 * (engine devices) are taken down cleanly while nothing uses them, rather
 * than left to fail; the desired state keeps them started, so the next
 * vblkd starts them again. One in use stays with vblkd, or at a takeover
 * is left to the next vblkd. Kernel-run nodes stay. */
void
vb_op_stop_self_served (VbOp *op)
{
  vb_op_world_lock (op);
  g_hash_table_remove_all (op->daemon->exports);
  vb_op_world_unlock (op);
  for (guint i = 0; i < op->candidate->devices->len; i++)
    {
      const VbDeviceConfig *d = op->candidate->devices->pdata[i];
      const VbRunning *r = g_hash_table_lookup (op->running, d->uuid);
      const VbBackend *backend = r ? vb_backend_lookup (r->backend) : NULL;
      const VbBlockOps *ops;
      void *handle;
      g_autoptr (GError) local = NULL;

      if (backend == NULL || backend->engine == NULL
          || !backend->engine->block_ops (r->block_device, &ops, &handle))
        continue;
      /* in use: vblkd stays for it (vb_op_lingering), unless another
       * vblkd takes over */
      if (!node_unused (op, d, r->block_device, &local) && !op->daemon->handover
          && backend->engine->needs_server (r->block_device))
        continue;
      if (local != NULL || !backend->stop (r->block_device, op->daemon->instance, d->uuid, &local))
        {
          /* loop's FUSE file dies with vblkd; nbd and ublk hold the
           * requests for the next vblkd, which takes the node over */
          g_warning ("vblk: %s: %s; %s", d->name, local->message,
                     backend->capabilities & VB_BACKEND_SURVIVES_SERVER
                         ? "the kernel holds its requests for the next vblkd"
                         : "it stops serving when vblkd exits");
          continue;
        }
      g_message ("vblk: %s: stopped %s (served by vblkd itself); it starts again with vblkd",
                 d->name, r->block_device);
      g_hash_table_remove (op->running, d->uuid);
    }
}

/* After vb_op_stop_self_served: the devices still in use whose writes
 * wait for this process (VbEngineDeviceOps.needs_server: an md array with
 * vblk's metadata, an engine device), NULL-terminated, for
 * daemon->lingering. */
char **
vb_op_lingering (VbOp *op)
{
  GPtrArray *names = g_ptr_array_new ();

  for (guint i = 0; i < op->candidate->devices->len; i++)
    {
      const VbDeviceConfig *d = op->candidate->devices->pdata[i];
      const VbRunning *r = g_hash_table_lookup (op->running, d->uuid);
      const VbBackend *backend = r ? vb_backend_lookup (r->backend) : NULL;
      g_autoptr (GError) local = NULL;

      if (backend && backend->engine && backend->engine->needs_server (r->block_device)
          && !node_unused (op, d, r->block_device, &local))
        g_ptr_array_add (names, g_strdup (d->name));
    }
  g_ptr_array_add (names, NULL);
  return (char **) g_ptr_array_free (names, FALSE);
}

/* SIGUSR2 (vblk.shutdown, the system's last step before the power goes):
 * every running device with engine ops left as a clean stop would leave
 * it (VbEngineDeviceOps.settle), and what came of each written to
 * RUN_DIR/settled, a line "NAME: settled" or "NAME: what is left". */
void
vb_op_settle (VbOp *op)
{
  g_autoptr (GString) out = g_string_new (NULL);
  g_autofree char *path = g_build_filename (op->daemon->run_dir, "settled", NULL);
  g_autoptr (GError) error = NULL;

  for (guint i = 0; i < op->candidate->devices->len; i++)
    {
      const VbDeviceConfig *d = op->candidate->devices->pdata[i];
      const VbRunning *r = g_hash_table_lookup (op->running, d->uuid);
      const VbBackend *backend = r ? vb_backend_lookup (r->backend) : NULL;
      g_autoptr (GError) local = NULL;

      if (backend == NULL || backend->engine == NULL)
        continue;
      if (backend->engine->settle (r->block_device, &local))
        {
          g_message ("vblk: %s: settled (%s): nothing to resync at the next start", d->name,
                     r->block_device);
          g_string_append_printf (out, "%s: settled\n", d->name);
        }
      else
        {
          g_warning ("vblk: %s: not settled (%s): %s", d->name, r->block_device, local->message);
          g_string_append_printf (out, "%s: %s\n", d->name, local->message);
        }
    }
  if (!g_file_set_contents (path, out->str, (gssize) out->len, &error))
    g_warning ("vblk: %s", error->message);
}

/* Devices (of the op's part) that ran before the scan and do not now:
 * something outside vblk took their block node away. */
void
vb_op_note_vanished (VbOp *op, GHashTable *before_scan)
{
  for (guint i = 0; i < op->previous->devices->len; i++)
    {
      const VbDeviceConfig *d = op->previous->devices->pdata[i];
      const VbRunning *before = g_hash_table_lookup (before_scan, d->uuid);
      VbDeviceStatus *st;

      if (before == NULL || g_hash_table_contains (op->running, d->uuid)
          || !vb_op_in_part (op, d->name))
        continue;
      st = g_new0 (VbDeviceStatus, 1);
      st->failure
          = g_strdup_printf ("block node %s vanished (removed outside vblk)", before->block_device);
      g_hash_table_insert (op->status, g_strdup (d->name), st);
      g_warning ("vblk: %s: %s", d->name, st->failure);
      vb_op_add_event (op, "device-disappeared", d->name, NULL);
    }
}

typedef struct {
  const char *node, *uuid;
  gboolean found, same;
} ServedHere;

static void
served_here (VbEngineRuntime *rt, gpointer data)
{
  ServedHere *look = data;

  /* (one whose node went to another device's I/O is not this node's) */
  if (g_strcmp0 (rt->block_device, look->node) == 0 && vb_engine_runtime_serves (rt))
    {
      look->found = TRUE;
      look->same = g_strcmp0 (rt->uuid, look->uuid) == 0;
    }
}

/* @node is still the block node this vblkd (@instance) runs for the
 * device @uuid: there, a block device, and — a node this process serves,
 * while it still carries its runtime's I/O — its engine registry says
 * whose (under the registry's lock; such a node is never opened here, as
 * loop_scan never does), or else its backend's node_owner says so. (A
 * loop detached has no loop directory in sysfs: at 835cbaa an engine
 * device whose loop was detached so stayed 'active'.) */
static gboolean
node_still_of (const char *node, const char *instance, const char *uuid)
{
  g_auto (VbNodeOwner) owner = { 0 };
  ServedHere look = { node, uuid, FALSE, FALSE };
  struct stat st;

  if (stat (node, &st) < 0 || !S_ISBLK (st.st_mode))
    return FALSE;
  vb_engine_runtime_foreach (served_here, &look);
  if (look.found)
    return look.same;
  return vb_backends_node_owner (st.st_rdev, &owner) && !owner.internal
         && vb_node_owner_is (&owner, instance, uuid);
}

/* Not a scan of every backend: a scan detaches nodes and unmounts FUSE
 * files that no registered device owns, which only an op that runs alone
 * may do — a start on another part has its FUSE file mounted, or its node
 * attached, before it registers them (test-wipe's create failed on a
 * FUSE file unmounted so, at dfa6fa4). */
void
vb_op_observe_part (VbOp *op)
{
  g_autoptr (GArray) part = vb_op_part_positions (op, op->candidate);

  for (guint p = 0; p < part->len; p++)
    {
      const VbDeviceConfig *d = op->candidate->devices->pdata[g_array_index (part, gint, p)];
      const VbRunning *r = g_hash_table_lookup (op->running, d->uuid);

      if (r && !node_still_of (r->block_device, op->daemon->instance, d->uuid))
        g_hash_table_remove (op->running, d->uuid);
    }
}

/* UUID -> device of @state (the first, should two share one). */
static GHashTable *
devices_by_uuid (const VbState *state)
{
  GHashTable *by_uuid = g_hash_table_new (vb_uuid_hash, g_str_equal);

  for (guint i = 0; i < state->devices->len; i++)
    {
      VbDeviceConfig *d = state->devices->pdata[i];
      if (!g_hash_table_contains (by_uuid, d->uuid))
        g_hash_table_insert (by_uuid, d->uuid, d);
    }
  return by_uuid;
}

void
vb_op_scan_running (VbOp *op, GHashTable *before_scan)
{
  /* one pass over the state, not one per node found (thousands of each) */
  g_autoptr (GHashTable) by_uuid = devices_by_uuid (op->candidate);

  g_hash_table_remove_all (op->running);
  for (const VbBackend *const *b = vb_backends (); *b; b++)
    {
      g_autofree char *reason = NULL;
      g_autoptr (GError) local = NULL;
      g_autoptr (GPtrArray) found = NULL;

      if (!(*b)->available (&reason))
        continue;
      found = (*b)->scan (op->daemon->instance, &local);
      if (found == NULL)
        {
          g_warning ("vblk: scanning backend %s: %s", (*b)->name, local->message);
          continue;
        }
      for (guint i = 0; i < found->len; i++)
        {
          const VbBackendInstance *inst = found->pdata[i];
          const VbDeviceConfig *d = g_hash_table_lookup (by_uuid, inst->uuid);
          if (inst->left_behind && d && d->started)
            {
              /* not running until its device starts and takes it over */
              if (op->left_behind == NULL)
                op->left_behind = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
              g_hash_table_replace (op->left_behind, g_strdup (inst->uuid), (gpointer) (*b)->name);
              g_message ("vblk: %s: %s outlived the vblkd that served it; starting %s takes it "
                         "over",
                         d->name, inst->block_device, d->name);
              continue;
            }
          if (d && op->mode == VB_OP_STARTUP)
            g_message ("vblk: %s: adopting %s (backend %s, serving %s)", d->name,
                       inst->block_device, (*b)->name, inst->backing);
          else if (d == NULL)
            g_message ("vblk: %s belongs to no device (vblk:%s); it will be detached",
                       inst->block_device, inst->uuid);
          VbRunning *r = vb_running_new (inst->block_device, (*b)->name, d ? d->attributes : NULL);
          r->device = d ? g_strdup (d->name) : NULL;
          const VbRunning *known = g_hash_table_lookup (before_scan, inst->uuid);
          r->why = known && known->why ? g_strdup (known->why)
                                       : g_strdup ("found running when vblkd started");
          g_hash_table_replace (op->running, g_strdup (inst->uuid), r);
        }
    }
}
