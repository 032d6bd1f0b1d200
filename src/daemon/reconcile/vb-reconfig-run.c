/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Online reconfiguration, the worker's part (the op of a Reconfigure):
 *
 *   1. the new configuration is checked against the real components (the
 *      op's probe did that), its size against the old one, and it must
 *      keep an in-sync copy;
 *   2. an intent (the new configuration) is saved beside the desired state;
 *   3. the backend swaps the started device's engine (or, stopped, writes
 *      the new role table to the superblocks);
 *   4. a device that keeps no metadata has its old superblocks erased;
 *   5. the desired state is saved with the new configuration, the intent
 *      removed.
 *
 * A vblkd killed anywhere in between finds the intent at start-up, and
 * the components decide (vb_reconfig_resolve_intent): the new
 * configuration only if their metadata already says it, else the old
 * one. Test hooks stop vblkd at each step (VBLK_TEST_STOP_AT). */
#include "config.h"

#include <inttypes.h>
#include <glib/gi18n-lib.h>

#include "metadata.h"
#include "vb-probe.h"
#include "vb-op.h"
#include "vb-reconfig.h"
#include "vb-testhook.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define INTENT_FILE "reconfigure.json"

static char *
intent_path (VbDaemon *daemon)
{
  return g_build_filename (daemon->state_dir, INTENT_FILE, NULL);
}

static gboolean
save_intent (VbDaemon *daemon, const VbDeviceConfig *d, GError **error)
{
  g_autoptr (VbState) intent = vb_state_new ();
  g_autofree char *path = intent_path (daemon);

  g_ptr_array_add (intent->devices, vb_device_config_copy (d));
  if (!vb_state_save (intent, path, error))
    {
      g_prefix_error (error, _ ("saving the reconfiguration intent: "));
      return FALSE;
    }
  return TRUE;
}

static void
remove_intent (VbDaemon *daemon)
{
  g_autofree char *path = intent_path (daemon);

  if (unlink (path) < 0 && errno != ENOENT)
    g_warning ("vblk: removing %s: %s", path, g_strerror (errno));
}

/* The superblock of @path when it belongs to device @uuid. */
static gboolean
read_superblock (const char *path, const char *uuid, VbSuperblock *sb)
{
  /* the handler opens it itself (read-only, O_DIRECT where it can) */
  return vb_metadata_vblk.read (-1, path, sb, NULL) && g_strcmp0 (sb->device_uuid, uuid) == 0;
}

/* Zeroes the superblock of @path if it is device @uuid's. */
static void
erase_superblock (const char *path, const char *uuid)
{
  VbSuperblock sb;
  void *zero = NULL;
  int fd;

  if (!read_superblock (path, uuid, &sb))
    return;
  fd = open (path, O_RDWR | O_CLOEXEC);
  if (fd < 0 || posix_memalign (&zero, 4096, vb_metadata_vblk.block_size) != 0)
    {
      if (fd >= 0)
        close (fd);
      return;
    }
  memset (zero, 0, vb_metadata_vblk.block_size);
  if (pwrite (fd, zero, vb_metadata_vblk.block_size, vb_metadata_vblk.block_offset)
          != (ssize_t) vb_metadata_vblk.block_size
      || fdatasync (fd) < 0)
    g_warning ("vblk: erasing the superblock of %s: %s", path, g_strerror (errno));
  free (zero);
  close (fd);
}

static const char *
slot_path (const VbDeviceConfig *d, guint slot)
{
  guint n = 0;

  for (guint i = 0; i < d->components->len; i++)
    {
      const VbComponentConfig *c = d->components->pdata[i];
      if (vb_component_config_is_slot (c) && n++ == slot)
        return c->source;
    }
  return NULL;
}

/* Whether the superblocks on @d's components already carry its role
 * table: the newest one of device @d names exactly @d's slots. */
static gboolean
metadata_says (const VbDeviceConfig *d)
{
  g_autoptr (GPtrArray) uuids = vb_op_slot_uuids (d);
  VbSuperblock best = { 0 };
  gboolean any = FALSE;

  for (guint i = 0; i < d->components->len; i++)
    {
      const VbComponentConfig *c = d->components->pdata[i];
      VbSuperblock sb;
      if (g_str_has_prefix (c->source, "vblk:") || !read_superblock (c->source, d->uuid, &sb))
        continue;
      if (!any || sb.events > best.events)
        best = sb;
      any = TRUE;
    }
  if (!any || best.n_roles != uuids->len - 1)
    return FALSE;
  for (guint i = 0; i < best.n_roles; i++)
    if (g_strcmp0 (best.roles[i].uuid, uuids->pdata[i]) != 0)
      return FALSE;
  return TRUE;
}

