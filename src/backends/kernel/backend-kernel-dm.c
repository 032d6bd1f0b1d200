/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Backend "kernel", its device-mapper part (kernel-dm): `window` and
 * `linear` as dm "linear" tables (libdevmapper), each component a block
 * device — a regular file gets a loop device under the table
 * (kernel-util.c). Online changes (a window's size, a concatenation grown
 * by a component) are dm's own suspend / load / resume: the kernel drains
 * the requests in flight, swaps the table and announces the new size.
 * vblk's superblocks of a linear table are in backend-kernel-dm-meta.c.
 *
 * Names: the dm device is "vblk-INSTANCE-UUID" with dm UUID
 * "VBLK-INSTANCE-UUID"; its block node is /dev/dm-MINOR. Kernel devices
 * outlive vblkd (as md arrays outlive mdadm) and are found by scan. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "dm-meta.h"
#include "kernel-parts.h"
#include "kernel-util.h"
#include "loop-util.h"
#include "vb-error.h"
#include "vb-testhook.h"
#include "vb-report.h"

#include <errno.h>
#include <libdevmapper.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define DM_NAME_PREFIX "vblk-"
#define DM_UUID_PREFIX "VBLK-"
#define SECTOR 512

static GMutex dm_lock; /* libdevmapper keeps global state */

static gboolean
dm_available (char **reason)
{
  if (access ("/dev/mapper/control", F_OK) != 0 || access ("/sys/module/dm_mod", F_OK) != 0)
    {
      *reason
          = g_strdup ("no device-mapper (/dev/mapper/control; kernel module dm-mod not loaded)");
      return FALSE;
    }
  return TRUE;
}

static char *
dm_name (const char *instance, const char *uuid)
{
  return g_strdup_printf (DM_NAME_PREFIX "%s-%s", instance, uuid);
}

/* libdevmapper's messages go to the debug log, not stderr */
static void
dm_log (int level, const char *file, int line, int dm_errno_or_class, const char *f, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, f);
  msg = g_strdup_vprintf (f, ap);
  va_end (ap);
  g_debug ("libdevmapper: %s", msg);
}

static void
dm_setup_once (void)
{
  static gsize done;

  if (g_once_init_enter (&done))
    {
      dm_log_with_errno_init (dm_log);
      /* no udev cookies: the nodes are /dev/dm-N (devtmpfs) and udev's
       * events are awaited like a loop device's */
      dm_udev_set_sync_support (0);
      g_once_init_leave (&done, 1);
    }
}

/* The table of @request over @nodes, added to @dmt: one linear target per
 * piece. FALSE with @error when libdevmapper refuses a target. */
static gboolean
add_targets (struct dm_task *dmt, const VbBackendRequest *request, GPtrArray *nodes, guint64 *size,
             GError **error)
{
  guint64 start = 0;

  if (strcmp (request->driver->name, "window") == 0)
    {
      VbExtent extent;
      request->driver->extent (request->attributes, request->components, request->n_components,
                               &extent);
      g_autofree char *params = g_strdup_printf (
          "%s %" G_GUINT64_FORMAT, (const char *) nodes->pdata[0], extent.offset / SECTOR);
      if (!dm_task_add_target (dmt, 0, extent.size / SECTOR, "linear", params))
        goto refused;
      start = extent.size / SECTOR;
    }
  else
    for (guint i = 0; i < request->n_components; i++)
      {
        /* with metadata=vblk, each component's data starts past its
         * superblock area (the probe gave its size from there on) */
        guint64 sectors = request->components[i].size / SECTOR;
        g_autofree char *params
            = g_strdup_printf ("%s %" G_GUINT64_FORMAT, (const char *) nodes->pdata[i],
                               vb_driver_data_offset (request->attributes) / SECTOR);
        if (!dm_task_add_target (dmt, start, sectors, "linear", params))
          goto refused;
        start += sectors;
      }
  *size = start * SECTOR;
  return TRUE;

refused:
  g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("device-mapper refused the table of '%s'"),
               request->name);
  return FALSE;
}

static gboolean
run_task (struct dm_task *dmt, const char *what, const char *name, GError **error)
{
  if (dm_task_run (dmt))
    return TRUE;
  g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("device-mapper %s of %s failed: %s"), what,
               name, dm_task_get_errno (dmt) ? g_strerror (dm_task_get_errno (dmt)) : "refused");
  return FALSE;
}

