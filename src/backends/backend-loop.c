/* SPDX-License-Identifier: LGPL-2.1-or-later */
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

#include <glib/gi18n-lib.h>

#include "backend.h"
#include "engine-runtime.h"
#include "engine.h"
#include "fuse-server.h"
#include "loop-util.h"
#include "vb-error.h"
#include "vb-testhook.h"
#include "vb-report.h"

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
                   _ ("component '%s': %s"), path, g_strerror (e));
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

/* The loop device over the FUSE file reads the file's new size. */
static gboolean
announce_size (VbEngineRuntime *rt, GError **error)
{
  int fd, r;

  r = vb_fuse_server_size_changed (rt->transport);
  if (r < 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("%s: the FUSE file's size: %s"),
                   rt->block_device, g_strerror (-r));
      return FALSE;
    }
  fd = open (rt->block_device, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ioctl (fd, LOOP_SET_CAPACITY, 0) < 0)
    {
      int e = errno;
      if (fd >= 0)
        close (fd);
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("%s: LOOP_SET_CAPACITY: %s"),
                   rt->block_device, g_strerror (e));
      return FALSE;
    }
  close (fd);
  return TRUE;
}

/* The loop still reads and writes @rt's FUSE file (ENGINE_DIR/UUID/data,
 * by its tail: the kernel gives the path as it resolved it). The node is
 * never opened here: sysfs says it. */
static gboolean
serves (VbEngineRuntime *rt)
{
  g_autofree char *base = g_path_get_basename (rt->block_device);
  g_autofree char *path = g_strdup_printf ("/sys/block/%s/loop/backing_file", base);
  g_autofree char *tail = g_strdup_printf ("/%s/data", rt->uuid);
  g_autofree char *backing = NULL;

  g_autoptr (GError) local = NULL;

  /* a read that fails otherwise than "no such file" (the loop detached)
   * says nothing: the node stays the runtime's */
  if (!g_file_get_contents (path, &backing, NULL, &local))
    return !g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_NOENT);
  return g_str_has_suffix (g_strstrip (backing), tail);
}

/* An engine device: engine, then its FUSE file, then a loop device with
 * direct I/O on that file. A component that is itself an engine device of
 * this process is called in place, without a kernel round trip. */
static char *
start_engine (const VbBackendRequest *request, GError **error)
{
  gboolean read_only
      = g_strcmp0 (g_hash_table_lookup (request->attributes, "read_only"), "true") == 0;
  g_autofree char *mountpoint = NULL;
  struct loop_config config = { 0 };
  char tag[LO_NAME_SIZE];
  VbEngineRuntime *rt;
  VbFuseServer *fuse;
  char *block_device;
  int fd;

  rt = vb_engine_runtime_new (request, error);
  if (rt == NULL)
    return NULL;
  mountpoint = g_build_filename (vb_backends_run_dir (), "engine", request->uuid, NULL);
  tag_for (request->instance, request->uuid, TRUE, tag);
  fuse = vb_fuse_server_new (mountpoint, "data", tag, rt->sw, error);
  if (fuse == NULL)
    goto fail;
  rt->transport = fuse;
  rt->transport_free = (GDestroyNotify) vb_fuse_server_free;
  rt->announce_size = announce_size;
  rt->serves = serves;
  fd = open (vb_fuse_server_path (fuse), (read_only ? O_RDONLY : O_RDWR) | O_DIRECT | O_CLOEXEC);
  if (fd < 0)
    {
      int e = errno;
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: %s", vb_fuse_server_path (fuse),
                   g_strerror (e));
      goto fail;
    }
  config.block_size = vb_engine_ops.block_size (vb_engine_switch_engine (rt->sw));
  config.info.lo_flags = LO_FLAGS_DIRECT_IO | (read_only ? LO_FLAGS_READ_ONLY : 0);
  block_device = attach (fd, &config, request->instance, request->uuid, TRUE,
                         vb_fuse_server_path (fuse), error);
  close (fd);
  if (block_device == NULL)
    goto fail;
  vb_engine_runtime_register (rt, block_device);
  return block_device;

fail:
  vb_engine_runtime_free (rt);
  return NULL;
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
  VbEngineRuntime *own = vb_engine_runtime_lookup (block_device);
  /* the tag of a node this process serves is its runtime's (never read
   * through the node itself) */
  g_autofree char *tag = own ? g_strdup (own->uuid) : loop_read_tag (block_device, instance, NULL);
  g_autoptr (GError) local = NULL;

  if (tag == NULL)
    return TRUE; /* already detached: nothing of ours is there */
  if (strcmp (tag, uuid) != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("%s now belongs to another device (%s), not detaching it"), block_device,
                   tag);
      return FALSE;
    }
  if (!bd_loop_teardown (block_device, &local))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("detaching %s: %s"), block_device,
                   local->message);
      return FALSE;
    }
  /* the runtime found, not another registered under this name since (an
   * op on another part may have attached the loop again) */
  VbEngineRuntime *rt = own && vb_engine_runtime_take (own) ? own : NULL;
  if (rt)
    {
      /* the kernel defers the detach while someone (udev's probe, say)
       * still has the node open, and that someone may be reading through
       * it: the engine serves until the loop has let go of its file */
      if (!wait_detached (block_device, DETACH_WAIT_MS))
        {
          vb_report (block_device, VB_REPORT_WARNING,
                     "still attached %d ms after the detach; ending its FUSE connection",
                     DETACH_WAIT_MS);
          vb_fuse_server_abort (rt->transport);
        }
      vb_engine_runtime_free (rt);
    }
  return TRUE;
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
      return vb_engine_runtime_update (block_device, request, error);
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