/* Whether no component of @d carries a superblock of it any more. */
static gboolean
metadata_gone (const VbDeviceConfig *d)
{
  for (guint i = 0; i < d->components->len; i++)
    {
      const VbComponentConfig *c = d->components->pdata[i];
      VbSuperblock sb;
      if (!g_str_has_prefix (c->source, "vblk:") && read_superblock (c->source, d->uuid, &sb))
        return FALSE;
    }
  return TRUE;
}

char *
vb_reconfig_resolve_intent (VbOp *op)
{
  VbDaemon *daemon = op->daemon;
  VbState *state = op->candidate;
  g_autofree char *path = intent_path (daemon);
  g_autoptr (GError) local = NULL;
  g_autoptr (VbState) intent = NULL;
  const VbDeviceConfig *want, *had;
  gboolean adopt = FALSE;
  gint at;

  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    return NULL;
  intent = vb_state_load (path, &local);
  if (intent == NULL || intent->devices->len != 1)
    {
      g_warning ("vblk: %s: %s; the desired state stays as it is", path,
                 local ? local->message : "not one device");
      remove_intent (daemon);
      return NULL;
    }
  want = intent->devices->pdata[0];
  at = vb_state_index_of (state, want->name);
  had = at >= 0 ? state->devices->pdata[at] : NULL;
  if (had && g_strcmp0 (had->uuid, want->uuid) == 0)
    {
      if (vb_reconfig_has_metadata (want))
        adopt = metadata_says (want);
      else if (vb_reconfig_has_metadata (had))
        adopt = metadata_gone (want);
    }
  g_message ("vblk: %s: a reconfiguration to %s was under way when vblkd stopped; the "
             "components say %s: it comes up as %s",
             want->name, want->driver, adopt ? "the new configuration" : "the old one",
             adopt ? want->driver
             : had ? had->driver
                   : "nothing");
  if (adopt)
    {
      VbDeviceConfig *d = vb_device_config_copy (want);
      d->started = had->started;
      vb_device_config_free (state->devices->pdata[at]);
      state->devices->pdata[at] = d;
      if (!vb_op_save (op, &local))
        {
          /* the intent stays: the next start decides again */
          g_warning ("vblk: %s", local->message);
          return g_strdup (want->name);
        }
    }
  remove_intent (daemon);
  return g_strdup (want->name);
}

/* The request for the backend: @d's components as the probe finds them. */
typedef struct {
  GPtrArray *paths;
  GArray *infos;
  GPtrArray *uuids;
  GPtrArray *spare_paths;
  GPtrArray *spare_uuids;
  VbBackendRequest request;
} Request;

static void
request_clear (Request *r)
{
  g_clear_pointer (&r->paths, g_ptr_array_unref);
  g_clear_pointer (&r->infos, g_array_unref);
  g_clear_pointer (&r->uuids, g_ptr_array_unref);
  g_clear_pointer (&r->spare_paths, g_ptr_array_unref);
  g_clear_pointer (&r->spare_uuids, g_ptr_array_unref);
}