static gboolean
read_only_of (const VbBackendRequest *request)
{
  return g_strcmp0 (g_hash_table_lookup (request->attributes, "read_only"), "true") == 0;
}

/* A linear table with vblk's superblocks on its components. */
static gboolean
has_superblocks (const VbBackendRequest *request)
{
  return strcmp (request->driver->name, "linear") == 0
         && vb_driver_data_offset (request->attributes) > 0;
}

/* The block nodes under dm device @name (its table's), and whether it is
 * read-only. Called with dm_lock held. */
static GPtrArray *
table_nodes_locked (const char *name, gboolean *read_only)
{
  GPtrArray *nodes = g_ptr_array_new_with_free_func (g_free);
  struct dm_task *dmt = dm_task_create (DM_DEVICE_DEPS);
  struct dm_info info = { 0 };
  struct dm_deps *deps;

  if (dmt && dm_task_set_name (dmt, name) && dm_task_run (dmt) && dm_task_get_info (dmt, &info)
      && (deps = dm_task_get_deps (dmt)))
    for (guint32 i = 0; i < deps->count; i++)
      {
        /* the kernel's huge_encode_dev: glibc's dev_t encoding */
        char *node = vb_node_of_devnum ((dev_t) deps->device[i]);
        if (node)
          g_ptr_array_add (nodes, node);
      }
  *read_only = info.read_only != 0;
  if (dmt)
    dm_task_destroy (dmt);
  return nodes;
}

static char *
dm_start (const VbBackendRequest *request, GError **error)
{
  g_autofree char *name = dm_name (request->instance, request->uuid);
  g_autofree char *uuid
      = g_strdup_printf (DM_UUID_PREFIX "%s-%s", request->instance, request->uuid);
  g_autofree char *tag = vb_kernel_loop_tag (request->instance, request->uuid);
  g_autoptr (GPtrArray) nodes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) attached = g_ptr_array_new_with_free_func (g_free);
  gboolean read_only = read_only_of (request);
  VbUdevWatch *watch = NULL;
  struct dm_task *dmt = NULL;
  struct dm_info info = { 0 };
  char *block_device = NULL;
  guint64 size;

  dm_setup_once ();
  /* a new device whose components were not there when it was created
   * (devices not started yet): its first superblocks now, the engine's */
  if (has_superblocks (request) && !read_only && !vb_kernel_dm_meta_found (request)
      && !vb_kernel_format (request, error))
    goto out;
  if (!vb_kernel_component_nodes (request, tag, read_only, nodes, attached, error))
    goto out;
  if (has_superblocks (request))
    {
      VbSuperblock table;
      if (!vb_kernel_dm_meta_check (request, nodes, FALSE, &table, error)
          || (!read_only && !vb_kernel_dm_meta_write (request, nodes, &table, error)))
        goto out;
    }
  vb_test_hook ("kernel:after-component-loops");
  watch = vb_udev_watch_begin ();
  g_mutex_lock (&dm_lock);
  dmt = dm_task_create (DM_DEVICE_CREATE);
  if (dmt == NULL || !dm_task_set_name (dmt, name) || !dm_task_set_uuid (dmt, uuid)
      || (read_only && !dm_task_set_ro (dmt)))
    g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("device-mapper: cannot prepare %s"), name);
  else if (add_targets (dmt, request, nodes, &size, error) && run_task (dmt, "create", name, error)
           && dm_task_get_info (dmt, &info) && info.exists)
    block_device = g_strdup_printf ("/dev/dm-%u", info.minor);
  if (dmt)
    dm_task_destroy (dmt);
  g_mutex_unlock (&dm_lock);
  vb_udev_watch_end (g_steal_pointer (&watch), block_device ? makedev (info.major, info.minor) : 0,
                     "add");

out:
  if (block_device == NULL)
    vb_kernel_detach_all (attached);
  vb_udev_watch_end (watch, 0, NULL);
  return block_device;
}