static gboolean
loop_reconfigure (const char *block_device, const VbBackendRequest *request, guint timeout_ms,
                  VbReconfigureReport *report, GError **error)
{
  memset (report, 0, sizeof *report);
  if (vb_engine_runtime_lookup (block_device) == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   _ ("%s runs on a kernel loop device directly on its component, which cannot "
                      "change under a writable device (LOOP_CHANGE_FD is for read-only ones); "
                      "start it with attribute engine=true to reconfigure it online"),
                   block_device);
      return FALSE;
    }
  if (!uses_engine (request))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   _ ("%s is served by the engine; its new driver '%s' must be too (attribute "
                      "engine=true)"),
                   block_device, request->driver->name);
      return FALSE;
    }
  return vb_engine_runtime_reconfigure (block_device, request, timeout_ms, report, error);
}

static void
add_live_mount (VbEngineRuntime *rt, gpointer data)
{
  /* only backend loop's runtimes have a FUSE mount */
  if (rt->transport_free == (GDestroyNotify) vb_fuse_server_free)
    g_hash_table_add (data, g_strdup (vb_fuse_server_mountpoint (rt->transport)));
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
      /* a node this process serves is known without opening it (vblkd
       * never holds its own FUSE-served node: see loop_node_owner) */
      VbEngineRuntime *own = vb_engine_runtime_lookup (dev);
      if (own)
        {
          tag = g_strdup (own->uuid);
          engine = TRUE;
        }
      else
        tag = loop_read_tag (dev, instance, &engine);
      if (tag == NULL)
        {
          /* a node over a FUSE file of this run directory whose server
           * died: the kernel cannot even report its status (ENOTCONN), but
           * the backing path says whose it is; left attached it would
           * outlive the mount as "/data" */
          g_autofree char *prefix = g_strconcat (engine_dir, "/", NULL);
          if (g_str_has_prefix (backing, prefix) && vb_engine_runtime_lookup (dev) == NULL)
            {
              g_autoptr (GError) local = NULL;
              if (!bd_loop_teardown (dev, &local))
                g_debug ("loop: detaching dead %s: %s", dev, local->message);
            }
          continue;
        }
      if (engine && vb_engine_runtime_lookup (dev) == NULL)
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
  vb_engine_runtime_foreach (add_live_mount, live);
  vb_fuse_cleanup_stale (engine_dir, live);
  return g_steal_pointer (&found);
}

/* Any loop device named with a vblk tag: this backend's nodes and the
 * loop devices the kernel backend puts under dm tables and md arrays. */
static gboolean
loop_node_owner (dev_t devnum, VbNodeOwner *owner)
{
  g_autofree char *loop_dir
      = g_strdup_printf ("/sys/dev/block/%u:%u/loop", major (devnum), minor (devnum));
  g_autofree char *backing_file = g_build_filename (loop_dir, "backing_file", NULL);
  g_autofree char *backing = NULL, *node = NULL, *name = NULL, *fsname = NULL;

  if (!g_file_test (loop_dir, G_FILE_TEST_IS_DIR))
    return FALSE;
  /* an engine's node is never opened here: a vblkd that holds its own
   * FUSE-served node open when it is killed can hang in its exit, the
   * page cache waiting on the connection only its exit would end; the
   * FUSE mount's source names the owner instead */
  if (g_file_get_contents (backing_file, &backing, NULL, NULL)
      && (fsname = vb_fuse_source_of (g_strstrip (backing))) != NULL)
    return vb_node_owner_parse_tag (fsname, owner);
  if ((node = vb_node_of_devnum (devnum)) == NULL)
    return FALSE;
  name = vb_loop_get_name (node);
  return vb_node_owner_parse_tag (name, owner);
}

const VbBackend vb_backend_loop = {
  .name = "loop",
  .capabilities = VB_ENGINE_RUNTIME_CAPABILITIES,
  .available = loop_available,
  .supports = loop_supports,
  .start = loop_start,
  .stop = loop_stop,
  .update = loop_update,
  .reconfigure = loop_reconfigure,
  .scan = loop_scan,
  .node_owner = loop_node_owner,
  .format = vb_engine_runtime_format,
  .engine = &vb_engine_runtime_ops,
};
