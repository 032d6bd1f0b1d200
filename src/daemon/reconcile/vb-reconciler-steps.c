/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The worker steps of an op beyond its plan: superblocks for a device just
 * created, re-adds and SetFaulty its mutate asked for, and the spares a
 * started device is told about. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-probe.h"
#include "vb-op.h"

#include <errno.h>
#include <string.h>

/* A device just created with on-component metadata gets its superblocks
 * now (every copy marked for the initial resync), so that its components
 * say whose they are before it ever starts. A failure here is no failure
 * of the request: the first start writes them as well. */
void
vb_op_format_new (VbOp *op)
{
  g_autoptr (GHashTable) block_devices = vb_op_block_devices_of (op->candidate, op->running);

  for (guint i = 0; i < op->intent.touched->len; i++)
    {
      const VbDeviceConfig *d = vb_state_lookup (op->candidate, op->intent.touched->pdata[i]);
      const VbDriver *driver = d ? vb_driver_lookup (d->driver) : NULL;
      g_autoptr (GPtrArray) paths = NULL;
      g_autoptr (GArray) infos = NULL;
      g_autoptr (GPtrArray) uuids = NULL;
      g_autoptr (GError) local = NULL;
      const VbBackend *backend;
      VbProbe probe;
      gboolean ok;

      if (d == NULL || vb_state_lookup (op->previous, d->name) || driver == NULL
          || !vb_driver_has_metadata (d->attributes)
          || vb_device_config_n_slots (d) < driver->min_components)
        continue;
      backend = vb_backend_choose (d->backend, driver, d->attributes, NULL, &local);
      if (backend == NULL || !(backend->capabilities & VB_BACKEND_CAN_FORMAT))
        continue;
      /* a start on a backend this kernel lacks is refused and the device
       * rolled back: its components must not keep its superblocks */
      g_autofree char *not_here = NULL;
      if (d->started && !backend->available (&not_here))
        continue;
      vb_probe_init (&probe, op->candidate, block_devices);
      ok = vb_probe_components (&probe, d, &paths, &infos, &local);
      vb_probe_clear (&probe);
      for (guint j = 0; ok && j < paths->len; j++)
        ok = paths->pdata[j] != NULL; /* a component device not started: at first start */
      if (!ok)
        continue;
      g_ptr_array_add (paths, NULL);
      uuids = vb_op_slot_uuids (d);
      VbBackendRequest request = {
        .name = d->name,
        .instance = op->daemon->instance,
        .uuid = d->uuid,
        .driver = driver,
        .attributes = d->attributes,
        .n_components = infos->len,
        .paths = (const char *const *) paths->pdata,
        .components = (const VbComponentInfo *) infos->data,
        .component_uuids = (const char *const *) uuids->pdata,
      };
      if (!backend->format (&request, &local))
        g_warning ("vblk: %s: writing superblocks at creation: %s", d->name, local->message);
    }
}

/* Re-adds asked for by this op's mutate: the engine takes the slot's
 * component back (only what it missed, through the bitmap). */
void
vb_op_run_readds (VbOp *op)
{
  GArray *readds = op->intent.readds;
  g_autoptr (GHashTable) block_devices = vb_op_block_devices_of (op->candidate, op->running);
  gboolean recorded = FALSE;

  for (guint i = 0; i < readds->len; i++)
    {
      const VbOpReadd *readd = &g_array_index (readds, VbOpReadd, i);
      VbDeviceConfig *d = vb_state_lookup_mut (op->candidate, readd->device);
      const VbRunning *r = d ? g_hash_table_lookup (op->running, d->uuid) : NULL;
      const VbBackend *backend = r ? vb_backend_lookup (r->backend) : NULL;
      guint slot = readd->slot;
      g_autoptr (GPtrArray) paths = NULL;
      g_autoptr (GArray) infos = NULL;
      g_autoptr (GError) local = NULL;
      VbProbe probe;
      gboolean ok;

      if (backend == NULL || backend->engine == NULL)
        {
          g_set_error (&local, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                       _ ("device '%s' is not started on a backend that re-adds components"),
                       readd->device);
        }
      else
        {
          vb_probe_init (&probe, op->candidate, block_devices);
          ok = vb_probe_components (&probe, d, &paths, &infos, &local);
          vb_probe_clear (&probe);
          if (ok && (slot >= paths->len || paths->pdata[slot] == NULL))
            g_set_error (&local, VB_ERROR, VB_ERROR_FAILED, _ ("device '%s': slot %u has no path"),
                         d->name, slot);
          else if (ok
                   && backend->engine->readd (
                       r->block_device, slot, paths->pdata[slot],
                       ((VbComponentConfig *) d->components->pdata[slot])->uuid, &local))
            /* without metadata the desired state says the slot is no
             * longer failed, only behind, at once (a restart meanwhile
             * rebuilds it instead of keeping it out) */
            recorded |= vb_device_sync_behind (d, backend, r->block_device, NULL);
        }
      if (local && op->error == NULL)
        op->error = g_error_copy (local);
    }
  if (recorded)
    vb_op_save_or_warn (op, "a re-add");
}

