/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Backend "kernel", its md part (kernel-md): raid0, raid1 and raid10 as in-kernel md
 * arrays, configured through sysfs alone, with vblk's own superblocks as
 * the array's external metadata ("external:vblk"): md keeps nothing on the
 * components, and vblkd plays the part mdmon plays for mdadm's external
 * formats.
 *
 * This file is the md part's VbBackend; md-array.c holds an array,
 * md-superblocks.c vblk's metadata, md-assemble.c the start, md-monitor.c
 * the monitor, md-members.c failures and spares, md-jobs.c md's jobs.
 *
 *  - Start: the superblocks are read and the array assembled the way the
 *    engine assembles it (the newest superblock's role table; a stale or
 *    new component is recovered by md in full; a missing one leaves the
 *    array degraded), the superblocks are marked dirty, then
 *    new_array, metadata_version, level, chunk_size, layout, raid_disks,
 *    resync_start, and for each component new_dev, dev-X/offset, size,
 *    state=insync or recovery_start, slot; array_state=active.
 *  - The monitor thread (one per array) waits on md's sysfs attributes
 *    (poll POLLPRI) and answers them: a component md marks faulty and
 *    blocked is recorded as faulty in the surviving superblocks, then
 *    unblocked, then removed (md holds the writes to it until then, so no
 *    write is acknowledged that the metadata does not account for);
 *    array_state write-pending is answered by marking the superblocks
 *    dirty, then active; active-idle by clean, and once md says clean with
 *    no resync pending the superblocks say clean. A recovered component
 *    becomes in-sync in them. md's resync, recovery, check and repair are
 *    reported as jobs; a spare replaces a removed component.
 *  - Stop: array_state=clear, then the superblocks say clean if md had
 *    nothing left to resync.
 *
 * An mdadm array (metadata=md1) runs with md's own superblocks instead:
 * metadata_version 1.x and new_dev for each member (md reads the roles
 * and offsets from the superblocks), and md writes them itself on a
 * failure, recovery or re-add, as with mdadm. The monitor then leaves
 * array_state and a failed member's "blocked" to md (md clears it once
 * its superblocks record the failure) and only reports, removes, takes
 * spares (a blank one gets its first superblock from a member's, as
 * mdadm --add does) and follows the jobs.
 *
 * md has no bitmap for metadata it does not know, so vblk's bitmap area is
 * marked all dirty while md runs the array (a crash resyncs every chunk,
 * on either backend) and cleared by a clean stop.
 *
 * Names: the array is "md_vbINSTANCE_" and the first 16 hex digits of the
 * device UUID (md allows 31 characters), its node /dev/md_vb…; the full
 * UUID and name are kept in RUN_DIR/md/ARRAY for a vblkd started again
 * while the array runs (md arrays outlive vblkd, as they outlive mdadm). */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "assembly.h"
#include "kernel-parts.h"
#include "kernel-util.h"
#include "loop-util.h"
#include "md-array.h"
#include "vb-error.h"
#include "vb-report.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static gboolean
md_available (char **reason)
{
  if (access (NEW_ARRAY, W_OK) != 0)
    {
      *reason = g_strdup ("no md (" NEW_ARRAY "; kernel module md-mod not loaded)");
      return FALSE;
    }
  return TRUE;
}

gboolean
vb_kernel_md_is_node (const char *block_device)
{
  return g_str_has_prefix (block_device, "/dev/" MD_NAME_PREFIX);
}

static gboolean
md_supports (const VbDriver *driver, GHashTable *attributes, char **reason)
{
  if (vb_kernel_refuses_engine (attributes, reason))
    return FALSE;
  if (!vb_kernel_md_runs (driver))
    {
      *reason = g_strdup_printf ("driver '%s' has no md level", driver->name);
      return FALSE;
    }
  if (!md_available (reason))
    return FALSE;
  /* md keeps no superblock of its own here: without vblk's, which copy is
   * current could not be told after a failure */
  if (strcmp (driver->name, "raid0") != 0 && attributes && !vb_driver_has_metadata (attributes))
    {
      *reason
          = g_strdup_printf ("driver '%s' on md needs metadata=vblk or md1 (the engine keeps which "
                             "copy is behind in the desired state instead)",
                             driver->name);
      return FALSE;
    }
  return TRUE;
}

