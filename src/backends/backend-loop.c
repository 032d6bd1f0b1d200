/* Backend "loop": a kernel loop device over one extent of one component,
 * or, for a driver that needs the engine, over the one file of a FUSE
 * mount that the engine serves (loop with direct I/O, so no page cache).
 *
 * Setup is our own LOOP_CONFIGURE rather than libblockdev's bd_loop_setup():
 * bd_loop_setup (2.28) can set neither the logical block size nor the
 * loop's name, and the name is what makes a crash safe — it carries the
 * tag "vblk:INSTANCE:UUID" from the very ioctl that creates the device, so
 * a vblkd killed at any instant finds every loop device it made (scan) and
 * never leaks or duplicates one, and leaves those of other vblkd
 * instances (other state directories) alone. Teardown uses libblockdev. */
#include "config.h"

#include "backend.h"
#include "engine/engine-switch.h"
#include "engine/engine.h"
#include "engine/fuse-server.h"
#include "loop-util.h"
#include "vb-error.h"
#include "vb-testhook.h"

#include <blockdev/blockdev.h>
#include <blockdev/loop.h>
#include <errno.h>
#include <fcntl.h>
#include <libudev.h>
#include <linux/loop.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define LOOP_TAG_PREFIX VB_LOOP_TAG_PREFIX

static gboolean
loop_available (char **reason)
{
  if (access ("/dev/loop-control", F_OK) != 0)
    {
      *reason = g_strdup ("no /dev/loop-control (kernel module loop not loaded)");
      return FALSE;
    }
  return TRUE;
}

static gboolean
loop_supports (const VbDriver *driver, GHashTable *attributes, char **reason)
{
  if (driver->extent == NULL && driver->map == NULL)
    {
      *reason = g_strdup_printf ("driver '%s' has no placement for the engine", driver->name);
      return FALSE;
    }
  if (attributes && g_strcmp0 (g_hash_table_lookup (attributes, "metadata"), "md1") == 0)
    {
      *reason = g_strdup ("metadata=md1 is an mdadm array, which md runs and keeps the "
                          "superblocks of (backend kernel); the engine writes only vblk's");
      return FALSE;
    }
  if (driver->extent == NULL && access ("/dev/fuse", F_OK) != 0)
    {
      *reason = g_strdup ("no /dev/fuse: the engine serves loop devices through FUSE");
      return FALSE;
    }
  return TRUE;
}

/* The engine devices this process serves: block node -> runtime. */
typedef struct {
  char *uuid;
  char *block_device;
  VbEngineSwitch *sw; /* the engine, behind the switch that swaps it */
  VbFuseServer *fuse;
} EngineRuntime;

static GMutex runtimes_lock;
static GHashTable *runtimes; /* block_device -> EngineRuntime* */

static void
engine_runtime_free (EngineRuntime *rt)
{
  /* the loop device is detached before: nothing holds the FUSE file */
  vb_fuse_server_free (rt->fuse);
  vb_engine_switch_free (rt->sw);
  g_free (rt->uuid);
  g_free (rt->block_device);
  g_free (rt);
}

static EngineRuntime *
runtime_lookup (const char *block_device)
{
  EngineRuntime *rt;

  g_mutex_lock (&runtimes_lock);
  rt = runtimes ? g_hash_table_lookup (runtimes, block_device) : NULL;
  g_mutex_unlock (&runtimes_lock);
  return rt;
}

/* The engine of @block_device held against a swap (NULL: not an engine
 * device of this process); engine_put lets it go. */
static VbEngine *
engine_get (const char *block_device, EngineRuntime **out)
{
  EngineRuntime *rt = runtime_lookup (block_device);

  *out = rt;
  if (rt == NULL)
    return NULL;
  vb_engine_switch_lock (rt->sw);
  return vb_engine_switch_engine (rt->sw);
}

static void
engine_put (EngineRuntime *rt)
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
  };
  return identity;
}

/* What a device stacked on @path calls: the switch of an engine device of
 * this process (in place, no kernel round trip), or nothing. */
