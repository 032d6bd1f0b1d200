/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Backend "kernel", md part: an array made in md through sysfs alone
 * (vblk's metadata, or md's own for metadata=md1), and one found running
 * taken up again (vblkd started again). */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "md-array.h"
#include "assembly.h"
#include "handler-md1.h"
#include "kernel-util.h"
#include "loop-util.h"
#include "metadata.h"
#include "superblock.h"
#include "vb-error.h"
#include "vb-testhook.h"
#include "vb-report.h"

#include <errno.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* Linux 7.x's md keeps the disk of an array made through new_array after
 * array_state=clear (legacy_async_del_gendisk, on by default), and with
 * it the old array's flags (a raid1 that broke would refuse every write
 * when configured again). vblk, as mdadm 4.5 does, turns that off: a
 * stopped array is then deleted at "clear". Once per process. */
static void
no_kept_arrays (void)
{
  static gsize done;
  g_autofree char *now = NULL;

  if (!g_once_init_enter (&done))
    return;
  now = vb_kernel_sys_read (LEGACY_DEL_GENDISK);
  if (now && strcmp (now, "Y") == 0)
    {
      int r = vb_kernel_sys_write (LEGACY_DEL_GENDISK, "N");
      vb_report ("md", r < 0 ? VB_REPORT_WARNING : VB_REPORT_INFO,
                 "legacy_async_del_gendisk: %s (stopped arrays' disks are deleted, as mdadm "
                 "sets it)",
                 r < 0 ? g_strerror (-r) : "set to N");
    }
  g_once_init_leave (&done, 1);
}

/* Whether the array @a names is there, stopped and empty: kept by a md
 * before no_kept_arrays turned that off (or by another program). */
static gboolean
left_stopped (MdArray *a)
{
  g_autofree char *state = md_get (a, "array_state");
  g_autoptr (GDir) dir = NULL;
  const char *entry;

  if (g_strcmp0 (state, "clear") != 0)
    return FALSE;
  dir = g_dir_open (a->sysdir, 0, NULL);
  while (dir && (entry = g_dir_read_name (dir)))
    if (g_str_has_prefix (entry, "dev-"))
      return FALSE;
  return dir != NULL;
}

/* new_array: the empty array appears. An array of that name already
 * there (-EEXIST) is said in @error; other errors are the caller's. A
 * stopped, empty one of that name (the name is the device's: this vblk
 * stopped it) is deleted first, by a second "clear" now that md deletes
 * at "clear": never configured again, its old flags would stay. */
static int
create_array (MdArray *a, GError **error)
{
  int r;

  no_kept_arrays ();
  r = vb_kernel_sys_write (NEW_ARRAY, a->md);
  if (r == -EEXIST && left_stopped (a) && md_set (a, "array_state", "clear") == 0)
    r = vb_kernel_sys_write (NEW_ARRAY, a->md);
  if (r == -EEXIST)
    g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("md array %s exists already"), a->md);
  return r;
}

static gboolean
configure (MdArray *a, const VbLayout *layout, gboolean resync, GError **error)
{
  guint64 data_offset = a->meta ? a->sb.data_offset : 0;
  guint64 data_size = a->meta ? a->sb.data_size : layout->component_size;
  int r;
  g_autofree char *what = g_strdup ("new_array");

  r = create_array (a, error);
  if (r == -EEXIST)
    return FALSE;
#define SET(attr, value)                                                                           \
  if (r == 0)                                                                                      \
    {                                                                                              \
      g_free (what);                                                                               \
      what = g_strdup (attr);                                                                      \
      r = (value);                                                                                 \
    }
  SET ("metadata_version", md_set (a, "metadata_version", MD_METADATA));
  SET ("level", md_set (a, "level", a->driver));
  if (layout->chunk_size)
    SET ("chunk_size", md_set_u64 (a, "chunk_size", layout->chunk_size));
  /* raid10: near copies in the low byte, one far copy */
  if (strcmp (a->driver, "raid10") == 0)
    SET ("layout", md_set_u64 (a, "layout", 0x100 | a->copies));
  SET ("raid_disks", md_set_u64 (a, "raid_disks", a->n));
  if (a->copies > 1)
    SET ("resync_start", md_set (a, "resync_start", resync ? "0" : "none"));
  for (guint i = 0; i < a->n && r == 0; i++)
    {
      Member *m = a->members[i];
      g_autofree char *dev = NULL, *offset = NULL, *size = NULL, *state = NULL, *rstart = NULL,
                      *slot = NULL;
      if (m == NULL || m->removed)
        continue;
      dev = g_strdup_printf ("%u:%u", major (m->devnum), minor (m->devnum));
      offset = md_dev_attr (m, "offset");
      size = md_dev_attr (m, "size");
      state = md_dev_attr (m, "state");
      rstart = md_dev_attr (m, "recovery_start");
      slot = md_dev_attr (m, "slot");
      SET ("new_dev", md_set (a, "new_dev", dev));
      SET (offset, md_set_u64 (a, offset, data_offset / SECTOR));
      SET (size, md_set_u64 (a, size, data_size / 1024));
      /* as mdadm does: in-sync before the slot; where recovery starts
       * after it (setting the slot of an inactive array marks the
       * member in sync) */
      if (!m->rebuilding && a->copies > 1)
        md_set (a, state, "insync");
      SET (slot, md_set_u64 (a, slot, i));
      if (m->rebuilding)
        {
          SET (rstart, md_set (a, rstart, "0"));
        }
    }
  if (a->copies > 1)
    SET ("component_size", md_set_u64 (a, "component_size", data_size / 1024));
  vb_test_hook ("md:configured");
  SET ("array_state", md_set (a, "array_state", a->read_only ? "readonly" : "active"));
#undef SET
  if (r < 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("md refused %s of %s (%s): %s"), what,
                   a->md, a->name, g_strerror (-r));
      md_clear_array (a);
      return FALSE;
    }
  return TRUE;
}