static gboolean
request_build (VbOp *op, const VbDeviceConfig *d, Request *r, GError **error)
{
  g_autoptr (GHashTable) block_devices = vb_op_block_devices_of (op->candidate, op->running);
  VbProbe probe;
  gboolean ok;

  vb_probe_init (&probe, op->candidate, block_devices);
  ok = vb_probe_components (&probe, d, &r->paths, &r->infos, error)
       && vb_probe_spares (&probe, d, &r->spare_paths, &r->spare_uuids, error);
  vb_probe_clear (&probe);
  if (!ok)
    return FALSE;
  for (guint i = 0; i < r->paths->len; i++)
    if (r->paths->pdata[i] == NULL && !g_array_index (r->infos, VbComponentInfo, i).missing)
      {
        g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                     _ ("component '%s': that device is not started"), slot_path (d, i));
        return FALSE;
      }
  g_ptr_array_add (r->paths, NULL);
  r->uuids = vb_op_slot_uuids (d);
  r->request = (VbBackendRequest){
    .name = d->name,
    .instance = op->daemon->instance,
    .uuid = d->uuid,
    .driver = vb_driver_lookup (d->driver),
    .attributes = d->attributes,
    .n_components = r->infos->len,
    .paths = (const char *const *) r->paths->pdata,
    .components = (const VbComponentInfo *) r->infos->data,
    .component_uuids = (const char *const *) r->uuids->pdata,
    .n_spares = r->spare_paths->len,
    .spare_paths = (const char *const *) r->spare_paths->pdata,
    .spare_uuids = (const char *const *) r->spare_uuids->pdata,
  };
  return TRUE;
}

/* What configuration @d holds; with @node (the device runs) no more than
 * the device holds: its node's size, which larger components never grew.
 * (A smaller disk at a failed slot's path makes both the old and the new
 * configuration seem small alike: the engine keeps such a slot out.) */
static guint64
size_of (VbOp *op, const VbDeviceConfig *d, const char *node, GError **error)
{
  g_autoptr (GHashTable) block_devices = vb_op_block_devices_of (op->candidate, op->running);
  VbProbe probe;
  guint64 size = 0;
  gboolean complete, ok;

  vb_probe_init (&probe, op->candidate, block_devices);
  ok = vb_probe_validate (&probe, d, FALSE, &size, &complete, error);
  if (ok && node)
    {
      g_autoptr (GError) ignored = NULL;
      const VbPathFacts *f = vb_probe_facts (&probe, node, VB_INSPECT_TYPE, &ignored);
      if (f && f->is_block && f->size > 0)
        size = MIN (size, f->size);
    }
  vb_probe_clear (&probe);
  return ok ? size : 0;
}

/* Refuses a new configuration none of whose slots holds an in-sync copy
 * now (the running engine's view). */
static gboolean
keeps_a_copy (const VbDeviceConfig *old, const VbDeviceConfig *d, const VbBackend *backend,
              const char *block_device, GError **error)
{
  GString *in_sync = g_string_new (NULL);
  guint n = 0, known = 0;

  if (backend->engine == NULL)
    return TRUE;
  for (guint i = 0; i < old->components->len; i++)
    {
      const VbComponentConfig *c = old->components->pdata[i];
      gboolean faulty, rebuilding, kept = FALSE;
      guint64 errors;
      if (!vb_component_config_is_slot (c)
          || !backend->engine->component_status (block_device,
                                                 (guint) g_ascii_strtoull (c->role, NULL, 10),
                                                 &faulty, &rebuilding, &errors))
        continue;
      known++;
      if (faulty || rebuilding)
        continue;
      for (guint j = 0; j < d->components->len; j++)
        {
          const VbComponentConfig *k = d->components->pdata[j];
          kept |= vb_component_config_is_slot (k) && strcmp (k->source, c->source) == 0;
        }
      if (kept)
        n++;
      g_string_append_printf (in_sync, "%s%s", in_sync->len ? ", " : "", c->source);
    }
  /* no status at all: not an engine device (the backend says what it can do) */
  if (n == 0 && known > 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_WOULD_LOSE_DATA,
                   _ ("device '%s': the new configuration keeps no in-sync copy of the data (in "
                      "sync now: %s); nothing changed"),
                   old->name, in_sync->len ? in_sync->str : "none");
      g_string_free (in_sync, TRUE);
      return FALSE;
    }
  g_string_free (in_sync, TRUE);
  return TRUE;
}

static void
fail (VbOp *op, GError *error)
{
  /* nothing was saved: the old configuration stays */
  vb_state_free (op->candidate);
  op->candidate = vb_state_share (op->previous);
  g_propagate_error (&op->error, error);
}

/* One reconfiguration on its way. */
typedef struct {
  const VbDeviceConfig *old; /* in op->previous */
  const VbDeviceConfig *d;   /* the new one, in op->candidate */
  const VbRunning *r;        /* its node, or NULL: stopped */
  const VbBackend *backend;
  guint64 old_size, new_size;
  VbReconfigureReport report;
} Swap;