gboolean
vb_kernel_md_runs (const VbDriver *driver)
{
  return strcmp (driver->name, "raid0") == 0 || strcmp (driver->name, "raid1") == 0
         || strcmp (driver->name, "raid10") == 0;
}

/* An md array node "/dev/md_vbINSTANCE_HEX16" vblk made. */
static gboolean
md_node_owner (dev_t devnum, VbNodeOwner *owner)
{
  g_autofree char *node = vb_node_of_devnum (devnum);
  const char *rest, *sep;

  if (node == NULL || !vb_kernel_md_is_node (node))
    return FALSE;
  rest = node + strlen ("/dev/" MD_NAME_PREFIX);
  sep = strchr (rest, '_');
  if (sep == NULL || sep == rest || sep[1] == '\0')
    return FALSE;
  owner->instance = g_strndup (rest, sep - rest);
  owner->uuid = g_strdup (sep + 1);
  return TRUE;
}

/* Arrays of @instance running in the kernel; each gets its monitor again. */
static GPtrArray *
md_scan (const char *instance, GError **error)
{
  GPtrArray *found = g_ptr_array_new_with_free_func ((GDestroyNotify) vb_backend_instance_free);
  g_autofree char *prefix = g_strdup_printf (MD_NAME_PREFIX "%s_", instance);
  g_autoptr (GDir) dir = g_dir_open ("/sys/block", 0, NULL);
  const char *entry;

  while (dir && (entry = g_dir_read_name (dir)))
    {
      g_autofree char *bd = NULL;
      g_autoptr (MdArray) a = NULL;
      VbBackendInstance *node;
      if (!g_str_has_prefix (entry, prefix))
        continue;
      bd = g_strdup_printf ("/dev/%s", entry);
      a = md_lookup_array (bd);
      if (a == NULL && (a = md_attach_running (entry, instance)) != NULL)
        {
          md_publish_status_locked (a); /* nobody else has it yet */
          md_register_array (a);
          md_monitor_start (a);
          vb_report (a->name, VB_REPORT_INFO, "md array %s found running; watching it again",
                     a->md);
        }
      if (a == NULL)
        continue;
      node = g_new0 (VbBackendInstance, 1);
      node->uuid = g_strdup (a->uuid);
      node->block_device = g_strdup (a->block_device);
      node->backing = g_strdup_printf ("md array %s", a->md);
      g_ptr_array_add (found, node);
    }
  return found;
}

static gboolean
md_stop (const char *block_device, const char *instance, const char *uuid, GError **error)
{
  g_autofree char *base = g_path_get_basename (block_device);
  g_autofree char *tag = vb_kernel_loop_tag (instance, uuid);
  g_autofree char *resync = NULL, *path = NULL;
  g_autoptr (GPtrArray) loops = NULL;
  g_autoptr (GArray) pfds = g_array_new (FALSE, FALSE, sizeof (struct pollfd));
  g_autoptr (MdArray) a = md_lookup_array (block_device);
  gboolean watched = a != NULL;
  int r;

  if (a == NULL && access (block_device, F_OK) == 0)
    {
      a = md_attach_running (base, instance);
      if (a == NULL)
        {
          g_autofree char *file = md_run_file (base);
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       _ ("%s runs, but vblkd cannot tell which device it is (%s is gone); not "
                          "stopping it (mdadm --stop does)"),
                       block_device, file);
          return FALSE;
        }
    }
  if (a == NULL)
    {
      /* the array is gone; what was under it goes too */
      loops = vb_kernel_tagged_loops (tag, instance);
      vb_kernel_detach_all (loops);
      return TRUE;
    }
  if (strcmp (a->uuid, uuid) != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("%s belongs to another device (%s), not stopping it"), block_device, a->uuid);
      return FALSE;
    }
  md_monitor_stop (a);
  /* a failure md found since the monitor's last look is recorded first */
  g_mutex_lock (&a->lock);
  md_members_locked (a, pfds);
  resync = md_get (a, "resync_start");
  g_mutex_unlock (&a->lock);
  for (guint i = 0; i < pfds->len; i++)
    close (g_array_index (pfds, struct pollfd, i).fd);
  r = md_clear_array (a);
  if (r < 0)
    {
      g_set_error (error, VB_ERROR, r == -EBUSY ? VB_ERROR_BUSY : VB_ERROR_FAILED,
                   _ ("stopping md array %s: %s"), a->md,
                   r == -EBUSY ? "it is in use (mounted or open)" : g_strerror (-r));
      if (watched)
        md_monitor_start (a);
      return FALSE;
    }
  /* md has written everything: the copies are equal unless a resync was
   * still to run */
  g_mutex_lock (&a->lock);
  if (a->meta && !a->read_only)
    {
      a->sb.clean = a->copies == 1 || g_strcmp0 (resync, "none") == 0;
      /* the bitmap is cleared after this write: a copy of a component
       * taken before it is never resynced from the cleared bits */
      if (a->sb.clean)
        vb_assembly_record_clear (&a->sb);
      md_write_all_locked (a);
      if (a->sb.clean)
        for (guint i = 0; i < a->n; i++)
          md_write_bitmap (a, a->members[i], FALSE);
    }
  g_mutex_unlock (&a->lock);
  md_unregister_array (a);
  path = md_run_file (a->md);
  unlink (path);
  vb_report (a->name, VB_REPORT_INFO, "md array %s stopped%s", a->md,
             a->meta && a->sb.clean ? " clean" : "");
  loops = vb_kernel_tagged_loops (tag, instance);
  vb_kernel_detach_all (loops);
  return TRUE;
}