static void
source_for (const char *path, VbEngineSource *source)
{
  EngineRuntime *dep = path ? runtime_lookup (path) : NULL;

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

/* "vblk:INSTANCE:UUID", and ":engine" after it for a node the engine
 * serves through FUSE: such a node dies with the vblkd that served it. */
#define ENGINE_TAG_SUFFIX ":engine"

static void
tag_for (const char *instance, const char *uuid, gboolean engine, char out[LO_NAME_SIZE])
{
  memset (out, 0, LO_NAME_SIZE);
  g_snprintf (out, LO_NAME_SIZE, LOOP_TAG_PREFIX "%s:%s%s", instance, uuid,
              engine ? ENGINE_TAG_SUFFIX : "");
}

/* The UUID in the tag of an attached loop device of @instance; NULL when
 * not attached or not ours. */
static char *
loop_read_tag (const char *block_device, const char *instance, gboolean *engine)
{
  g_autofree char *prefix = g_strdup_printf (LOOP_TAG_PREFIX "%s:", instance);
  g_autofree char *name = vb_loop_get_name (block_device);
  char *uuid;

  if (name == NULL || !g_str_has_prefix (name, prefix))
    return NULL;
  /* a component of a device-mapper device of backend kernel: not ours */
  if (g_str_has_suffix (name, VB_LOOP_TAG_KERNEL_SUFFIX))
    return NULL;
  uuid = g_strdup (name + strlen (prefix));
  if (engine)
    *engine = g_str_has_suffix (uuid, ENGINE_TAG_SUFFIX);
  if (g_str_has_suffix (uuid, ENGINE_TAG_SUFFIX))
    uuid[strlen (uuid) - strlen (ENGINE_TAG_SUFFIX)] = '\0';
  return uuid;
}

/* Makes a loop device tagged for @instance, @uuid over @backing_fd. */
static char *
attach (int backing_fd, const struct loop_config *base, const char *instance, const char *uuid,
        gboolean engine, const char *what, GError **error)
{
  char tag[LO_NAME_SIZE];

  tag_for (instance, uuid, engine, tag);
  return vb_loop_attach (backing_fd, base, tag, what, error);
}

/* A driver with one extent runs on a kernel loop device directly, unless
 * its attribute engine asks for the engine (which can be reconfigured). */
static gboolean
uses_engine (const VbBackendRequest *request)
{
  return request->driver->extent == NULL
         || g_strcmp0 (g_hash_table_lookup (request->attributes, "engine"), "true") == 0;
}

static char *
start_extent (const VbBackendRequest *request, GError **error)
{
  VbExtent extent = { 0 };
  struct loop_config config = { 0 };
  char *block_device;
  int backing_fd;

  request->driver->extent (request->attributes, request->components, request->n_components,
                           &extent);
  const char *path = request->paths[extent.component];
  backing_fd = open (path, (extent.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
  if (backing_fd < 0)
    {
      int e = errno;
      g_set_error (error, VB_ERROR, e == ENOENT ? VB_ERROR_NOT_FOUND : VB_ERROR_FAILED,
                   "component '%s': %s", path, g_strerror (e));
      return NULL;
    }
  config.block_size = extent.sector_size;
  config.info.lo_offset = extent.offset;
  config.info.lo_sizelimit = extent.size;
  config.info.lo_flags = extent.read_only ? LO_FLAGS_READ_ONLY : 0;
  block_device = attach (backing_fd, &config, request->instance, request->uuid, FALSE, path, error);
  close (backing_fd);
  return block_device;
}

/* An engine device: engine, then its FUSE file, then a loop device with
 * direct I/O on that file. A component that is itself an engine device of
 * this process is called in place, without a kernel round trip. */
static char *
start_engine (const VbBackendRequest *request, GError **error)
{
  g_autofree VbEngineSource *sources = g_new0 (VbEngineSource, request->n_components);
  gboolean read_only
      = g_strcmp0 (g_hash_table_lookup (request->attributes, "read_only"), "true") == 0;
  g_autofree char *mountpoint = NULL;
  struct loop_config config = { 0 };
  EngineRuntime *rt;
  VbEngine *engine;
  char *block_device;
  int fd;

  for (guint i = 0; i < request->n_components; i++)
    source_for (request->paths[i], &sources[i]);
  VbEngineIdentity identity = identity_of (request);
  rt = g_new0 (EngineRuntime, 1);
  rt->uuid = g_strdup (request->uuid);
  engine
      = vb_engine_new (request->name, request->driver, request->attributes, request->n_components,
                       sources, request->components, &identity, read_only, error);
  if (engine == NULL)
    goto fail;
  rt->sw = vb_engine_switch_new (engine);
  vb_engine_set_failure_func (engine, on_engine_failure, rt->uuid);
  vb_engine_set_job_func (engine, on_engine_job, rt->uuid);
  mountpoint = g_build_filename (vb_backends_run_dir (), "engine", request->uuid, NULL);
  rt->fuse = vb_fuse_server_new (mountpoint, "data", &vb_engine_switch_ops, rt->sw, error);
  if (rt->fuse == NULL)
    goto fail;
  fd = open (vb_fuse_server_path (rt->fuse),
             (read_only ? O_RDONLY : O_RDWR) | O_DIRECT | O_CLOEXEC);
  if (fd < 0)
    {
      int e = errno;
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: %s", vb_fuse_server_path (rt->fuse),
                   g_strerror (e));
      goto fail;
    }
  config.block_size = vb_engine_ops.block_size (engine);
  config.info.lo_flags = LO_FLAGS_DIRECT_IO | (read_only ? LO_FLAGS_READ_ONLY : 0);
  block_device = attach (fd, &config, request->instance, request->uuid, TRUE,
                         vb_fuse_server_path (rt->fuse), error);
  close (fd);
  if (block_device == NULL)
    goto fail;
  rt->block_device = g_strdup (block_device);
  g_mutex_lock (&runtimes_lock);
  if (runtimes == NULL)
    runtimes = g_hash_table_new (g_str_hash, g_str_equal);
  g_hash_table_insert (runtimes, rt->block_device, rt);
  g_mutex_unlock (&runtimes_lock);
  /* resync or rebuild, if assembly found one necessary */
  vb_engine_activate (engine);
  return block_device;

fail:
  if (rt->sw == NULL)
    vb_engine_free (engine);
  engine_runtime_free (rt);
  return NULL;
}

/* Superblocks and an all-dirty bitmap on the components of a new device:
 * the engine's own assembly of a fresh device, without starting it. For a
 * reconfiguration of a stopped device, the new role table (closed clean:
 * the next start rebuilds the slots that are new). */
static gboolean
loop_format (const VbBackendRequest *request, GError **error)
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

static char *
loop_start (const VbBackendRequest *request, GError **error)
{
  return uses_engine (request) ? start_engine (request, error) : start_extent (request, error);
}

#define DETACH_WAIT_MS 30000

/* Until the loop device has no backing file; FALSE after @timeout_ms. */
static gboolean
wait_detached (const char *block_device, guint timeout_ms)
{
  g_autofree char *base = g_path_get_basename (block_device);
  g_autofree char *backing = g_strdup_printf ("/sys/block/%s/loop/backing_file", base);
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;

  while (g_file_test (backing, G_FILE_TEST_EXISTS))
    {
      if (g_get_monotonic_time () > deadline)
        return FALSE;
      g_usleep (5000);
    }
  return TRUE;
}

static gboolean
loop_stop (const char *block_device, const char *instance, const char *uuid, GError **error)
{
  g_autofree char *tag = loop_read_tag (block_device, instance, NULL);
  g_autoptr (GError) local = NULL;

  if (tag == NULL)
    return TRUE; /* already detached: nothing of ours is there */
  if (strcmp (tag, uuid) != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   "%s now belongs to another device (%s), not detaching it", block_device, tag);
      return FALSE;
    }
  if (!bd_loop_teardown (block_device, &local))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "detaching %s: %s", block_device,
                   local->message);
      return FALSE;
    }
  g_mutex_lock (&runtimes_lock);
  EngineRuntime *rt = runtimes ? g_hash_table_lookup (runtimes, block_device) : NULL;
  if (rt)
    g_hash_table_remove (runtimes, block_device);
  g_mutex_unlock (&runtimes_lock);
  if (rt)
    {
      /* the kernel defers the detach while someone (udev's probe, say)
       * still has the node open, and that someone may be reading through
       * it: the engine serves until the loop has let go of its file */
      if (!wait_detached (block_device, DETACH_WAIT_MS))
        {
          g_warning ("%s: still attached %d ms after the detach; ending its FUSE connection",
                     block_device, DETACH_WAIT_MS);
          vb_fuse_server_abort (rt->fuse);
        }
      engine_runtime_free (rt);
    }
  return TRUE;
}

