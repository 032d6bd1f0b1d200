/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* See engine-runtime.h. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "engine-runtime.h"

#include "engine.h"
#include "vb-error.h"
#include "vb-testhook.h"
#include "vb-report.h"

#include <errno.h>
#include <string.h>

static GMutex runtimes_lock;
static GHashTable *runtimes; /* block_device -> VbEngineRuntime* */

gboolean
vb_engine_runtime_serves (VbEngineRuntime *rt)
{
  return rt->serves == NULL || rt->serves (rt);
}

/* The one place a node's name leads to its runtime: not to one whose node
 * now carries another device's I/O (a loop detached behind vblkd's back
 * and attached again): what is asked of that node must not reach this
 * device's engine. */
VbEngineRuntime *
vb_engine_runtime_lookup (const char *block_device)
{
  VbEngineRuntime *rt;

  g_mutex_lock (&runtimes_lock);
  rt = runtimes && block_device ? g_hash_table_lookup (runtimes, block_device) : NULL;
  g_mutex_unlock (&runtimes_lock);
  return rt && vb_engine_runtime_serves (rt) ? rt : NULL;
}

void
vb_engine_runtime_foreach (void (*func) (VbEngineRuntime *rt, gpointer data), gpointer data)
{
  GHashTableIter iter;
  gpointer value;

  g_mutex_lock (&runtimes_lock);
  if (runtimes)
    {
      g_hash_table_iter_init (&iter, runtimes);
      while (g_hash_table_iter_next (&iter, NULL, &value))
        func (value, data);
    }
  g_mutex_unlock (&runtimes_lock);
}

/* The engine of @block_device held against a swap (NULL: not an engine
 * device of this process); engine_put lets it go. */
static VbEngine *
engine_get (const char *block_device, VbEngineRuntime **out)
{
  VbEngineRuntime *rt = vb_engine_runtime_lookup (block_device);

  *out = rt;
  if (rt == NULL)
    return NULL;
  vb_engine_switch_lock (rt->sw);
  return vb_engine_switch_engine (rt->sw);
}

static void
engine_put (VbEngineRuntime *rt)
{
  if (rt)
    vb_engine_switch_unlock (rt->sw);
}

/* Who the device of @request and its components are, for the engine. */
static VbEngineIdentity
identity_of (const VbBackendRequest *request)
{
  VbEngineIdentity identity = {
    .uuid = request->uuid,
    .component_uuids = request->component_uuids,
    .n_spares = request->n_spares,
    .spare_paths = request->spare_paths,
    .spare_uuids = request->spare_uuids,
    .out_of_sync = request->out_of_sync,
    .failed = request->failed,
  };
  return identity;
}

/* What a device stacked on @path calls: the switch of an engine device of
 * this process (in place, no kernel round trip), or nothing. */
static void
source_for (const char *path, VbEngineSource *source)
{
  VbEngineRuntime *dep = vb_engine_runtime_lookup (path);

  source->path = path;
  source->ops = dep ? &vb_engine_switch_ops : NULL;
  source->handle = dep ? dep->sw : NULL;
}

static void
on_engine_job (VbEngine *engine, const VbEngineJob *job, gpointer user_data)
{
  vb_backends_report_job (user_data, job);
}

static void
on_engine_failure (VbEngine *engine, guint component, int error, gpointer user_data)
{
  vb_backends_report_failure (user_data, component, error);
}

static gboolean
read_only_of (const VbBackendRequest *request)
{
  return g_strcmp0 (g_hash_table_lookup (request->attributes, "read_only"), "true") == 0;
}

/* The device @uuid has no engine of this process yet: one left from an
 * earlier start — its loop detached behind vblkd's back — still runs its
 * jobs and may serve what is stacked on it in place; a second engine on
 * the same components would write them both. */
static gboolean
none_running (const char *uuid, GError **error)
{
  g_autofree char *node = NULL;
  GHashTableIter iter;
  gpointer value;

  g_mutex_lock (&runtimes_lock);
  if (runtimes)
    {
      g_hash_table_iter_init (&iter, runtimes);
      while (node == NULL && g_hash_table_iter_next (&iter, NULL, &value))
        if (g_strcmp0 (((VbEngineRuntime *) value)->uuid, uuid) == 0)
          node = g_strdup (((VbEngineRuntime *) value)->block_device);
    }
  g_mutex_unlock (&runtimes_lock);
  if (node == NULL)
    return TRUE;
  g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
               _ ("the engine of an earlier start still runs in vblkd (its node %s was detached "
                  "outside vblk); it ends with vblkd: restart vblkd to start the device again"),
               node);
  return FALSE;
}