/* md1: md reads everything from the members' superblocks; a member md
 * leaves out (not fresh) is added back and recovered. */
static gboolean
configure_native (MdArray *a, GError **error)
{
  g_autofree char *state = NULL;
  int r = create_array (a, error);
  const char *what = "new_array";
  gboolean recover = FALSE;

  if (r == -EEXIST)
    return FALSE;
  if (r == 0)
    {
      what = "metadata_version";
      r = md_set (a, "metadata_version", a->md_version);
    }
  for (guint i = 0; i < a->n && r == 0; i++)
    {
      Member *m = a->members[i];
      g_autofree char *dev = NULL;
      if (m == NULL)
        continue;
      dev = g_strdup_printf ("%u:%u", major (m->devnum), minor (m->devnum));
      what = m->path;
      r = md_set (a, "new_dev", dev);
    }
  if (r == 0)
    {
      what = "array_state";
      r = md_set (a, "array_state", a->read_only ? "readonly" : "active");
    }
  if (r < 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("md refused %s of %s (%s): %s (does every component carry a superblock of "
                      "the array, md %s?)"),
                   what, a->md, a->name, g_strerror (-r), a->md_version);
      md_clear_array (a);
      return FALSE;
    }
  /* started read-auto, md would wait for a write to resync */
  state = md_get (a, "array_state");
  if (!a->read_only && g_strcmp0 (state, "read-auto") == 0)
    md_set (a, "array_state", "active");
  for (guint i = 0; i < a->n; i++)
    {
      Member *m = a->members[i];
      g_autofree char *attr = NULL, *st = NULL;
      if (m == NULL)
        continue;
      attr = md_dev_attr (m, "state");
      st = md_get (a, attr);
      if (st == NULL)
        {
          g_autofree char *dev = g_strdup_printf ("%u:%u", major (m->devnum), minor (m->devnum));
          vb_report (a->name, VB_REPORT_INFO, "md left '%s' out (not fresh); adding it back",
                     m->path);
          if (md_set (a, "new_dev", dev) < 0)
            {
              m->failed = m->removed = TRUE;
              continue;
            }
          m->rebuilding = TRUE;
          recover = TRUE;
        }
      else
        m->rebuilding = !md_has_word (st, "in_sync");
    }
  if (recover)
    md_set (a, "sync_action", "recover");
  return TRUE;
}

/* Linux 7.x (seen on Debian's 7.3) can leave the resync or recovery an
 * array starts with PENDING: the array goes read-write from read-auto,
 * and restart_array wakes the sync thread, which does not exist yet,
 * instead of md's own, so md waits for the next write to start it. "idle"
 * in sync_action wakes md's thread, which then starts what is pending.
 * Only when nothing started within a moment: 6.1 starts at once, and
 * "idle" would interrupt it. */
static void
kick_pending_sync (MdArray *a)
{
  gboolean rebuilding = FALSE;

  if (a->read_only || a->copies < 2)
    return;
  for (guint i = 0; i < a->n; i++)
    rebuilding |= a->members[i] && !a->members[i]->removed && a->members[i]->rebuilding;
  for (guint i = 0; i < 20; i++)
    {
      g_autofree char *resync = md_get (a, "resync_start");
      g_autofree char *done = md_get (a, "sync_completed");

      if ((g_strcmp0 (resync, "none") == 0 && !rebuilding) || resync == NULL
          || (done && strcmp (done, "none") != 0))
        return;
      g_usleep (10000);
    }
  vb_report (a->name, VB_REPORT_INFO, "md left the %s pending; woken through sync_action",
             rebuilding ? "recovery" : "resync");
  md_set (a, "sync_action", "idle");
}