/* Whether slot @index of running node @block_device holds a component
 * other than @path now (the backend knows; unknown counts as no). */
static gboolean
slot_holds_other (const VbBackend *backend, const char *block_device, guint index, const char *path)
{
  g_autofree char *now
      = backend && backend->engine ? backend->engine->slot_source (block_device, index) : NULL;

  return now != NULL && strcmp (now, path) != 0;
}

/* SetFaulty asked for by this op's mutate (the engine writes superblocks). */
void
vb_op_run_faults (VbOp *op)
{
  GArray *faults = op->intent.faults;

  for (guint i = 0; i < faults->len; i++)
    {
      const VbOpFault *fault = &g_array_index (faults, VbOpFault, i);
      /* a node that went away: the slot it held, unless another component
       * took that slot meanwhile (a spare, after the node's first event) */
      const char *gone = fault->gone_node;
      gboolean release = gone != NULL;
      const VbDeviceConfig *d = vb_state_lookup (op->candidate, fault->device);
      const VbRunning *r = d ? g_hash_table_lookup (op->running, d->uuid) : NULL;
      const VbBackend *backend = r ? vb_backend_lookup (r->backend) : NULL;
      guint index = fault->index;
      g_autofree char *index_text = g_strdup_printf ("%u", index);
      const char *source = d && index < d->components->len
                               ? ((VbComponentConfig *) d->components->pdata[index])->source
                               : index_text;
      g_autoptr (GError) failed = NULL;
      GError *local = NULL;

      if (d == NULL || r == NULL)
        g_set_error (&local, VB_ERROR, VB_ERROR_NOT_SUPPORTED, _ ("device '%s' is not started"),
                     fault->device);
      else if (gone && slot_holds_other (backend, r->block_device, index, gone))
        g_debug ("vblk: %s: %s went away, but slot %u no longer holds it", d->name, gone, index);
      else
        {
          if (backend == NULL || backend->engine == NULL)
            g_set_error_literal (&failed, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, _ ("no engine"));
          else
            backend->engine->set_faulty (r->block_device, index, &failed);
          if (g_error_matches (failed, G_IO_ERROR, G_IO_ERROR_BUSY))
            g_set_error (&local, VB_ERROR, VB_ERROR_WOULD_LOSE_DATA,
                         _ ("component '%s' holds the last in-sync copy of data of '%s'"), source,
                         d->name);
          else if (g_error_matches (failed, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED))
            g_set_error (&local, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                         _ ("device '%s' (driver '%s') has no redundancy: a component cannot be "
                            "failed"),
                         d->name, d->driver);
          else if (g_error_matches (failed, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT))
            g_set_error (&local, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                         _ ("component '%s' of '%s' is not one of its slots (a spare or a replaced "
                            "one)"),
                         source, d->name);
          else if (failed)
            g_set_error (&local, VB_ERROR, VB_ERROR_FAILED, _ ("component '%s': %s"), source,
                         failed->message);
          /* it is going away: the engine lets go of its file */
          if (release && backend && backend->engine)
            backend->engine->release (r->block_device, index);
        }
      if (local && op->error == NULL)
        op->error = local;
      else if (local)
        g_error_free (local);
    }
}

/* A started device learns its spares (added, or one taken into a slot). */
/* The slot of running device @d whose component the engine replaced by
 * spare @source, or -1. */
static gint
slot_taken_by (VbOp *op, const VbDeviceConfig *d, const char *source)
{
  const VbRunning *r = g_hash_table_lookup (op->running, d->uuid);
  const VbBackend *backend = r ? vb_backend_lookup (r->backend) : NULL;
  guint slots = vb_device_config_n_slots (d);

  for (guint s = 0; backend && backend->engine && s < slots; s++)
    {
      g_autofree char *now = backend->engine->slot_source (r->block_device, s);
      if (g_strcmp0 (now, source) == 0)
        return (gint) s;
    }
  return -1;
}

/* A spare the engine put in a failed slot (now, or just before) is
 * recorded there in the desired state before the op ends, so that what
 * vblkd shows and keeps never lags the engine (the spare's job event
 * records it again, a no-op then). */