static gboolean
md_update (const char *block_device, const VbBackendRequest *request, GError **error)
{
  g_autoptr (MdArray) a = md_lookup_array (block_device);
  static const char *const speeds[] = { "sync_speed_min", "sync_speed_max" };

  if (a == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("%s: no md array of vblkd's"),
                   block_device);
      return FALSE;
    }
  g_mutex_lock (&a->lock);
  /* md's speeds are KiB/s; 0 leaves md's own ("system") */
  for (guint i = 0; i < G_N_ELEMENTS (speeds); i++)
    if (g_hash_table_contains (request->attributes, speeds[i]))
      {
        guint64 v = vb_attr_get_u64 (request->attributes, speeds[i]);
        g_autofree char *text
            = v ? g_strdup_printf ("%" G_GUINT64_FORMAT, MAX (v / 1024, 1)) : g_strdup ("system");
        md_set (a, speeds[i], text);
      }
  if (a->meta)
    {
      vb_superblock_set_attributes (&a->sb, request->attributes);
      md_write_all_locked (a);
    }
  g_mutex_unlock (&a->lock);
  return TRUE;
}

static gboolean
md_component_status (const char *block_device, guint component, gboolean *faulty,
                     gboolean *rebuilding, guint64 *errors)
{
  g_autoptr (MdArray) a = md_lookup_array (block_device);
  g_autofree char *attr = NULL, *text = NULL;

  if (a == NULL || component >= a->n)
    return FALSE;
  g_mutex_lock (&a->status_lock);
  *faulty = a->status[component].faulty;
  *rebuilding = a->status[component].rebuilding;
  attr = g_strdup (a->status[component].errors);
  g_mutex_unlock (&a->status_lock);
  text = attr ? md_get (a, attr) : NULL;
  *errors = text ? g_ascii_strtoull (text, NULL, 10) : 0;
  return TRUE;
}

static gboolean
md_component_missing (const char *block_device, guint component)
{
  g_autoptr (MdArray) a = md_lookup_array (block_device);
  gboolean missing;

  if (a == NULL || component >= a->n)
    return FALSE;
  g_mutex_lock (&a->status_lock);
  missing = a->status[component].missing;
  g_mutex_unlock (&a->status_lock);
  return missing;
}

static gboolean
md_lost_data (const char *block_device)
{
  g_autoptr (MdArray) a = md_lookup_array (block_device);
  g_autofree gboolean *healthy = NULL;
  gboolean lost;

  if (a == NULL)
    return FALSE;
  healthy = g_new0 (gboolean, a->n);
  g_mutex_lock (&a->status_lock);
  for (guint i = 0; i < a->n; i++)
    healthy[i] = a->status[i].healthy;
  g_mutex_unlock (&a->status_lock);
  /* a raid0 has one copy: every member must be there */
  lost = !md_every_chunk_has_a_copy (a, healthy, -1);
  return lost;
}