static void
write_run_file (MdArray *a)
{
  g_autofree char *path = md_run_file (a->md);
  g_autofree char *dir = g_path_get_dirname (path);
  g_autofree char *text = g_strdup_printf ("%s\n%s\n", a->uuid, a->name);
  g_autoptr (GError) local = NULL;

  if (g_mkdir_with_parents (dir, 0700) != 0
      || !g_file_set_contents_full (path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, &local))
    vb_report (a->name, VB_REPORT_WARNING, "%s: %s", path,
               local ? local->message : g_strerror (errno));
}

char *
md_start_array (const VbBackendRequest *request, GError **error)
{
  g_autofree char *tag = vb_kernel_loop_tag (request->instance, request->uuid);
  g_autoptr (GPtrArray) nodes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) attached = g_ptr_array_new_with_free_func (g_free);
  MdArray *a = md_array_new (request->instance, request->uuid, request->name, request->driver->name,
                             request->n_components);
  VbLayout layout = { 0 };
  VbUdevWatch *watch = NULL;
  gboolean resync = FALSE;
  char *block_device;

  request->driver->layout (request->attributes, request->components, request->n_components,
                           &layout);
  a->copies = layout.copies ? layout.copies : 1;
  a->native = g_strcmp0 (g_hash_table_lookup (request->attributes, "metadata"), "md1") == 0;
  a->meta = !a->native && vb_driver_data_offset (request->attributes) > 0;
  a->md_version
      = g_strdup (a->native ? g_hash_table_lookup (request->attributes, "md_version") : NULL);
  a->read_only = g_strcmp0 (g_hash_table_lookup (request->attributes, "read_only"), "true") == 0;
  for (guint i = 0; i < request->n_spares; i++)
    {
      g_ptr_array_add (a->spare_paths, g_strdup (request->spare_paths[i]));
      g_ptr_array_add (a->spare_uuids, g_strdup (request->spare_uuids[i]));
    }
  if (!vb_kernel_component_nodes (request, tag, a->read_only, nodes, attached, error))
    goto fail;
  for (guint i = 0; i < a->n; i++)
    if (nodes->pdata[i]
        && (a->members[i] = md_member_new (request->paths[i], request->component_uuids[i],
                                           nodes->pdata[i], a->meta, error))
               == NULL)
      goto fail;
  if (a->meta)
    {
      if (!md_assemble (a, request, &layout, error))
        goto fail;
      resync = !a->sb.clean;
      if (!a->read_only)
        {
          a->sb.clean = FALSE;
          /* superblocks from before events_cleared was recorded: no copy
           * older than this write is trusted (assembly.h) */
          if (!(a->sb.features & VB_SB_FEATURE_EVENTS_CLEARED))
            vb_assembly_record_clear (&a->sb);
          md_write_all_locked (a);
          for (guint i = 0; i < a->n; i++)
            md_write_bitmap (a, a->members[i], TRUE);
        }
    }
  watch = vb_udev_watch_begin ();
  if (!(a->native ? configure_native (a, error) : configure (a, &layout, resync, error)))
    goto fail;
  vb_udev_watch_end (g_steal_pointer (&watch), vb_devnum_of (a->block_device), "change");
  kick_pending_sync (a);
  write_run_file (a);
  md_publish_status_locked (a); /* nobody else has it yet */
  md_register_array (a);
  md_monitor_start (a);
  vb_report (a->name, VB_REPORT_INFO, "md array %s (%s, %u components%s)", a->md, a->driver, a->n,
             resync ? ", resyncing" : "");
  block_device = g_strdup (a->block_device);
  md_array_unref (a); /* the table keeps it */
  return block_device;

fail:
  vb_udev_watch_end (watch, 0, NULL);
  md_array_unref (a);
  vb_kernel_detach_all (attached);
  return NULL;
}

/* Where the data starts on the first member md lists (sectors; 0: none). */
static guint64
member_offset (MdArray *a, const char *sysdir)
{
  g_autoptr (GDir) dir = g_dir_open (sysdir, 0, NULL);
  const char *entry;

  while (dir && (entry = g_dir_read_name (dir)))
    if (g_str_has_prefix (entry, "dev-"))
      {
        g_autofree char *attr = g_build_filename (entry, "offset", NULL);
        g_autofree char *offset = md_get (a, attr);
        return offset ? g_ascii_strtoull (offset, NULL, 10) : 0;
      }
  return 0;
}