static gboolean
loop_component_status (const char *block_device, guint component, gboolean *faulty,
                       gboolean *rebuilding, guint64 *errors)
{
  EngineRuntime *rt;
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

static void
loop_release (const char *block_device, guint component)
{
  EngineRuntime *rt;
  VbEngine *e = engine_get (block_device, &rt);

  if (e && component < vb_engine_n_components (e))
    vb_engine_release_component (e, component);
  engine_put (rt);
}

static gboolean
loop_component_missing (const char *block_device, guint component)
{
  EngineRuntime *rt;
  VbEngine *e = engine_get (block_device, &rt);
  gboolean r
      = e && component < vb_engine_n_components (e) && vb_engine_component_missing (e, component);

  engine_put (rt);
  return r;
}

static gboolean
loop_lost_data (const char *block_device)
{
  EngineRuntime *rt;
  VbEngine *e = engine_get (block_device, &rt);
  gboolean r = e && vb_engine_lost_data (e);

  engine_put (rt);
  return r;
}

static int
loop_set_faulty (const char *block_device, guint component)
{
  EngineRuntime *rt;
  VbEngine *e = engine_get (block_device, &rt);
  int r = e == NULL                                 ? -ENOTSUP
          : component >= vb_engine_n_components (e) ? -EINVAL
                                                    : vb_engine_set_faulty (e, component);

  engine_put (rt);
  return r;
}

/* The switch, so that a reconfiguration reaches every user of the device. */
static gboolean
loop_block_ops (const char *block_device, const VbBlockOps **ops, void **handle)
{
  EngineRuntime *rt = runtime_lookup (block_device);

  if (rt == NULL)
    return FALSE;
  *ops = &vb_engine_switch_ops;
  *handle = rt->sw;
  return TRUE;
}

static gint64
loop_check (const char *block_device, gboolean repair)
{
  EngineRuntime *rt;
  VbEngine *e = engine_get (block_device, &rt);
  gint64 r = e ? vb_engine_check (e, repair) : -ENOTSUP;

  engine_put (rt);
  return r;
}

static int
loop_cancel_job (const char *block_device, guint64 job)
{
  EngineRuntime *rt;
  VbEngine *e = engine_get (block_device, &rt);
  int r = e ? vb_engine_cancel_job (e, job) : -ESRCH;

  engine_put (rt);
  return r;
}

static gboolean
loop_readd (const char *block_device, guint slot, const char *path, const char *uuid,
            GError **error)
{
  EngineRuntime *rt;
  VbEngine *e = engine_get (block_device, &rt);
  VbEngineSource source;
  gboolean ok = FALSE;

  /* an engine device of this process is called in place, as at start */
  source_for (path, &source);
  if (e == NULL)
    g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED, "%s: not an engine device of this vblkd",
                 block_device);
  else if (slot >= vb_engine_n_components (e))
    g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, "%s: no slot %u", block_device, slot);
  else
    ok = vb_engine_readd (e, slot, &source, uuid, error) == 0;
  engine_put (rt);
  return ok;
}