VbEngineRuntime *
vb_engine_runtime_new (const VbBackendRequest *request, GError **error)
{
  g_autofree VbEngineSource *sources = NULL;
  VbEngineIdentity identity = identity_of (request);
  VbEngineRuntime *rt;
  VbEngine *engine;

  if (!none_running (request->uuid, error))
    return NULL;
  sources = g_new0 (VbEngineSource, request->n_components);
  for (guint i = 0; i < request->n_components; i++)
    source_for (request->paths[i], &sources[i]);
  engine
      = vb_engine_new (request->name, request->driver, request->attributes, request->n_components,
                       sources, request->components, &identity, read_only_of (request), error);
  if (engine == NULL)
    return NULL;
  rt = g_new0 (VbEngineRuntime, 1);
  rt->uuid = g_strdup (request->uuid);
  rt->sw = vb_engine_switch_new (engine);
  vb_engine_set_failure_func (engine, on_engine_failure, rt->uuid);
  vb_engine_set_job_func (engine, on_engine_job, rt->uuid);
  return rt;
}

void
vb_engine_runtime_free (VbEngineRuntime *rt)
{
  if (rt == NULL)
    return;
  /* the transport first: nothing calls the switch any more */
  if (rt->transport && rt->transport_free)
    rt->transport_free (rt->transport);
  vb_engine_switch_free (rt->sw);
  g_free (rt->uuid);
  g_free (rt->block_device);
  g_free (rt);
}

void
vb_engine_runtime_register (VbEngineRuntime *rt, const char *block_device)
{
  rt->block_device = g_strdup (block_device);
  g_mutex_lock (&runtimes_lock);
  if (runtimes == NULL)
    runtimes = g_hash_table_new (g_str_hash, g_str_equal);
  /* (over one whose node went to another: that one stays unreachable) */
  g_hash_table_replace (runtimes, rt->block_device, rt);
  g_mutex_unlock (&runtimes_lock);
  /* resync or rebuild, if assembly found one necessary */
  vb_engine_activate (vb_engine_switch_engine (rt->sw));
}

gboolean
vb_engine_runtime_take (VbEngineRuntime *rt)
{
  gboolean taken = FALSE;

  g_mutex_lock (&runtimes_lock);
  if (runtimes && g_hash_table_lookup (runtimes, rt->block_device) == rt)
    taken = g_hash_table_remove (runtimes, rt->block_device);
  g_mutex_unlock (&runtimes_lock);
  return taken;
}

VbEngineRuntime *
vb_engine_runtime_unregister (const char *block_device)
{
  VbEngineRuntime *rt = NULL;

  g_mutex_lock (&runtimes_lock);
  if (runtimes && (rt = g_hash_table_lookup (runtimes, block_device)))
    g_hash_table_remove (runtimes, block_device);
  g_mutex_unlock (&runtimes_lock);
  return rt;
}

/* The engine's own assembly of a fresh device, without starting it. For a
 * reconfiguration of a stopped device, the new role table (closed clean:
 * the next start rebuilds the slots that are new). */
gboolean
vb_engine_runtime_format (const VbBackendRequest *request, GError **error)
{
  g_autofree VbEngineSource *sources = g_new0 (VbEngineSource, request->n_components);
  VbEngineIdentity identity = {
    .uuid = request->uuid,
    .component_uuids = request->component_uuids,
    .reconfigure = request->reconfigure,
  };
  VbEngine *engine;

  for (guint i = 0; i < request->n_components; i++)
    source_for (request->paths[i], &sources[i]);
  engine
      = vb_engine_new (request->name, request->driver, request->attributes, request->n_components,
                       sources, request->components, &identity, FALSE, error);
  if (engine == NULL)
    return FALSE;
  if (request->reconfigure)
    vb_engine_free (engine);
  else
    vb_engine_free_unclean (engine);
  return TRUE;
}

