/* The reconciler: runs one change at a time. Each op validates against
 * the real components, saves the desired state, executes the plan through
 * the backends and publishes the outcome — all blocking work on a worker
 * thread, the outcome applied on the main thread. */
#include "config.h"

#include "vb-daemon.h"
#include "vb-exports.h"
#include "vb-claim.h"
#include "vb-probe.h"
#include "vb-reconciler-private.h"
#include "vb-testhook.h"

#include <errno.h>
#include <string.h>

void
vb_device_status_free (VbDeviceStatus *status)
{
  g_free (status->failure);
  g_free (status);
}

static void
op_free (VbOp *op)
{
  vb_state_free (op->previous);
  vb_state_free (op->candidate);
  g_clear_pointer (&op->touched, g_ptr_array_unref);
  g_free (op->hook_after_persist);
  g_clear_pointer (&op->running, g_hash_table_unref);
  g_clear_pointer (&op->status, g_hash_table_unref);
  g_clear_pointer (&op->events, g_ptr_array_unref);
  g_free (op->reconfigured_from);
  g_clear_pointer (&op->left_behind, g_hash_table_unref);
  g_clear_error (&op->error);
  if (op->destroy)
    op->destroy (op->user_data);
  g_free (op);
}

static GHashTable *
running_copy (GHashTable *running)
{
  GHashTable *copy
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) vb_running_free);
  GHashTableIter iter;
  gpointer k, v;

  g_hash_table_iter_init (&iter, running);
  while (g_hash_table_iter_next (&iter, &k, &v))
    g_hash_table_insert (copy, g_strdup (k), vb_running_copy (v));
  return copy;
}

/* name -> block node of every running device of @state */
GHashTable *
vb_op_block_devices_of (const VbState *state, GHashTable *running)
{
  GHashTable *map = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);

  for (guint i = 0; i < state->devices->len; i++)
    {
      const VbDeviceConfig *d = state->devices->pdata[i];
      const VbRunning *r = g_hash_table_lookup (running, d->uuid);
      if (r)
        g_hash_table_insert (map, g_strdup (d->name), g_strdup (r->block_device));
    }
  return map;
}

static gboolean
save (VbOp *op, GError **error)
{
  if (!vb_state_save (op->candidate, op->daemon->state_path, error))
    {
      g_prefix_error (error, "saving the desired state: ");
      return FALSE;
    }
  return TRUE;
}

static gboolean
states_equal (const VbState *a, const VbState *b)
{
  g_autofree char *ja = vb_state_to_json (a);
  g_autofree char *jb = vb_state_to_json (b);

  return strcmp (ja, jb) == 0;
}

static void
add_event (VbOp *op, const char *kind, const char *name)
{
  if (name)
    g_ptr_array_add (op->events, g_strdup_printf ("%s\n%s", kind, name));
}