static void
loop_set_spares (const char *block_device, guint n, const char *const *paths,
                 const char *const *uuids)
{
  EngineRuntime *rt;
  VbEngine *e = engine_get (block_device, &rt);

  if (e)
    vb_engine_set_spares (e, n, paths, uuids);
  engine_put (rt);
}

static gboolean
loop_update (const char *block_device, const VbBackendRequest *request, GError **error)
{
  VbExtent extent = { 0 };
  struct loop_info64 info = { 0 };
  int fd, e = 0;
  const char *step = NULL;

  if (uses_engine (request))
    {
      /* an engine device: the engine takes its online attributes itself */
      EngineRuntime *rt;
      VbEngine *engine = engine_get (block_device, &rt);
      if (engine == NULL)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: not an engine device of this vblkd",
                       block_device);
          return FALSE;
        }
      vb_engine_update (engine, request->attributes);
      engine_put (rt);
      return TRUE;
    }
  request->driver->extent (request->attributes, request->components, request->n_components,
                           &extent);
  fd = open (block_device, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    {
      e = errno;
      step = "open";
      goto fail;
    }
  if (ioctl (fd, LOOP_GET_STATUS64, &info) < 0)
    {
      e = errno;
      step = "LOOP_GET_STATUS64";
      goto fail;
    }
  if (info.lo_sizelimit != extent.size)
    {
      info.lo_sizelimit = extent.size;
      /* loop_set_status() resizes the live device (and announces the new size) */
      if (ioctl (fd, LOOP_SET_STATUS64, &info) < 0)
        {
          e = errno;
          step = "LOOP_SET_STATUS64 (size)";
          goto fail;
        }
    }
  if (ioctl (fd, LOOP_SET_BLOCK_SIZE, (unsigned long) extent.sector_size) < 0)
    {
      e = errno;
      step = "LOOP_SET_BLOCK_SIZE";
      goto fail;
    }
  close (fd);
  return TRUE;

fail:
  if (fd >= 0)
    close (fd);
  g_set_error (error, VB_ERROR, e == EBUSY ? VB_ERROR_BUSY : VB_ERROR_FAILED, "%s: %s: %s",
               block_device, step, g_strerror (e));
  return FALSE;
}