/* The dm device @instance, @uuid, and its minor; FALSE when there is none. */
static gboolean
lookup (const char *instance, const char *uuid, guint *minor)
{
  g_autofree char *name = dm_name (instance, uuid);
  struct dm_task *dmt;
  struct dm_info info = { 0 };
  gboolean found = FALSE;

  dm_setup_once ();
  g_mutex_lock (&dm_lock);
  dmt = dm_task_create (DM_DEVICE_INFO);
  if (dmt && dm_task_set_name (dmt, name) && dm_task_run (dmt) && dm_task_get_info (dmt, &info)
      && info.exists)
    {
      *minor = info.minor;
      found = TRUE;
    }
  if (dmt)
    dm_task_destroy (dmt);
  g_mutex_unlock (&dm_lock);
  return found;
}

static gboolean
dm_stop (const char *block_device, const char *instance, const char *uuid, GError **error)
{
  g_autofree char *name = dm_name (instance, uuid);
  g_autofree char *tag = vb_kernel_loop_tag (instance, uuid);
  g_autofree char *expect = NULL;
  g_autoptr (GPtrArray) loops = NULL;
  g_autoptr (GPtrArray) nodes = NULL;
  gboolean read_only = TRUE;
  guint minor;
  gboolean ok = TRUE;

  if (lookup (instance, uuid, &minor))
    {
      expect = g_strdup_printf ("/dev/dm-%u", minor);
      if (strcmp (expect, block_device) != 0)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       _ ("%s is not %s (that is %s), not removing it"), block_device, name,
                       expect);
          return FALSE;
        }
      g_mutex_lock (&dm_lock);
      nodes = table_nodes_locked (name, &read_only);
      struct dm_task *dmt = dm_task_create (DM_DEVICE_REMOVE);
      ok = dmt && dm_task_set_name (dmt, name) && dm_task_retry_remove (dmt)
           && run_task (dmt, "remove", name, error);
      if (dmt)
        dm_task_destroy (dmt);
      g_mutex_unlock (&dm_lock);
      if (!ok)
        return FALSE;
      /* every write of the table has landed: its superblocks (if any) say
       * clean, through the nodes it mapped, before the loops go */
      if (!read_only)
        vb_kernel_dm_meta_stop (block_device, uuid, nodes);
    }
  /* the loop devices under it go with it */
  loops = vb_kernel_tagged_loops (tag, instance);
  vb_kernel_detach_all (loops);
  return TRUE;
}

/* Suspend, load, resume: the kernel drains what is in flight and
 * announces the new size itself. */
static gboolean
swap_table (const VbBackendRequest *request, GPtrArray *nodes, VbReconfigureReport *report,
            GError **error)
{
  g_autofree char *name = dm_name (request->instance, request->uuid);
  struct dm_task *dmt;
  guint64 size = 0;
  gint64 held;
  gboolean ok;

  g_mutex_lock (&dm_lock);
  /* the new table first, inactive: one the kernel refuses changes nothing */
  dmt = dm_task_create (DM_DEVICE_RELOAD);
  ok = dmt && dm_task_set_name (dmt, name) && add_targets (dmt, request, nodes, &size, error)
       && run_task (dmt, "load", name, error);
  if (dmt)
    dm_task_destroy (dmt);
  if (ok)
    {
      held = g_get_monotonic_time ();
      dmt = dm_task_create (DM_DEVICE_SUSPEND);
      ok = dmt && dm_task_set_name (dmt, name) && run_task (dmt, "suspend", name, error);
      if (dmt)
        dm_task_destroy (dmt);
      vb_test_hook ("reconfigure:suspended");
      /* resumed in any case: the inactive table becomes live, or (a failed
       * suspend) the device goes on as it was */
      dmt = dm_task_create (DM_DEVICE_RESUME);
      gboolean resumed = dmt && dm_task_set_name (dmt, name)
                         && run_task (dmt, "resume", name, ok ? error : NULL);
      if (dmt)
        dm_task_destroy (dmt);
      ok = ok && resumed;
      if (report)
        {
          report->held_us = g_get_monotonic_time () - held;
          report->new_size = size;
          report->size_changed = ok && size != report->old_size;
        }
    }
  else
    {
      /* drop the inactive table a refused load may have left */
      dmt = dm_task_create (DM_DEVICE_CLEAR);
      if (dmt && dm_task_set_name (dmt, name))
        dm_task_run (dmt);
      if (dmt)
        dm_task_destroy (dmt);
    }
  g_mutex_unlock (&dm_lock);
  return ok;
}