/* Stopped, no superblocks: the desired state says which legs are behind;
 * one must not be. */
static gboolean
stopped_keeps_a_copy (const VbDeviceConfig *d, GError **error)
{
  gboolean any = FALSE;

  for (guint i = 0; i < d->components->len; i++)
    {
      const VbComponentConfig *c = d->components->pdata[i];
      any |= vb_component_config_is_slot (c) && !c->behind;
    }
  if (!any)
    g_set_error (error, VB_ERROR, VB_ERROR_WOULD_LOSE_DATA,
                 _ ("device '%s': the new configuration keeps no in-sync copy of the data; nothing "
                    "changed"),
                 d->name);
  return any;
}

/* Step 1: the data must still fit, and an in-sync copy must stay. */
static gboolean
check (VbOp *op, Swap *swap, GError **error)
{
  /* the data is what the device holds now, not what its old
   * components could hold (torture seed 2721284830: raid1 legs that were
   * all larger disks, then a leg of the device's size refused) */
  swap->old_size = size_of (op, swap->old, swap->r ? swap->r->block_device : NULL, NULL);
  swap->new_size = size_of (op, swap->d, NULL, error);
  if (error && *error)
    return FALSE;
  if (swap->new_size < swap->old_size)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_WOULD_LOSE_DATA,
                   _ ("device '%s': the new configuration holds %" PRIu64
                      " bytes, the device %" PRIu64
                      ": the end of the data would be cut off; nothing changed"),
                   swap->d->name, swap->new_size, swap->old_size);
      return FALSE;
    }
  if (swap->r == NULL && !vb_reconfig_has_metadata (swap->d))
    return stopped_keeps_a_copy (swap->d, error);
  return swap->r == NULL
         || keeps_a_copy (swap->old, swap->d, swap->backend, swap->r->block_device, error);
}

gboolean
vb_reconfig_keeps_a_copy (VbOp *op, GError **error)
{
  const char *name = op->intent.reconfigure;
  const VbDeviceConfig *old, *d;
  const VbRunning *r;
  const VbBackend *backend;

  if (name == NULL || (old = vb_state_lookup (op->previous, name)) == NULL
      || (d = vb_state_lookup_mut (op->candidate, name)) == NULL
      || (r = g_hash_table_lookup (op->running, d->uuid)) == NULL
      || (backend
          = vb_backend_choose (r->backend, vb_driver_lookup (d->driver), d->attributes, NULL, NULL))
             == NULL)
    return TRUE;
  return keeps_a_copy (old, d, backend, r->block_device, error);
}

/* Steps 2 and 3: the intent saved, then the engine swapped (or, stopped,
 * the new role table written). On failure the intent goes. */