void
vb_op_add_event (VbOp *op, const char *kind, const char *name, GVariant *details)
{
  g_autofree char *text = g_variant_print (g_variant_ref_sink (details), TRUE);

  g_ptr_array_add (op->events, g_strdup_printf ("%s\n%s\n%s", kind, name, text));
  g_variant_unref (details);
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

static char *
step_start (VbOp *op, const VbStep *step, VbRunning **out, GError **error)
{
  const VbDeviceConfig *config = vb_state_lookup (op->candidate, step->name);
  const VbDriver *driver = vb_driver_lookup (config->driver);
  g_autoptr (GHashTable) block_devices = vb_op_block_devices_of (op->candidate, op->running);
  g_autoptr (GPtrArray) paths = NULL;
  g_autoptr (GArray) infos = NULL;
  g_autoptr (GPtrArray) component_uuids = NULL;
  g_autoptr (GPtrArray) spare_paths = NULL;
  g_autoptr (GPtrArray) spare_uuids = NULL;
  const VbBackend *backend;
  VbProbe probe;
  guint64 size;
  gboolean complete, ok;
  char *node;

  vb_probe_init (&probe, op->candidate, block_devices);
  probe.no_missing = op->mode == VB_OP_STARTUP;
  ok = vb_probe_validate (&probe, config, TRUE, &size, &complete, error)
       && vb_probe_components (&probe, config, &paths, &infos, error);
  vb_probe_clear (&probe);
  if (!ok)
    return NULL;
  for (guint i = 0; i < paths->len; i++)
    if (paths->pdata[i] == NULL && !g_array_index (infos, VbComponentInfo, i).missing)
      {
        g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "component '%s': that device is not started",
                     ((VbComponentConfig *) config->components->pdata[i])->source);
        return NULL;
      }
  const char *left = op->left_behind ? g_hash_table_lookup (op->left_behind, config->uuid) : NULL;
  g_autofree char *why = NULL;
  if (left)
    {
      /* the node a vblkd that ended left, whatever auto would pick now */
      backend = vb_backend_lookup (left);
      why = g_strdup_printf ("took over the node the vblkd that ended left running (%s)",
                             config->backend);
    }
  else
    backend = vb_backend_choose (config->backend, driver, config->attributes, &why, error);
  if (backend == NULL)
    return NULL;
  if (!left)
    {
      g_autofree char *not_here = NULL;
      if (!backend->available (&not_here))
        {
          g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                       "backend '%s' is not available here: %s", backend->name, not_here);
          return NULL;
        }
    }

  g_ptr_array_add (paths, NULL);
  component_uuids = vb_op_slot_uuids (config);
  vb_probe_init (&probe, op->candidate, block_devices);
  ok = vb_probe_spares (&probe, config, &spare_paths, &spare_uuids, error);
  vb_probe_clear (&probe);
  if (!ok)
    return NULL;
  g_autofree gboolean *behind = g_new0 (gboolean, infos->len + 1);
  g_autofree gboolean *failed = g_new0 (gboolean, infos->len + 1);
  for (guint i = 0, slot = 0; i < config->components->len; i++)
    {
      const VbComponentConfig *c = config->components->pdata[i];
      if (vb_component_config_is_slot (c) && slot < infos->len)
        {
          failed[slot] = c->faulty;
          behind[slot++] = c->behind;
        }
    }
  VbBackendRequest request = {
    .name = config->name,
    .instance = op->daemon->instance,
    .uuid = config->uuid,
    .driver = driver,
    .attributes = config->attributes,
    .n_components = infos->len,
    .paths = (const char *const *) paths->pdata,
    .components = (const VbComponentInfo *) infos->data,
    .component_uuids = (const char *const *) component_uuids->pdata,
    .out_of_sync = behind,
    .failed = failed,
    .n_spares = spare_paths->len,
    .spare_paths = (const char *const *) spare_paths->pdata,
    .spare_uuids = (const char *const *) spare_uuids->pdata,
  };
  node = backend->start (&request, error);
  if (node)
    {
      *out = vb_running_new (node, backend->name, config->attributes);
      (*out)->why = g_steal_pointer (&why);
    }
  return node;
}

static gboolean
step_update (VbOp *op, const VbStep *step, GError **error)
{
  const VbDeviceConfig *config = vb_state_lookup (op->candidate, step->name);
  const VbBackend *backend = vb_backend_lookup (step->backend);
  g_autoptr (GHashTable) block_devices = vb_op_block_devices_of (op->candidate, op->running);
  g_autoptr (GPtrArray) paths = NULL;
  g_autoptr (GArray) infos = NULL;
  VbProbe probe;
  gboolean ok;

  vb_probe_init (&probe, op->candidate, block_devices);
  ok = vb_probe_components (&probe, config, &paths, &infos, error);
  vb_probe_clear (&probe);
  if (!ok)
    return FALSE;
  g_ptr_array_add (paths, NULL);
  VbBackendRequest request = {
    .name = config->name,
    .instance = op->daemon->instance,
    .uuid = config->uuid,
    .driver = vb_driver_lookup (config->driver),
    .attributes = config->attributes,
    .n_components = infos->len,
    .paths = (const char *const *) paths->pdata,
    .components = (const VbComponentInfo *) infos->data,
  };
  return backend->update (step->block_device, &request, error);
}

static gboolean
step_stop (VbOp *op, const VbStep *step, GError **error)
{
  const VbBackend *backend = vb_backend_lookup (step->backend);

  if (step->name)
    {
      VbProbe probe;
      gboolean unused;
      vb_probe_init (&probe, op->candidate, NULL);
      unused = vb_claim_node_unused (&probe, step->name, step->block_device, error);
      vb_probe_clear (&probe);
      if (!unused)
        return FALSE;
    }
  /* clients of an export go before the node they use */
  vb_exports_stop (op->daemon->exports, step->uuid);
  if (backend == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: unknown backend '%s'", step->block_device,
                   step->backend);
      return FALSE;
    }
  return backend->stop (step->block_device, op->daemon->instance, step->uuid, error);
}