/* The loop device over the FUSE file reads the file's new size. */
static gboolean
announce_size (EngineRuntime *rt, GError **error)
{
  int fd, r;

  r = vb_fuse_server_size_changed (rt->fuse);
  if (r < 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: the FUSE file's size: %s",
                   rt->block_device, g_strerror (-r));
      return FALSE;
    }
  fd = open (rt->block_device, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ioctl (fd, LOOP_SET_CAPACITY, 0) < 0)
    {
      int e = errno;
      if (fd >= 0)
        close (fd);
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: LOOP_SET_CAPACITY: %s", rt->block_device,
                   g_strerror (e));
      return FALSE;
    }
  close (fd);
  return TRUE;
}

static gboolean
loop_reconfigure (const char *block_device, const VbBackendRequest *request, guint timeout_ms,
                  VbReconfigureReport *report, GError **error)
{
  EngineRuntime *rt = runtime_lookup (block_device);
  g_autofree VbEngineSource *sources = g_new0 (VbEngineSource, request->n_components);
  g_autofree gboolean *behind = g_new0 (gboolean, request->n_components);
  gboolean read_only
      = g_strcmp0 (g_hash_table_lookup (request->attributes, "read_only"), "true") == 0;
  g_autoptr (GError) local = NULL;
  VbEngine *old, *engine;
  int r;

  memset (report, 0, sizeof *report);
  if (rt == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   "%s runs on a kernel loop device directly on its component, which cannot "
                   "change under a writable device (LOOP_CHANGE_FD is for read-only ones); "
                   "start it with attribute engine=true to reconfigure it online",
                   block_device);
      return FALSE;
    }
  if (!uses_engine (request))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   "%s is served by the engine; its new driver '%s' must be too (attribute "
                   "engine=true)",
                   block_device, request->driver->name);
      return FALSE;
    }
  old = vb_engine_switch_engine (rt->sw);
  report->old_size = vb_engine_ops.size (old);
  /* metadata=none: a slot is behind unless it is an in-sync component of
   * the running engine (the superblocks say it where there are some) */
  for (guint i = 0; i < request->n_components; i++)
    {
      behind[i] = TRUE;
      for (guint j = 0; j < vb_engine_n_components (old); j++)
        if (g_strcmp0 (request->paths[i], vb_engine_component_path (old, j)) == 0)
          behind[i] = !vb_engine_component_in_sync (old, j);
      source_for (request->paths[i], &sources[i]);
    }
  VbEngineIdentity identity = identity_of (request);
  identity.reconfigure = TRUE;
  identity.out_of_sync = behind;

  /* nothing but requests touches the components from here on */
  vb_engine_quiesce (old);
  r = vb_engine_switch_suspend (rt->sw, timeout_ms);
  if (r < 0)
    {
      vb_engine_resume (old);
      if (r == -ETIMEDOUT)
        g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                     "%s: the requests in flight did not finish within %u ms; the "
                     "reconfiguration was abandoned and the device goes on as it was",
                     block_device, timeout_ms);
      else
        g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                     "%s: flushing before the swap: %s; the device goes on as it was", block_device,
                     g_strerror (-r));
      return FALSE;
    }
  vb_test_hook ("reconfigure:suspended");
  engine
      = vb_engine_new (request->name, request->driver, request->attributes, request->n_components,
                       sources, request->components, &identity, read_only, &local);
  if (engine == NULL)
    {
      report->held_us = vb_engine_switch_resume (rt->sw);
      vb_engine_resume (old);
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   "the new configuration did not assemble: %s; the device goes on as it was",
                   local->message);
      return FALSE;
    }
  vb_test_hook ("reconfigure:assembled");
  vb_engine_set_failure_func (engine, on_engine_failure, rt->uuid);
  vb_engine_set_job_func (engine, on_engine_job, rt->uuid);
  vb_engine_switch_replace (rt->sw, engine);
  report->held_us = vb_engine_switch_resume (rt->sw);
  report->new_size = vb_engine_ops.size (engine);
  g_message ("%s: reconfigured to %s with %u components; requests held %" G_GINT64_FORMAT " us",
             request->name, request->driver->name, request->n_components, report->held_us);
  /* the old engine's superblock writes are over: the new one's count */
  vb_engine_free_unclean (old);
  vb_engine_activate (engine);
  vb_test_hook ("reconfigure:swapped");
  if (report->new_size != report->old_size)
    {
      report->size_changed = announce_size (rt, &local);
      if (!report->size_changed)
        g_warning ("%s: announcing the new size: %s", request->name, local->message);
    }
  return TRUE;
}