/* The loop devices the old table used that the new one does not. */
static void
detach_unused (const char *tag, const char *instance, GPtrArray *nodes)
{
  g_autoptr (GPtrArray) loops = vb_kernel_tagged_loops (tag, instance);
  g_autoptr (GPtrArray) unused = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; i < loops->len; i++)
    {
      gboolean used = FALSE;
      for (guint j = 0; j < nodes->len; j++)
        used |= strcmp (loops->pdata[i], nodes->pdata[j]) == 0;
      if (!used)
        g_ptr_array_add (unused, g_strdup (loops->pdata[i]));
    }
  vb_kernel_detach_all (unused);
}

/* The nodes of @request's components: the loop devices already under the
 * device for its files (by backing file), new ones for new files. */
static gboolean
nodes_for (const VbBackendRequest *request, GPtrArray *nodes, GPtrArray *attached, GError **error)
{
  g_autofree char *tag = vb_kernel_loop_tag (request->instance, request->uuid);
  g_autoptr (GPtrArray) loops = vb_kernel_tagged_loops (tag, request->instance);
  g_autoptr (GPtrArray) attach = g_ptr_array_new ();

  for (guint i = 0; i < request->n_components; i++)
    {
      const char *reuse = NULL;
      struct stat want;
      if (request->components[i].kind == VB_COMPONENT_KIND_FILE
          && stat (request->paths[i], &want) == 0)
        for (guint j = 0; j < loops->len && reuse == NULL; j++)
          {
            guint64 dev, ino;
            if (vb_loop_get_backing (loops->pdata[j], &dev, &ino) && ino == want.st_ino
                && dev == want.st_dev)
              reuse = loops->pdata[j];
          }
      if (reuse || request->components[i].kind != VB_COMPONENT_KIND_FILE)
        g_ptr_array_add (nodes, g_strdup (reuse ? reuse : request->paths[i]));
      else
        {
          /* one new file: attach it alone */
          VbBackendRequest one = *request;
          g_autoptr (GPtrArray) fresh = g_ptr_array_new_with_free_func (g_free);
          one.n_components = 1;
          one.paths = &request->paths[i];
          one.components = &request->components[i];
          if (!vb_kernel_component_nodes (&one, tag, read_only_of (request), fresh, attached,
                                          error))
            return FALSE;
          g_ptr_array_add (nodes, g_strdup (fresh->pdata[0]));
        }
    }
  return TRUE;
}

/* The table of @request, loaded in place of the running one: loop devices
 * for new files, and those of files it no longer has let go. */
static gboolean
reload (const char *block_device, const VbBackendRequest *request, VbReconfigureReport *report,
        GError **error)
{
  g_autofree char *tag = vb_kernel_loop_tag (request->instance, request->uuid);
  g_autoptr (GPtrArray) nodes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) attached = g_ptr_array_new_with_free_func (g_free);

  gboolean meta = has_superblocks (request);
  VbSuperblock table;

  report->old_size = vb_kernel_node_size (block_device);
  /* superblocks: checked before the swap (a refusal changes nothing), the
   * new role table written once the new table is live */
  if (!nodes_for (request, nodes, attached, error)
      || (meta && !vb_kernel_dm_meta_check (request, nodes, TRUE, &table, error))
      || !swap_table (request, nodes, report, error))
    {
      vb_kernel_detach_all (attached);
      return FALSE;
    }
  if (meta && !read_only_of (request))
    {
      g_autoptr (GError) local = NULL;
      if (!vb_kernel_dm_meta_write (request, nodes, &table, &local))
        vb_report (request->name, VB_REPORT_WARNING, "%s", local->message);
    }
  detach_unused (tag, request->instance, nodes);
  return TRUE;
}

static gboolean
dm_supports (const VbDriver *driver, GHashTable *attributes, char **reason)
{
  if (vb_kernel_refuses_engine (attributes, reason))
    return FALSE;
  if (!vb_kernel_dm_runs (driver))
    {
      *reason = g_strdup_printf ("driver '%s' has no device-mapper table", driver->name);
      return FALSE;
    }
  return dm_available (reason);
}

gboolean
vb_kernel_dm_runs (const VbDriver *driver)
{
  return strcmp (driver->name, "window") == 0 || strcmp (driver->name, "linear") == 0;
}