static gboolean
concerns (VbOp *op, const char *name)
{
  for (guint i = 0; name && i < op->touched->len; i++)
    if (strcmp (op->touched->pdata[i], name) == 0)
      return TRUE;
  return FALSE;
}

/* Puts @name back as it was in the previous desired state. */
static void
roll_back (VbOp *op, const char *name)
{
  const VbDeviceConfig *old = vb_state_lookup (op->previous, name);
  gint at = vb_state_index_of (op->candidate, name);

  if (at >= 0)
    g_ptr_array_remove_index (op->candidate->devices, at);
  if (old)
    {
      gint where = vb_state_index_of (op->previous, name);
      g_ptr_array_insert (op->candidate->devices, MIN ((guint) where, op->candidate->devices->len),
                          vb_device_config_copy (old));
    }
}

static void
execute_plan (VbOp *op)
{
  g_autoptr (GPtrArray) plan = vb_plan_compute (op->previous, op->candidate, op->running);
  g_autoptr (GHashTable) failed = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  gboolean rolled_back = FALSE;

  for (guint i = 0; i < plan->len; i++)
    {
      const VbStep *step = plan->pdata[i];
      g_autoptr (GError) local = NULL;
      VbRunning *started = NULL;

      /* a request acts on the devices it touched (and nodes nobody owns);
       * only start-up re-drives everything, so a device that failed is
       * not restarted behind the administrator's back by an unrelated call */
      if ((op->mode == VB_OP_CHANGE || op->mode == VB_OP_POLICY) && step->name
          && !concerns (op, step->name))
        continue;
      /* the policy records where components are; starting is its own step */
      if (op->mode == VB_OP_POLICY && step->kind == VB_STEP_START)
        continue;

      switch (step->kind)
        {
          case VB_STEP_START: {
            g_autofree char *node = NULL;
            const VbDeviceConfig *config = vb_state_lookup (op->candidate, step->name);
            g_autoptr (VbGraph) graph = vb_graph_new (op->candidate);
            g_auto (GStrv) deps = vb_graph_components_of (graph, step->name);
            for (guint j = 0; deps[j] && local == NULL; j++)
              if (g_hash_table_contains (failed, deps[j]))
                g_set_error (&local, VB_ERROR, VB_ERROR_FAILED,
                             "device '%s' it is built on did not start", deps[j]);
            if (local == NULL)
              node = step_start (op, step, &started, &local);
            if (node)
              {
                g_hash_table_insert (op->running, g_strdup (config->uuid), started);
                add_event (op, "device-appeared", step->name);
              }
            break;
          }
        case VB_STEP_UPDATE:
          if (step_update (op, step, &local))
            {
              VbRunning *r = g_hash_table_lookup (op->running, step->uuid);
              const VbDeviceConfig *config = vb_state_lookup (op->candidate, step->name);
              g_hash_table_replace (
                  op->running, g_strdup (step->uuid),
                  vb_running_new (r->block_device, r->backend, config->attributes));
              add_event (op, "reconfigured", step->name);
            }
          break;
        case VB_STEP_STOP:
          if (step_stop (op, step, &local))
            {
              g_hash_table_remove (op->running, step->uuid);
              add_event (op, "device-disappeared", step->name);
              vb_test_hook (vb_state_lookup (op->candidate, step->name ? step->name : "")
                                ? "stop:after-teardown"
                                : "delete:after-teardown");
            }
          break;
        }
      if (local == NULL)
        continue;

      g_warning ("vblk: %s: %s", step->name ? step->name : step->block_device, local->message);
      if (step->name)
        {
          g_hash_table_add (failed, g_strdup (step->name));
          VbDeviceStatus *st = g_hash_table_lookup (op->status, step->name);
          if (st == NULL)
            {
              st = g_new0 (VbDeviceStatus, 1);
              g_hash_table_insert (op->status, g_strdup (step->name), st);
            }
          g_free (st->failure);
          st->failure = g_strdup (local->message);
        }
      if (concerns (op, step->name))
        {
          if (op->error == NULL)
            op->error = g_error_copy (local);
          roll_back (op, step->name);
          rolled_back = TRUE;
        }
    }

  if (rolled_back)
    {
      g_autoptr (GError) local = NULL;
      if (!save (op, &local))
        g_warning ("vblk: %s", local->message);
    }
}