gboolean
vb_engine_runtime_supports (const VbDriver *driver, GHashTable *attributes, char **reason)
{
  if (driver->extent == NULL && driver->map == NULL)
    {
      *reason = g_strdup_printf ("driver '%s' has no placement for the engine", driver->name);
      return FALSE;
    }
  if (attributes && g_strcmp0 (g_hash_table_lookup (attributes, "metadata"), "md1") == 0)
    {
      *reason = g_strdup ("metadata=md1 is an mdadm array, which md runs (backend kernel)");
      return FALSE;
    }
  if (driver->extent
      && !(attributes && g_strcmp0 (g_hash_table_lookup (attributes, "engine"), "true") == 0))
    {
      *reason = g_strdup_printf ("driver '%s' runs on a kernel loop device straight on its "
                                 "component (backend loop), without the engine; attribute "
                                 "engine=true asks for the engine",
                                 driver->name);
      return FALSE;
    }
  return TRUE;
}

gboolean
vb_engine_runtime_component_status (const char *block_device, guint component, gboolean *faulty,
                                    gboolean *rebuilding, guint64 *errors)
{
  VbEngineRuntime *rt;
  VbEngine *e = engine_get (block_device, &rt);
  gboolean ok = e && component < vb_engine_n_components (e);

  if (ok)
    {
      *faulty = vb_engine_component_faulty (e, component);
      *rebuilding = vb_engine_component_rebuilding (e, component);
      *errors = vb_engine_component_errors (e, component);
    }
  engine_put (rt);
  return ok;
}

char *
vb_engine_runtime_slot_source (const char *block_device, guint slot)
{
  VbEngineRuntime *rt;
  VbEngine *e = engine_get (block_device, &rt);
  char *path
      = e && slot < vb_engine_n_components (e) ? vb_engine_component_path_dup (e, slot) : NULL;

  engine_put (rt);
  return path;
}

void
vb_engine_runtime_release (const char *block_device, guint component)
{
  VbEngineRuntime *rt;
  VbEngine *e = engine_get (block_device, &rt);

  if (e && component < vb_engine_n_components (e))
    vb_engine_release_component (e, component);
  engine_put (rt);
}

gboolean
vb_engine_runtime_component_missing (const char *block_device, guint component)
{
  VbEngineRuntime *rt;
  VbEngine *e = engine_get (block_device, &rt);
  gboolean r
      = e && component < vb_engine_n_components (e) && vb_engine_component_missing (e, component);

  engine_put (rt);
  return r;
}

gboolean
vb_engine_runtime_lost_data (const char *block_device)
{
  VbEngineRuntime *rt;
  VbEngine *e = engine_get (block_device, &rt);
  gboolean r = e && vb_engine_lost_data (e);

  engine_put (rt);
  return r;
}

gboolean
vb_engine_runtime_set_faulty (const char *block_device, guint component, GError **error)
{
  VbEngineRuntime *rt;
  VbEngine *e = engine_get (block_device, &rt);
  int r = e == NULL                                 ? -ENOTSUP
          : component >= vb_engine_n_components (e) ? -EINVAL
                                                    : vb_engine_set_faulty (e, component);

  engine_put (rt);
  return vb_backend_errno (r, error);
}

/* The switch, so that a reconfiguration reaches every user of the device. */
gboolean
vb_engine_runtime_block_ops (const char *block_device, const VbBlockOps **ops, void **handle)
{
  VbEngineRuntime *rt = vb_engine_runtime_lookup (block_device);

  if (rt == NULL)
    return FALSE;
  *ops = &vb_engine_switch_ops;
  *handle = rt->sw;
  return TRUE;
}

gboolean
vb_engine_runtime_check (const char *block_device, gboolean repair, guint64 *job, GError **error)
{
  VbEngineRuntime *rt;
  VbEngine *e = engine_get (block_device, &rt);
  gint64 r = e ? vb_engine_check (e, repair) : -ENOTSUP;

  engine_put (rt);
  if (r >= 0)
    *job = (guint64) r;
  return vb_backend_errno ((int) MIN (r, 0), error);
}

gboolean
vb_engine_runtime_cancel_job (const char *block_device, guint64 job, GError **error)
{
  VbEngineRuntime *rt;
  VbEngine *e = engine_get (block_device, &rt);
  int r = e ? vb_engine_cancel_job (e, job) : -ESRCH;

  engine_put (rt);
  return vb_backend_errno (r, error);
}

/* @path is served in place by this vblkd: its functions take the data in
 * memory, which requests in the kernel's buffers do not have. */