/* The member md lists as @entry ("dev-KNAME"), in its slot of @a; its
 * superblock read (vblk's or md's). *@newest: the events of the newest
 * vblk superblock so far (-1: none), which becomes the array's. */
static void
attach_member (MdArray *a, const char *entry, gint64 *newest)
{
  g_autofree char *slot = NULL, *state = NULL, *node = NULL, *a_slot = NULL, *a_state = NULL;
  g_autoptr (GError) local = NULL;
  VbSuperblock sb;
  Member *m;
  guint64 s;

  a_slot = g_build_filename (entry, "slot", NULL);
  a_state = g_build_filename (entry, "state", NULL);
  slot = md_get (a, a_slot);
  state = md_get (a, a_state);
  if (slot == NULL || !g_ascii_string_to_unsigned (slot, 10, 0, a->n - 1, &s, NULL))
    return;
  node = g_strdup_printf ("/dev/%s", entry + 4);
  m = md_member_new (node, "", node, a->meta, &local);
  if (m == NULL)
    {
      vb_report (a->md, VB_REPORT_WARNING, "%s", local->message);
      return;
    }
  /* a faulty member is recorded by the monitor (again, if the killed
   * vblkd had done it): its superblocks may not say so yet */
  m->rebuilding = !md_has_word (state, "faulty") && !md_has_word (state, "in_sync");
  if (a->native && vb_metadata_md1.read (-1, m->node, &sb, NULL))
    {
      g_free (m->uuid);
      m->uuid = g_strdup (sb.component_uuid);
    }
  else if (a->meta && vb_superblock_read (m->fd, m->path, &sb, NULL))
    {
      g_free (m->uuid);
      m->uuid = g_strdup (sb.component_uuid);
      if (*newest < 0 || sb.events > (guint64) *newest)
        {
          *newest = (gint64) sb.events;
          a->sb = sb;
        }
    }
  md_member_free (a->members[s]);
  a->members[s] = m;
}

/* Every member md lists in @sysdir. FALSE when the array carries vblk's
 * metadata and no member a readable superblock of it. */
static gboolean
attach_members (MdArray *a, const char *sysdir)
{
  g_autoptr (GDir) dir = g_dir_open (sysdir, 0, NULL);
  const char *entry;
  gint64 newest = -1;

  while (dir && (entry = g_dir_read_name (dir)))
    if (g_str_has_prefix (entry, "dev-"))
      attach_member (a, entry, &newest);
  if (a->meta && newest < 0)
    {
      vb_report (a->md, VB_REPORT_WARNING,
                 "no member holds a readable vblk superblock; not watching it");
      return FALSE;
    }
  return TRUE;
}

MdArray *
md_attach_running (const char *md, const char *instance)
{
  g_autofree char *sysdir = g_strdup_printf ("/sys/block/%s/md", md);
  g_autofree char *path = md_run_file (md);
  g_autofree char *text = NULL, *version = NULL, *level = NULL, *disks = NULL, *layout = NULL;
  g_auto (GStrv) lines = NULL;
  MdArray *a;

  g_autofree char *p_version = g_build_filename (sysdir, "metadata_version", NULL);
  g_autofree char *p_level = g_build_filename (sysdir, "level", NULL);
  g_autofree char *p_disks = g_build_filename (sysdir, "raid_disks", NULL);

  version = vb_kernel_sys_read (p_version);
  if (version == NULL || (strcmp (version, MD_METADATA) != 0 && !g_str_has_prefix (version, "1."))
      || !g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  lines = g_strsplit (text, "\n", 3);
  if (g_strv_length (lines) < 2)
    return NULL;
  level = vb_kernel_sys_read (p_level);
  disks = vb_kernel_sys_read (p_disks);
  if (level == NULL || disks == NULL)
    return NULL;
  a = md_array_new (instance, lines[0], lines[1], level,
                    (guint) g_ascii_strtoull (disks, NULL, 10));
  if (a->n == 0 || strcmp (a->md, md) != 0)
    {
      md_array_unref (a);
      return NULL;
    }
  layout = md_get (a, "layout");
  a->copies = strcmp (level, "raid1") == 0    ? a->n
              : strcmp (level, "raid10") == 0 ? (guint) (g_ascii_strtoull (layout, NULL, 10) & 0xff)
                                              : 1;
  a->native = g_str_has_prefix (version, "1.");
  a->md_version = a->native ? g_strdup (version) : NULL;
  /* a raid0 runs with or without vblk's superblocks; with them, its data
   * starts past them on every member */
  a->meta = !a->native && (a->copies > 1 || member_offset (a, sysdir) > 0);
  if (!attach_members (a, sysdir))
    {
      md_array_unref (a);
      return NULL;
    }
  return a;
}