static void
record_spare_moves (VbOp *op)
{
  gboolean changed = FALSE;
  g_autoptr (GArray) part = vb_op_part_positions (op, op->candidate);

  for (guint p = 0; p < part->len; p++)
    {
      guint i = g_array_index (part, gint, p);
      const VbDeviceConfig *seen = op->candidate->devices->pdata[i];
      VbDeviceConfig *d;

      for (guint j = 0; j < seen->components->len; j++)
        {
          const VbComponentConfig *c = seen->components->pdata[j];
          VbComponentConfig *spare;
          gint slot;
          if (g_strcmp0 (c->role, "spare") != 0 || (slot = slot_taken_by (op, seen, c->source)) < 0)
            continue;
          /* its own copy, once it changes (it may be shared) */
          d = vb_state_device_mut (op->candidate, i);
          seen = d;
          spare = d->components->pdata[j];
          VbComponentConfig *old = d->components->pdata[slot];
          g_free (spare->role);
          spare->role = g_strdup_printf ("%d", slot);
          g_free (old->role);
          old->role = g_strdup ("faulty");
          d->components->pdata[slot] = spare;
          d->components->pdata[j] = old;
          changed = TRUE;
          g_message ("vblk: %s: spare %s took slot %d (%s)", d->name, spare->source, slot,
                     old->source);
        }
    }
  if (changed)
    vb_op_save_or_warn (op, "a spare took a slot");
}

gboolean
vb_op_check_spares_kept (VbOp *op, const VbDeviceConfig *d, const VbDeviceConfig *old,
                         GError **error)
{
  for (guint j = 0; old && j < old->components->len; j++)
    {
      const VbComponentConfig *c = old->components->pdata[j];
      gboolean kept = FALSE;
      gint slot;

      if (g_strcmp0 (c->role, "spare") != 0)
        continue;
      for (guint k = 0; d && k < d->components->len && !kept; k++)
        kept = strcmp (((VbComponentConfig *) d->components->pdata[k])->source, c->source) == 0;
      if (!kept && (slot = slot_taken_by (op, old, c->source)) >= 0)
        {
          g_set_error (
              error, VB_ERROR, VB_ERROR_BUSY,
              _ ("spare '%s' has just taken slot %d of '%s' (it is being rebuilt); it is no "
                 "longer a spare to remove"),
              c->source, slot, old->name);
          return FALSE;
        }
    }
  return TRUE;
}

void
vb_op_sync_spares (VbOp *op)
{
  g_autoptr (GHashTable) block_devices = vb_op_block_devices_of (op->candidate, op->running);

  for (guint i = 0; i < op->intent.touched->len; i++)
    {
      const VbDeviceConfig *d = vb_state_lookup (op->candidate, op->intent.touched->pdata[i]);
      const VbRunning *r = d ? g_hash_table_lookup (op->running, d->uuid) : NULL;
      const VbBackend *backend = r ? vb_backend_lookup (r->backend) : NULL;
      g_autoptr (GPtrArray) paths = NULL;
      g_autoptr (GPtrArray) uuids = NULL;
      g_autoptr (GError) local = NULL;
      VbProbe probe;
      gboolean ok;

      if (backend == NULL || backend->engine == NULL)
        continue;
      vb_probe_init (&probe, op->candidate, block_devices);
      ok = vb_probe_spares (&probe, d, &paths, &uuids, &local);
      vb_probe_clear (&probe);
      if (!ok)
        {
          g_warning ("vblk: %s: %s", d->name, local->message);
          continue;
        }
      backend->engine->set_spares (r->block_device, paths->len, (const char *const *) paths->pdata,
                                   (const char *const *) uuids->pdata);
    }
  record_spare_moves (op);
}

gboolean
vb_device_sync_behind (VbDeviceConfig *d, const VbBackend *backend, const char *block_device,
                       gboolean *rebuilding)
{
  const VbDriver *driver = vb_driver_lookup (d->driver);
  /* without superblocks (metadata=none on a redundant driver), the
   * desired state says which legs are behind */
  gboolean record = driver && driver->redundant && !vb_driver_has_metadata (d->attributes);
  gboolean changed = FALSE;

  if (backend == NULL || backend->engine == NULL)
    return FALSE;
  for (guint i = 0; i < d->components->len; i++)
    {
      VbComponentConfig *c = d->components->pdata[i];
      gboolean faulty, behind;
      guint64 errors;
      if (!vb_component_config_is_slot (c)
          || !backend->engine->component_status (block_device,
                                                 (guint) g_ascii_strtoull (c->role, NULL, 10),
                                                 &faulty, &behind, &errors))
        continue;
      if (rebuilding)
        *rebuilding |= behind;
      if (record && (!c->behind != !(faulty || behind) || !c->faulty != !faulty))
        {
          c->behind = faulty || behind;
          c->faulty = faulty;
          changed = TRUE;
        }
    }
  return changed;
}