static void
export_failed (const char *device, const GError *error, gpointer user_data)
{
  VbOp *op = user_data;

  g_warning ("vblk: %s: %s", device, error->message);
  if ((op->mode == VB_OP_CHANGE || op->mode == VB_OP_POLICY) && concerns (op, device))
    {
      if (op->error == NULL)
        op->error = g_error_copy (error);
      roll_back (op, device);
      op->export_rolled_back = TRUE;
    }
}

static void
sync_exports (VbOp *op)
{
  vb_exports_sync (op->daemon->exports, op->candidate, op->running, export_failed, op);
  if (op->export_rolled_back)
    {
      g_autoptr (GError) local = NULL;
      /* the device as it was, with the exports it had */
      vb_exports_sync (op->daemon->exports, op->candidate, op->running, export_failed, op);
      if (!save (op, &local))
        g_warning ("vblk: %s", local->message);
    }
}

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
      else if (slot < best->n_roles && best->roles[slot].state == VB_ROLE_REBUILDING)
        st->rebuilding |= G_GUINT64_CONSTANT (1) << c;
      slot++;
    }
}

/* Size and completeness of every device, for D-Bus. */
static void
compute_status (VbOp *op)
{
  g_autoptr (GHashTable) block_devices = vb_op_block_devices_of (op->candidate, op->running);
  VbProbe probe;

  vb_probe_init (&probe, op->candidate, block_devices);
  for (guint i = 0; i < op->candidate->devices->len; i++)
    {
      const VbDeviceConfig *d = op->candidate->devices->pdata[i];
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

/* At exit: exports end, and the block nodes this process serves itself
 * (engine devices over FUSE) are taken down cleanly while nothing uses
 * them, rather than left to fail; the desired state keeps them started,
 * so the next vblkd starts them again. Kernel-run nodes stay. */
static void
stop_self_served (VbOp *op)
{
  g_hash_table_remove_all (op->daemon->exports);
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
      VbProbe probe;
      gboolean unused;

      vb_probe_init (&probe, op->candidate, NULL);
      unused = vb_claim_node_unused (&probe, d->name, r->block_device, &local);
      vb_probe_clear (&probe);
      if (!unused
          || !backend->stop (r->block_device, op->daemon->instance, d->uuid, &local))
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

/* Devices that ran before the scan and do not now: something outside
 * vblk took their block node away. */
static void
note_vanished (VbOp *op, GHashTable *before_scan)
{
  for (guint i = 0; i < op->previous->devices->len; i++)
    {
      const VbDeviceConfig *d = op->previous->devices->pdata[i];
      const VbRunning *before = g_hash_table_lookup (before_scan, d->uuid);
      VbDeviceStatus *st;

      if (before == NULL || g_hash_table_contains (op->running, d->uuid))
        continue;
      st = g_new0 (VbDeviceStatus, 1);
      st->failure
          = g_strdup_printf ("block node %s vanished (removed outside vblk)", before->block_device);
      g_hash_table_insert (op->status, g_strdup (d->name), st);
      g_warning ("vblk: %s: %s", d->name, st->failure);
      add_event (op, "device-disappeared", d->name);
    }
}

static void
scan_running (VbOp *op, GHashTable *before_scan)
{
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
          const VbDeviceConfig *d = NULL;
          for (guint j = 0; j < op->candidate->devices->len && d == NULL; j++)
            if (strcmp (((VbDeviceConfig *) op->candidate->devices->pdata[j])->uuid, inst->uuid)
                == 0)
              d = op->candidate->devices->pdata[j];
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
          const VbRunning *known = g_hash_table_lookup (before_scan, inst->uuid);
          r->why = known && known->why ? g_strdup (known->why)
                                       : g_strdup ("found running when vblkd started");
          g_hash_table_replace (op->running, g_strdup (inst->uuid), r);
        }
    }
}

static void
op_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  VbOp *op = data;
  g_autofree char *resolved = NULL; /* a reconfiguration's intent found at start-up */
  g_autoptr (GHashTable) block_devices = vb_op_block_devices_of (op->candidate, op->running);
  VbProbe probe;

  g_autoptr (GHashTable) before_scan = running_copy (op->running);

  if (op->mode == VB_OP_SHUTDOWN)
    {
      stop_self_served (op);
      op->applied = TRUE;
      vb_devlinks_sync (op->daemon->dev_dir, op->candidate, op->running);
      goto out;
    }
  if (op->mode == VB_OP_STARTUP)
    resolved = vb_reconfig_resolve_intent (op->daemon, op->candidate);
  if (op->mode != VB_OP_CHANGE && op->mode != VB_OP_POLICY && op->mode != VB_OP_SHUTDOWN
      && op->mode != VB_OP_RECONFIGURE)
    scan_running (op, before_scan);
  if (resolved)
    {
      /* a device that outlived the killed vblkd (the kernel's) may run
       * either table: it is loaded again from the configuration chosen */
      const VbDeviceConfig *d = vb_state_lookup (op->candidate, resolved);
      const VbRunning *r = d ? g_hash_table_lookup (op->running, d->uuid) : NULL;
      const VbBackend *b = r ? vb_backend_lookup (r->backend) : NULL;
      if (b && (b->capabilities & VB_BACKEND_CAN_RECONFIGURE)
          && !(b->capabilities & VB_BACKEND_SERVES_ENGINE))
        {
          g_autoptr (GError) local = NULL;
          VbStep step = { .kind = VB_STEP_UPDATE,
                          .name = d->name,
                          .uuid = d->uuid,
                          .block_device = r->block_device,
                          .backend = r->backend };
          if (!step_update (op, &step, &local))
            g_warning ("vblk: %s: loading its configuration again: %s", d->name, local->message);
          else
            g_message ("vblk: %s: its table was loaded again from the configuration chosen",
                       d->name);
        }
    }
  if (op->mode == VB_OP_OBSERVE)
    {
      note_vanished (op, before_scan);
      op->applied = TRUE;
      sync_exports (op);
      compute_status (op);
      vb_devlinks_sync (op->daemon->dev_dir, op->candidate, op->running);
      goto out;
    }

  /* a device the request changes is checked unless it is only being
   * stopped: a stop must work even when a component has vanished */
  vb_probe_init (&probe, op->candidate, block_devices);
  probe.instance = op->daemon->instance;
  probe.by_superblock = op->mode == VB_OP_POLICY;
  /* the policy only records where components were found (by their
   * superblocks); a device it touches may well be incomplete still, but
   * what it found is claimed as anything else is */
  for (guint i = 0; i < op->touched->len && op->error == NULL; i++)
    {
      const VbDeviceConfig *d = vb_state_lookup (op->candidate, op->touched->pdata[i]);
      const VbDeviceConfig *old = vb_state_lookup (op->previous, op->touched->pdata[i]);
      guint64 size;
      gboolean complete, only_stopping;

      if (d == NULL)
        continue;
      only_stopping = old && !d->started && old->started;
      if (only_stopping)
        continue;
      if (!vb_op_check_spares_kept (op, d, old, &op->error))
        break;
      if (op->mode == VB_OP_POLICY)
        {
          vb_claim_device (&probe, d, old,
                           old && g_hash_table_contains (op->daemon->running, d->uuid) ? old : NULL,
                           &op->error);
          continue;
        }
      if (vb_probe_validate (&probe, d, d->started, &size, &complete, &op->error)
          && (old == NULL || !vb_device_config_equal (old, d))
          && vb_claim_device (
              &probe, d, old, old && g_hash_table_contains (op->daemon->running, d->uuid) ? old : NULL,
              &op->error))
        vb_probe_check_foreign (&probe, d, &op->error);
    }
  vb_probe_clear (&probe);
  if (op->error)
    {
      /* refused: nothing changes, but what the probe saw (a component
       * gone, say) is still worth showing */
      vb_state_free (op->candidate);
      op->candidate = vb_state_copy (op->previous);
      g_clear_pointer (&op->daemon->readds, g_ptr_array_unref);
      g_clear_pointer (&op->daemon->faults, g_ptr_array_unref);
      g_clear_pointer (&op->daemon->reconfigure, g_free);
      compute_status (op);
      goto out;
    }

  if (op->mode == VB_OP_RECONFIGURE)
    {
      /* saved by the reconfiguration itself, once the swap is done; no
       * plan: the node stays */
      op->applied = TRUE;
      vb_op_reconfigure (op);
      sync_exports (op);
      compute_status (op);
      vb_devlinks_sync (op->daemon->dev_dir, op->candidate, op->running);
      goto out;
    }

  if (!states_equal (op->previous, op->candidate))
    {
      if (!save (op, &op->error))
        goto out;
      if (op->hook_after_persist)
        vb_test_hook (op->hook_after_persist);
    }
  op->applied = TRUE;
  vb_op_format_new (op);
  execute_plan (op);
  vb_op_run_readds (op);
  vb_op_run_faults (op);
  vb_op_sync_spares (op);
  sync_exports (op);
  compute_status (op);
  vb_devlinks_sync (op->daemon->dev_dir, op->candidate, op->running);
out:
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

static void
op_finished (GObject *source, GAsyncResult *result, gpointer data)
{
  VbOp *op = data;
  VbDaemon *daemon = op->daemon;

  if (op->applied)
    {
      /* the worker's outcome becomes what the daemon shows */
      vb_state_free (daemon->desired);
      daemon->desired = g_steal_pointer (&op->candidate);
      g_hash_table_unref (daemon->running);
      daemon->running = g_steal_pointer (&op->running);
      for (guint i = 0; i < daemon->desired->devices->len; i++)
        merge_status (daemon, op, daemon->desired->devices->pdata[i]);
    }
  else
    for (guint i = 0; i < daemon->desired->devices->len; i++)
      merge_status (daemon, op, daemon->desired->devices->pdata[i]);

  vb_objects_sync (daemon);
  for (guint i = 0; i < op->events->len; i++)
    {
      g_auto (GStrv) parts = g_strsplit (op->events->pdata[i], "\n", 3);
      GVariant *details
          = parts[2] ? g_variant_parse (G_VARIANT_TYPE_VARDICT, parts[2], NULL, NULL, NULL) : NULL;
      vb_objects_emit_event (daemon, parts[0], parts[1], details);
    }
  if (op->reconfigured_from)
    {
      g_auto (GStrv) parts = g_strsplit (op->reconfigured_from, "\n", 2);
      g_hash_table_replace (daemon->reconfigured, g_strdup (parts[0]), g_strdup (parts[1]));
      vb_objects_sync (daemon);
    }
  if (op->done)
    op->done (daemon, op->error, op->user_data);
  op_free (op);
  daemon->op_running = FALSE;
  if (daemon->quit_pending)
    vb_daemon_quit (daemon);
  else
    op_run_next (daemon);
}

static void
op_run_next (VbDaemon *daemon)
{
  VbOp *op;
  g_autoptr (GTask) task = NULL;

  if (daemon->op_running || g_queue_is_empty (&daemon->ops))
    return;
  op = g_queue_pop_head (&daemon->ops);
  daemon->op_running = TRUE;

  /* built now, not at submit time, so each op sees the one before it */
  op->previous = vb_state_copy (daemon->desired);
  op->candidate = vb_state_copy (daemon->desired);
  op->running = running_copy (daemon->running);
  if (op->mutate && !op->mutate (daemon, op->candidate, op->user_data, op->touched, &op->error))
    {
      if (op->done)
        op->done (daemon, op->error, op->user_data);
      op_free (op);
      daemon->op_running = FALSE;
      op_run_next (daemon);
      return;
    }

  task = g_task_new (NULL, NULL, op_finished, op);
  g_task_set_task_data (task, op, NULL);
  g_task_run_in_thread (task, op_thread);
}

void
vb_daemon_submit (VbDaemon *daemon, VbMutateFunc mutate, VbOpMode mode,
                  const char *hook_after_persist, VbOpDone done, gpointer user_data,
                  GDestroyNotify destroy)
{
  VbOp *op = g_new0 (VbOp, 1);

  op->daemon = daemon;
  op->mutate = mutate;
  op->touched = g_ptr_array_new_with_free_func (g_free);
  op->mode = mode;
  op->hook_after_persist = g_strdup (hook_after_persist);
  op->status = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                      (GDestroyNotify) vb_device_status_free);
  op->events = g_ptr_array_new_with_free_func (g_free);
  op->done = done;
  op->user_data = user_data;
  op->destroy = destroy;
  g_queue_push_tail (&daemon->ops, op);
  op_run_next (daemon);
}