static void
zero_copy_refusal (const char *block_device, const char *path, GError **error)
{
  g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
               _ ("%s is served with ublk zero copy and %s is a device this vblkd serves in "
                  "place, which needs the data in memory; stop %s and start it again (it then "
                  "copies)"),
               block_device, path, block_device);
}

gboolean
vb_engine_runtime_readd (const char *block_device, guint slot, const char *path, const char *uuid,
                         GError **error)
{
  VbEngineRuntime *rt;
  VbEngine *e = engine_get (block_device, &rt);
  VbEngineSource source;
  gboolean ok = FALSE;

  /* an engine device of this process is called in place, as at start */
  source_for (path, &source);
  if (e == NULL)
    g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                 _ ("%s: not an engine device of this vblkd"), block_device);
  else if (rt->zero_copy && source.ops)
    zero_copy_refusal (block_device, path, error);
  else if (slot >= vb_engine_n_components (e))
    g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, _ ("%s: no slot %u"), block_device,
                 slot);
  else
    ok = vb_engine_readd (e, slot, &source, uuid, error) == 0;
  engine_put (rt);
  return ok;
}

void
vb_engine_runtime_set_spares (const char *block_device, guint n, const char *const *paths,
                              const char *const *uuids)
{
  VbEngineRuntime *rt;
  VbEngine *e = engine_get (block_device, &rt);

  if (e)
    vb_engine_set_spares (e, n, paths, uuids);
  engine_put (rt);
}

gboolean
vb_engine_runtime_update (const char *block_device, const VbBackendRequest *request, GError **error)
{
  VbEngineRuntime *rt;
  VbEngine *engine = engine_get (block_device, &rt);

  if (engine == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("%s: not an engine device of this vblkd"),
                   block_device);
      return FALSE;
    }
  vb_engine_update (engine, request->attributes);
  engine_put (rt);
  return TRUE;
}

/* What the running engine @old knows of the component at @path, kept by
 * the new one: metadata=none: a slot is behind unless it is an in-sync
 * component of the running engine (the superblocks say it where there
 * are some); a kept component keeps its error count and its state (a
 * faulty one stays faulty) and, for a plain file, its open fd. */
static void
kept_component (VbEngine *old, const char *path, VbEngineSource *source, gboolean *behind,
                gboolean *failed, guint64 *errors)
{
  int held_fd = -1;

  *behind = TRUE;
  for (guint j = 0; j < vb_engine_n_components (old); j++)
    if (g_strcmp0 (path, vb_engine_component_path (old, j)) == 0)
      {
        *behind = !vb_engine_component_in_sync (old, j);
        *failed = vb_engine_component_faulty (old, j);
        *errors = vb_engine_component_errors (old, j);
        held_fd = vb_engine_component_fd (old, j);
      }
  source_for (path, source);
  if (source->ops == NULL && held_fd >= 0)
    {
      source->has_fd = TRUE;
      source->fd = held_fd;
    }
}

/* New requests held and those in flight drained (at most @timeout_ms);
 * on failure @old goes on as it was. */
static gboolean
suspend (VbEngineRuntime *rt, VbEngine *old, const char *block_device, guint timeout_ms,
         GError **error)
{
  int r = vb_engine_switch_suspend (rt->sw, timeout_ms);

  if (r >= 0)
    return TRUE;
  vb_engine_resume (old);
  if (r == -ETIMEDOUT)
    g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                 _ ("%s: the requests in flight did not finish within %u ms; the "
                    "reconfiguration was abandoned and the device goes on as it was"),
                 block_device, timeout_ms);
  else
    g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                 _ ("%s: flushing before the swap: %s; the device goes on as it was"), block_device,
                 g_strerror (-r));
  return FALSE;
}