static gboolean
dm_reconfigure (const char *block_device, const VbBackendRequest *request, guint timeout_ms,
                VbReconfigureReport *report, GError **error)
{
  g_autofree char *reason = NULL;

  memset (report, 0, sizeof *report);
  if (!dm_supports (request->driver, request->attributes, &reason))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   _ ("%s runs on device-mapper (backend kernel): %s"), block_device, reason);
      return FALSE;
    }
  if (!reload (block_device, request, report, error))
    {
      g_prefix_error (error, _ ("the device goes on as it was: "));
      return FALSE;
    }
  vb_report (
      request->name, VB_REPORT_INFO,
      "reconfigured to %s with %u components (device-mapper); requests held %" G_GINT64_FORMAT
      " us",
      request->driver->name, request->n_components, report->held_us);
  vb_test_hook ("reconfigure:swapped");
  return TRUE;
}

/* The table loaded again (a vblkd started again chose a configuration). */
static gboolean
dm_update (const char *block_device, const VbBackendRequest *request, GError **error)
{
  VbReconfigureReport report = { 0 };

  return reload (block_device, request, &report, error);
}

/* dm devices of @instance; the loop devices under them are the kernel
 * backend's to sweep (backend-kernel.c). */
static GPtrArray *
dm_scan (const char *instance, GError **error)
{
  GPtrArray *found = g_ptr_array_new_with_free_func ((GDestroyNotify) vb_backend_instance_free);
  g_autofree char *prefix = g_strdup_printf (DM_NAME_PREFIX "%s-", instance);
  g_autofree char *why = NULL;
  struct dm_task *dmt;
  struct dm_names *names;

  if (!dm_available (&why))
    return found;
  dm_setup_once ();
  g_mutex_lock (&dm_lock);
  dmt = dm_task_create (DM_DEVICE_LIST);
  if (dmt && dm_task_run (dmt) && (names = dm_task_get_names (dmt)) && names->dev)
    for (;;)
      {
        if (g_str_has_prefix (names->name, prefix))
          {
            VbBackendInstance *node = g_new0 (VbBackendInstance, 1);
            node->uuid = g_strdup (names->name + strlen (prefix));
            node->block_device = g_strdup_printf ("/dev/dm-%u", minor (names->dev));
            node->backing = g_strdup_printf ("device-mapper %s", names->name);
            g_ptr_array_add (found, node);
          }
        if (names->next == 0)
          break;
        names = (struct dm_names *) ((char *) names + names->next);
      }
  if (dmt)
    dm_task_destroy (dmt);
  g_mutex_unlock (&dm_lock);
  return found;
}

/* dm devices named "vblk-INSTANCE-UUID". */
static gboolean
dm_node_owner (dev_t devnum, VbNodeOwner *owner)
{
  g_autofree char *dm_name_file
      = g_strdup_printf ("/sys/dev/block/%u:%u/dm/name", major (devnum), minor (devnum));
  g_autofree char *text = NULL;
  const char *rest, *sep;

  if (!g_file_get_contents (dm_name_file, &text, NULL, NULL))
    return FALSE;
  g_strstrip (text);
  if (!g_str_has_prefix (text, DM_NAME_PREFIX))
    return FALSE;
  rest = text + strlen (DM_NAME_PREFIX);
  sep = strchr (rest, '-');
  if (sep == NULL || sep == rest || sep[1] == '\0')
    return FALSE;
  owner->instance = g_strndup (rest, sep - rest);
  owner->uuid = g_strdup (sep + 1);
  return TRUE;
}

/* Not registered by itself: backend "kernel" (backend-kernel.c) sends
 * window and linear, and every node not md's, here. */
const VbBackend vb_kernel_dm_backend = {
  .name = "kernel-dm",
  .capabilities = VB_BACKEND_CAN_FORMAT | VB_BACKEND_CAN_RECONFIGURE | VB_BACKEND_SURVIVES_SERVER,
  .available = dm_available,
  .supports = dm_supports,
  .start = dm_start,
  .stop = dm_stop,
  .update = dm_update,
  .scan = dm_scan,
  .node_owner = dm_node_owner,
  .format = vb_kernel_format,
  .reconfigure = dm_reconfigure,
};