static int
set_faulty (const char *block_device, guint component)
{
  g_autoptr (MdArray) a = md_lookup_array (block_device);
  g_autofree gboolean *healthy = NULL;
  Member *m;
  g_autofree char *attr = NULL, *st = NULL;
  int r = 0;

  /* not an md array (a device-mapper node of backend kernel): no redundancy */
  if (a == NULL || a->copies == 1)
    return -ENOTSUP;
  if (component >= a->n)
    return -ENODEV;
  healthy = g_new0 (gboolean, a->n);
  g_mutex_lock (&a->lock);
  m = a->members[component];
  if (m == NULL || m->failed || m->removed)
    goto out;
  for (guint i = 0; i < a->n; i++)
    healthy[i] = md_member_healthy (a->members[i]);
  if (!m->rebuilding && !md_every_chunk_has_a_copy (a, healthy, (gint) component))
    {
      r = -EBUSY;
      goto out;
    }
  attr = md_dev_attr (m, "state");
  r = md_set (a, attr, "faulty");
  st = md_get (a, attr);
  if (!md_has_word (st, "faulty"))
    {
      r = r < 0 ? r : -EBUSY;
      goto out;
    }
  r = 0;
  /* recorded before md may go on; the monitor unblocks and removes it */
  md_record_failure_locked (a, component, "was set faulty", TRUE);
out:
  md_publish_status_locked (a);
  g_mutex_unlock (&a->lock);
  md_wake (a);
  return r;
}

static gboolean
md_set_faulty (const char *block_device, guint component, GError **error)
{
  return vb_backend_errno (set_faulty (block_device, component), error);
}

static void
md_release (const char *block_device, guint component)
{
  g_autoptr (MdArray) a = md_lookup_array (block_device);
  Member *m;

  if (a == NULL || component >= a->n)
    return;
  g_mutex_lock (&a->lock);
  m = a->members[component];
  if (m && m->failed && !m->removed)
    {
      g_autofree char *attr = md_dev_attr (m, "state");
      md_set (a, attr, "-blocked");
      if (md_set (a, attr, "remove") == 0)
        md_member_gone_locked (a, component, FALSE);
    }
  /* it went away: the table says missing, so that it is re-added when it
   * comes back, also by a later vblkd (a failure stays faulty) */
  if (m && m->failed && a->meta && a->sb.roles[component].state == VB_ROLE_FAULTY
      && strcmp (a->sb.roles[component].uuid, m->uuid ? m->uuid : "") == 0)
    {
      a->sb.roles[component].state = VB_ROLE_MISSING;
      if (md_write_all_locked (a))
        vb_report (a->name, VB_REPORT_INFO,
                   "component %u (%s) went away; recorded as missing (events %" G_GUINT64_FORMAT
                   ")",
                   component, m->path, a->sb.events);
    }
  md_publish_status_locked (a);
  g_mutex_unlock (&a->lock);
}

static gboolean
md_readd (const char *block_device, guint slot, const char *path, const char *uuid, GError **error)
{
  g_autoptr (MdArray) a = md_lookup_array (block_device);
  Member *m;
  g_autofree char *keep_uuid = NULL;
  gboolean ok;

  if (a == NULL || slot >= a->n)
    {
      g_set_error (error, VB_ERROR, a ? VB_ERROR_FAILED : VB_ERROR_NOT_SUPPORTED,
                   _ ("%s: no slot %u of an md array of vblkd's (no redundancy to re-add to)"),
                   block_device, slot);
      return FALSE;
    }
  g_mutex_lock (&a->lock);
  m = a->members[slot];
  if (m && !m->failed && !m->removed)
    {
      g_mutex_unlock (&a->lock);
      g_set_error (error, VB_ERROR, VB_ERROR_BUSY, _ ("slot %u of %s is in use by '%s'"), slot,
                   a->name, m->path);
      return FALSE;
    }
  if (m && !m->removed)
    {
      g_autofree char *attr = md_dev_attr (m, "state");
      md_set (a, attr, "-blocked");
      if (md_set (a, attr, "remove") < 0)
        {
          g_mutex_unlock (&a->lock);
          g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                       _ ("md has not let go of the failed component in slot %u of %s yet"), slot,
                       a->name);
          return FALSE;
        }
      md_member_gone_locked (a, slot, FALSE);
    }
  keep_uuid = g_strdup (uuid ? uuid : m ? m->uuid : a->sb.roles[slot].uuid);
  ok = md_add_member_locked (a, slot, path, keep_uuid, error);
  md_publish_status_locked (a);
  g_mutex_unlock (&a->lock);
  md_wake (a);
  return ok;
}