gboolean
vb_engine_runtime_reconfigure (const char *block_device, const VbBackendRequest *request,
                               guint timeout_ms, VbReconfigureReport *report, GError **error)
{
  VbEngineRuntime *rt = vb_engine_runtime_lookup (block_device);
  g_autofree VbEngineSource *sources = g_new0 (VbEngineSource, request->n_components);
  g_autofree gboolean *behind = g_new0 (gboolean, request->n_components);
  g_autofree gboolean *failed = g_new0 (gboolean, request->n_components);
  g_autofree guint64 *errors = g_new0 (guint64, request->n_components);
  g_autoptr (GError) local = NULL;
  VbEngine *old, *engine;

  memset (report, 0, sizeof *report);
  if (rt == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   _ ("%s: not an engine device of this vblkd"), block_device);
      return FALSE;
    }
  old = vb_engine_switch_engine (rt->sw);
  report->old_size = vb_engine_ops.size (old);
  for (guint i = 0; i < request->n_components; i++)
    {
      kept_component (old, request->paths[i], &sources[i], &behind[i], &failed[i], &errors[i]);
      if (rt->zero_copy && sources[i].ops)
        {
          zero_copy_refusal (block_device, request->paths[i], error);
          return FALSE;
        }
    }
  VbEngineIdentity identity = identity_of (request);
  identity.reconfigure = TRUE;
  identity.out_of_sync = behind;
  identity.failed = failed;
  identity.errors = errors;

  /* nothing but requests touches the components from here on */
  vb_engine_quiesce (old);
  if (!suspend (rt, old, block_device, timeout_ms, error))
    return FALSE;
  vb_test_hook ("reconfigure:suspended");
  engine
      = vb_engine_new (request->name, request->driver, request->attributes, request->n_components,
                       sources, request->components, &identity, read_only_of (request), &local);
  if (engine == NULL)
    {
      report->held_us = vb_engine_switch_resume (rt->sw);
      vb_engine_resume (old);
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("the new configuration did not assemble: %s; the device goes on as it was"),
                   local->message);
      return FALSE;
    }
  vb_test_hook ("reconfigure:assembled");
  vb_engine_set_failure_func (engine, on_engine_failure, rt->uuid);
  vb_engine_set_job_func (engine, on_engine_job, rt->uuid);
  vb_engine_switch_replace (rt->sw, engine);
  report->held_us = vb_engine_switch_resume (rt->sw);
  report->new_size = vb_engine_ops.size (engine);
  vb_report (request->name, VB_REPORT_INFO,
             "reconfigured to %s with %u components; requests held %" G_GINT64_FORMAT " us",
             request->driver->name, request->n_components, report->held_us);
  /* the old engine's superblock writes are over: the new one's count */
  vb_engine_free_unclean (old);
  vb_engine_activate (engine);
  vb_test_hook ("reconfigure:swapped");
  if (report->new_size != report->old_size)
    {
      report->size_changed = rt->announce_size && rt->announce_size (rt, &local);
      if (!report->size_changed)
        vb_report (request->name, VB_REPORT_WARNING, "announcing the new size: %s",
                   local ? local->message : "the backend cannot");
    }
  return TRUE;
}

/* An engine device's I/O is this process: a stop stays while the node is
 * in use (a root on ublk or nbd would otherwise hold its last writes until
 * a vblkd that never comes; loop's FUSE file would fail them). A takeover
 * still leaves at once: ublk and nbd hold the requests for the next vblkd. */
static gboolean
engine_runtime_needs_server (const char *block_device)
{
  return TRUE;
}

static gboolean
engine_runtime_settle (const char *block_device, GError **error)
{
  VbEngineRuntime *rt;
  VbEngine *e = engine_get (block_device, &rt);
  int r = e ? vb_engine_settle (e) : -ESRCH;

  engine_put (rt);
  if (r == 0)
    return TRUE;
  g_set_error (error, VB_ERROR, r == -ENOTSUP ? VB_ERROR_NOT_SUPPORTED : VB_ERROR_BUSY, "%s",
               r == -ENOTSUP  ? "no metadata: the desired state says what is behind"
               : r == -EBUSY  ? "a leg is not in sync or a job runs: what is left is recorded"
               : r == -EAGAIN ? "writes in flight: their chunks stay dirty"
                              : g_strerror (-r));
  return FALSE;
}

const VbEngineDeviceOps vb_engine_runtime_ops = {
  .component_status = vb_engine_runtime_component_status,
  .slot_source = vb_engine_runtime_slot_source,
  .component_missing = vb_engine_runtime_component_missing,
  .lost_data = vb_engine_runtime_lost_data,
  .set_faulty = vb_engine_runtime_set_faulty,
  .release = vb_engine_runtime_release,
  .block_ops = vb_engine_runtime_block_ops,
  .check = vb_engine_runtime_check,
  .cancel_job = vb_engine_runtime_cancel_job,
  .readd = vb_engine_runtime_readd,
  .set_spares = vb_engine_runtime_set_spares,
  .needs_server = engine_runtime_needs_server,
  .settle = engine_runtime_settle,
};