static gboolean
swap_engine (VbOp *op, Swap *swap, GError **error)
{
  const VbRunning *r = swap->r;
  const VbBackend *backend = swap->backend;
  guint timeout_ms = op->intent.reconfigure_timeout_ms;
  VbReconfigureReport report = { 0 };
  g_autoptr (GError) local = NULL;
  Request req = { 0 };

  if (!request_build (op, swap->d, &req, error) || !save_intent (op->daemon, swap->d, error))
    {
      request_clear (&req);
      return FALSE;
    }
  vb_test_hook ("reconfigure:intent-saved");
  if (r)
    {
      if (!(backend->capabilities & VB_BACKEND_CAN_RECONFIGURE))
        g_set_error (&local, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                     _ ("backend %s cannot reconfigure a started device"), backend->name);
      else
        backend->reconfigure (r->block_device, &req.request, timeout_ms, &report, &local);
    }
  else if (vb_reconfig_has_metadata (swap->d) && (backend->capabilities & VB_BACKEND_CAN_FORMAT))
    {
      req.request.reconfigure = TRUE;
      backend->format (&req.request, &local);
    }
  request_clear (&req);
  swap->report = report;
  if (local)
    {
      remove_intent (op->daemon);
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  return TRUE;
}

/* Step 4: superblocks that no longer describe the device go: this is the
 * point of no return for a device that keeps no metadata. */
static void
erase_stale_superblocks (const VbDeviceConfig *old, const VbDeviceConfig *d)
{
  for (guint i = 0; i < old->components->len && vb_reconfig_has_metadata (old); i++)
    {
      const VbComponentConfig *c = old->components->pdata[i];
      gboolean kept = FALSE;
      for (guint j = 0; j < d->components->len; j++)
        kept |= strcmp (((VbComponentConfig *) d->components->pdata[j])->source, c->source) == 0;
      if (!g_str_has_prefix (c->source, "vblk:") && (!kept || !vb_reconfig_has_metadata (d)))
        erase_superblock (c->source, d->uuid);
    }
}

/* The "reconfigured" event; a rebuild that runs keeps the old
 * configuration for show. */
static void
report (VbOp *op, const Swap *swap, const VbDeviceConfig *nd, gboolean rebuilding)
{
  g_autofree char *was = vb_reconfig_describe (swap->old);
  g_autofree char *now = vb_reconfig_describe (nd);
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  g_variant_builder_add (&b, "{sv}", "old", g_variant_new_string (was));
  g_variant_builder_add (&b, "{sv}", "new", g_variant_new_string (now));
  g_variant_builder_add (&b, "{sv}", "old-driver", g_variant_new_string (swap->old->driver));
  g_variant_builder_add (&b, "{sv}", "new-driver", g_variant_new_string (nd->driver));
  g_variant_builder_add (&b, "{sv}", "held-us", g_variant_new_int64 (swap->report.held_us));
  g_variant_builder_add (&b, "{sv}", "old-size", g_variant_new_uint64 (swap->old_size));
  g_variant_builder_add (&b, "{sv}", "new-size", g_variant_new_uint64 (swap->new_size));
  g_variant_builder_add (&b, "{sv}", "started", g_variant_new_boolean (swap->r != NULL));
  vb_op_add_event (op, "reconfigured", nd->name, g_variant_builder_end (&b));
  if (rebuilding)
    {
      g_free (op->reconfigured);
      g_free (op->reconfigured_from);
      op->reconfigured = g_strdup (nd->name);
      op->reconfigured_from = g_steal_pointer (&was);
    }
}

/* Step 5: the desired state saved with the new configuration, the intent
 * removed. */
static void
commit (VbOp *op, const Swap *swap)
{
  VbDeviceConfig *nd = vb_state_lookup_mut (op->candidate, swap->d->name);
  gboolean rebuilding = FALSE;
  g_autoptr (GError) local = NULL;

  /* without superblocks, the desired state says which legs are behind */
  if (swap->r)
    vb_device_sync_behind (nd, swap->backend, swap->r->block_device, &rebuilding);
  if (!vb_op_save (op, &local))
    {
      /* the device runs the new configuration: the intent stays, and the
       * next start goes by the components */
      g_propagate_error (&op->error, g_steal_pointer (&local));
      return;
    }
  remove_intent (op->daemon);
  vb_test_hook ("reconfigure:committed");
  if (swap->r)
    {
      VbRunning *now = vb_running_new (swap->r->block_device, swap->r->backend, nd->attributes);
      now->why = g_strdup (swap->r->why);
      now->device = g_strdup (nd->name);
      g_hash_table_replace (op->running, g_strdup (nd->uuid), now);
    }
  report (op, swap, nd, rebuilding);
}

void
vb_op_reconfigure (VbOp *op)
{
  const char *name = op->intent.reconfigure;
  g_autoptr (GError) local = NULL;
  Swap swap = { 0 };

  if (name == NULL)
    {
      /* only the backend of a stopped device changed: saved as it is */
      if (!vb_op_save (op, &local))
        fail (op, g_steal_pointer (&local));
      return;
    }
  swap.old = vb_state_lookup (op->previous, name);
  swap.d = vb_state_lookup_mut (op->candidate, name);
  if (swap.old == NULL || swap.d == NULL)
    return;
  swap.r = g_hash_table_lookup (op->running, swap.d->uuid);
  swap.backend
      = vb_backend_choose (swap.r ? swap.r->backend : swap.d->backend,
                           vb_driver_lookup (swap.d->driver), swap.d->attributes, NULL, &local);
  if (swap.backend == NULL || !check (op, &swap, &local) || !swap_engine (op, &swap, &local))
    {
      fail (op, g_steal_pointer (&local));
      return;
    }
  erase_stale_superblocks (swap.old, swap.d);
  vb_test_hook ("reconfigure:before-commit");
  commit (op, &swap);
}
