/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An op's plan, executed: each step (start, update, stop) through its
 * backend; a device the request touched whose step failed is rolled back
 * to its previous configuration; then the NBD exports follow. Worker
 * thread. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-claim.h"
#include "vb-exports.h"
#include "vb-op.h"
#include "vb-probe.h"
#include "vb-testhook.h"

#include <string.h>

/* The backend a start goes through, and why (*@why). */
static const VbBackend *
start_backend (VbOp *op, const VbDeviceConfig *config, const VbDriver *driver, char **why,
               GError **error)
{
  const char *left = op->left_behind ? g_hash_table_lookup (op->left_behind, config->uuid) : NULL;
  const VbBackend *backend;
  g_autofree char *not_here = NULL;

  if (left)
    {
      /* the node a vblkd that ended left, whatever auto would pick now */
      *why = g_strdup_printf ("took over the node the vblkd that ended left running (%s)",
                              config->backend);
      return vb_backend_lookup (left);
    }
  backend = vb_backend_choose (config->backend, driver, config->attributes, why, error);
  if (backend == NULL)
    return NULL;
  if (!backend->available (&not_here))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   _ ("backend '%s' is not available here: %s"), backend->name, not_here);
      return NULL;
    }
  return backend;
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
        g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                     _ ("component '%s': that device is not started"),
                     ((VbComponentConfig *) config->components->pdata[i])->source);
        return NULL;
      }
  g_autofree char *why = NULL;
  backend = start_backend (op, config, driver, &why, error);
  if (backend == NULL)
    return NULL;

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
      (*out)->device = g_strdup (config->name);
    }
  return node;
}

gboolean
vb_op_step_update (VbOp *op, const VbStep *step, GError **error)
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
  vb_op_world_lock (op);
  vb_exports_stop (op->daemon->exports, step->uuid);
  vb_op_world_unlock (op);
  if (backend == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("%s: unknown backend '%s'"),
                   step->block_device, step->backend);
      return FALSE;
    }
  return backend->stop (step->block_device, op->daemon->instance, step->uuid, error);
}

static gboolean
concerns (VbOp *op, const char *name)
{
  for (guint i = 0; name && i < op->intent.touched->len; i++)
    if (strcmp (op->intent.touched->pdata[i], name) == 0)
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
  vb_state_reindex (op->candidate);
}

/* A start waits for the devices it is built on: one of them failed,
 * so does it. */
static void
run_start (VbOp *op, const VbStep *step, GHashTable *failed, GError **error)
{
  g_autofree char *node = NULL;
  const VbDeviceConfig *config = vb_state_lookup (op->candidate, step->name);
  g_autoptr (VbGraph) graph = vb_graph_new (op->candidate);
  g_auto (GStrv) deps = vb_graph_components_of (graph, step->name);
  VbRunning *started = NULL;

  for (guint j = 0; deps[j]; j++)
    if (g_hash_table_contains (failed, deps[j]))
      {
        g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                     _ ("device '%s' it is built on did not start"), deps[j]);
        return;
      }
  node = step_start (op, step, &started, error);
  if (node)
    {
      g_hash_table_insert (op->running, g_strdup (config->uuid), started);
      vb_op_add_event (op, "device-appeared", step->name, NULL);
    }
}

static void
run_step (VbOp *op, const VbStep *step, GHashTable *failed, GError **error)
{
  switch (step->kind)
    {
    case VB_STEP_START:
      run_start (op, step, failed, error);
      break;
    case VB_STEP_UPDATE:
      if (vb_op_step_update (op, step, error))
        {
          VbRunning *r = g_hash_table_lookup (op->running, step->uuid);
          const VbDeviceConfig *config = vb_state_lookup (op->candidate, step->name);
          VbRunning *now = vb_running_new (r->block_device, r->backend, config->attributes);
          now->why = g_strdup (r->why);
          now->device = g_strdup (config->name);
          g_hash_table_replace (op->running, g_strdup (step->uuid), now);
          vb_op_add_event (op, "reconfigured", step->name, NULL);
        }
      break;
    case VB_STEP_STOP:
      if (step_stop (op, step, error))
        {
          g_hash_table_remove (op->running, step->uuid);
          vb_op_add_event (op, "device-disappeared", step->name, NULL);
          vb_test_hook (vb_state_lookup (op->candidate, step->name ? step->name : "")
                            ? "stop:after-teardown"
                            : "delete:after-teardown");
        }
      break;
    }
}

/* A step failed: the device shows why; a device the request touched is
 * rolled back (TRUE). */
static gboolean
step_failed (VbOp *op, const VbStep *step, GHashTable *failed, const GError *error)
{
  g_warning ("vblk: %s: %s", step->name ? step->name : step->block_device, error->message);
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
      st->failure = g_strdup (error->message);
    }
  if (!concerns (op, step->name))
    return FALSE;
  if (op->error == NULL)
    op->error = g_error_copy (error);
  roll_back (op, step->name);
  return TRUE;
}

void
vb_op_execute_plan (VbOp *op)
{
  g_autoptr (GPtrArray) plan = vb_plan_compute (op->previous, op->candidate, op->running);
  g_autoptr (GHashTable) failed = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  gboolean rolled_back = FALSE;

  for (guint i = 0; i < plan->len; i++)
    {
      const VbStep *step = plan->pdata[i];
      g_autoptr (GError) local = NULL;

      /* a request acts on the devices it touched (and nodes nobody owns);
       * only start-up re-drives everything, so a device that failed is
       * not restarted behind the administrator's back by an unrelated call */
      if ((op->mode == VB_OP_CHANGE || op->mode == VB_OP_POLICY) && step->name
          && !concerns (op, step->name))
        continue;
      /* the policy records where components are; starting is its own step */
      if (op->mode == VB_OP_POLICY && step->kind == VB_STEP_START)
        continue;
      run_step (op, step, failed, &local);
      if (local)
        rolled_back |= step_failed (op, step, failed, local);
    }
  if (rolled_back)
    vb_op_save_or_warn (op, "a rollback");
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

/* Against the world, so that the exports of ops on other parts stay. */
static void
sync_world_exports (VbOp *op)
{
  VbDaemon *daemon = op->daemon;

  vb_op_world_take (op);
  vb_exports_sync (daemon->exports, daemon->world_desired, daemon->world_running, export_failed,
                   op);
}

void
vb_op_sync_exports (VbOp *op)
{
  vb_op_world_lock (op);
  sync_world_exports (op);
  if (op->export_rolled_back)
    {
      /* the device as it was, with the exports it had */
      sync_world_exports (op);
      vb_op_save_or_warn (op, "an export's rollback");
    }
  vb_op_world_unlock (op);
}