static void
md_set_spares (const char *block_device, guint n, const char *const *paths,
               const char *const *uuids)
{
  g_autoptr (MdArray) a = md_lookup_array (block_device);

  if (a == NULL)
    return;
  g_mutex_lock (&a->lock);
  g_ptr_array_set_size (a->spare_paths, 0);
  g_ptr_array_set_size (a->spare_uuids, 0);
  for (guint i = 0; i < n; i++)
    {
      g_ptr_array_add (a->spare_paths, g_strdup (paths[i]));
      g_ptr_array_add (a->spare_uuids, g_strdup (uuids[i]));
    }
  g_mutex_unlock (&a->lock);
  md_wake (a);
}

/* md arrays are not served by this process: no in-process access, and
 * the slots' sources are the desired state's */
static gboolean
md_block_ops (const char *block_device, const VbBlockOps **ops, void **handle)
{
  return FALSE;
}

static char *
md_slot_source (const char *block_device, guint component)
{
  return NULL;
}

/* With vblk's metadata md holds a write to a clean array until the monitor
 * marks the superblocks dirty (write-pending); md's own metadata and a
 * raid0 need nobody. */
static gboolean
md_needs_server (const char *block_device)
{
  g_autoptr (MdArray) a = md_lookup_array (block_device);

  return a != NULL && a->meta && !a->native && a->copies > 1;
}

#define SETTLE_WAIT_MS 10000

/* md goes clean once idle (its safe mode, 200 ms), and the monitor then
 * marks vblk's superblocks clean: waited for. */
static gboolean
md_settle (const char *block_device, GError **error)
{
  g_autoptr (MdArray) a = md_lookup_array (block_device);
  gint64 deadline = g_get_monotonic_time () + SETTLE_WAIT_MS * 1000;
  gboolean clean = FALSE;

  if (a == NULL || !a->meta || a->native || a->read_only)
    return TRUE; /* md keeps its own superblocks, or writes nothing */
  for (;;)
    {
      g_mutex_lock (&a->lock);
      clean = a->sb.clean;
      g_mutex_unlock (&a->lock);
      if (clean || g_get_monotonic_time () > deadline)
        break;
      md_wake (a);
      g_usleep (100 * 1000);
    }
  if (!clean)
    {
      g_autofree char *state = md_get (a, "array_state");
      g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                   _ ("md array still %s after %d s: its superblocks say not clean"), state,
                   SETTLE_WAIT_MS / 1000);
    }
  return clean;
}

const VbEngineDeviceOps vb_kernel_md_ops = {
  .component_status = md_component_status,
  .slot_source = md_slot_source,
  .component_missing = md_component_missing,
  .lost_data = md_lost_data,
  .set_faulty = md_set_faulty,
  .release = md_release,
  .block_ops = md_block_ops,
  .check = md_check,
  .cancel_job = md_cancel_job,
  .readd = md_readd,
  .set_spares = md_set_spares,
  .needs_server = md_needs_server,
  .settle = md_settle,
};

/* Not registered by itself: backend "kernel" (backend-kernel.c) sends md
 * drivers and md nodes here. */
const VbBackend vb_kernel_md_backend = {
  .name = "kernel-md",
  .capabilities = VB_BACKEND_CAN_FORMAT | VB_BACKEND_SURVIVES_SERVER,
  .available = md_available,
  .supports = md_supports,
  .start = md_start_array,
  .stop = md_stop,
  .update = md_update,
  .scan = md_scan,
  .node_owner = md_node_owner,
  .format = vb_kernel_format,
  .engine = &vb_kernel_md_ops,
};