static GPtrArray *
loop_scan (const char *instance, GError **error)
{
  g_autoptr (GPtrArray) found
      = g_ptr_array_new_with_free_func ((GDestroyNotify) vb_backend_instance_free);
  g_autoptr (GDir) dir = g_dir_open ("/sys/block", 0, error);
  g_autofree char *engine_dir = g_build_filename (vb_backends_run_dir (), "engine", NULL);
  const char *entry;

  if (dir == NULL)
    return NULL;
  while ((entry = g_dir_read_name (dir)))
    {
      g_autofree char *backing_path = NULL, *backing = NULL, *dev = NULL, *tag = NULL;
      gboolean engine = FALSE;

      if (!g_str_has_prefix (entry, "loop"))
        continue;
      backing_path = g_strdup_printf ("/sys/block/%s/loop/backing_file", entry);
      if (!g_file_get_contents (backing_path, &backing, NULL, NULL))
        continue; /* not attached */
      dev = g_strdup_printf ("/dev/%s", entry);
      g_strstrip (backing);
      tag = loop_read_tag (dev, instance, &engine);
      if (tag == NULL)
        {
          /* a node over a FUSE file of this run directory whose server
           * died: the kernel cannot even report its status (ENOTCONN), but
           * the backing path says whose it is; left attached it would
           * outlive the mount as "/data" */
          g_autofree char *prefix = g_strconcat (engine_dir, "/", NULL);
          if (g_str_has_prefix (backing, prefix) && runtime_lookup (dev) == NULL)
            {
              g_autoptr (GError) local = NULL;
              if (!bd_loop_teardown (dev, &local))
                g_debug ("loop: detaching dead %s: %s", dev, local->message);
            }
          continue;
        }
      if (engine && runtime_lookup (dev) == NULL)
        {
          /* served by a vblkd that died: its FUSE server is gone, so the
           * node can only fail; detach it, the device is started afresh */
          g_autoptr (GError) local = NULL;
          if (!bd_loop_teardown (dev, &local))
            g_debug ("loop: detaching stale %s: %s", dev, local->message);
          continue;
        }
      VbBackendInstance *node = g_new0 (VbBackendInstance, 1);
      node->uuid = g_steal_pointer (&tag);
      node->block_device = g_steal_pointer (&dev);
      node->backing = g_strdup (backing);
      g_ptr_array_add (found, node);
    }
  /* the mounts this process serves are not stale */
  g_autoptr (GHashTable) live = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_mutex_lock (&runtimes_lock);
  if (runtimes)
    {
      GHashTableIter iter;
      gpointer key, value;
      g_hash_table_iter_init (&iter, runtimes);
      while (g_hash_table_iter_next (&iter, &key, &value))
        g_hash_table_add (live,
                          g_strdup (vb_fuse_server_mountpoint (((EngineRuntime *) value)->fuse)));
    }
  g_mutex_unlock (&runtimes_lock);
  vb_fuse_cleanup_stale (engine_dir, live);
  return g_steal_pointer (&found);
}

const VbBackend vb_backend_loop = {
  .name = "loop",
  .available = loop_available,
  .supports = loop_supports,
  .format = loop_format,
  .start = loop_start,
  .stop = loop_stop,
  .update = loop_update,
  .component_status = loop_component_status,
  .lost_data = loop_lost_data,
  .component_missing = loop_component_missing,
  .set_faulty = loop_set_faulty,
  .release = loop_release,
  .block_ops = loop_block_ops,
  .check = loop_check,
  .cancel_job = loop_cancel_job,
  .set_spares = loop_set_spares,
  .readd = loop_readd,
  .reconfigure = loop_reconfigure,
  .scan = loop_scan,
};
