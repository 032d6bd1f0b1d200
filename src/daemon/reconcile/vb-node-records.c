/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* See vb-node-records.h. A record is a list of udev properties
 * (KEY=VALUE lines, udev's IMPORT{file} format) named after the node's
 * device number, the way udev names its own database files. */
#include "config.h"

#include "vb-node-records.h"

#include "backend.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static char *
record_name (dev_t devnum)
{
  return g_strdup_printf ("b%u:%u", major (devnum), minor (devnum));
}

/* What this process last wrote of each record (name -> text), so that a
 * sync rewrites, and reads, only what changed: with 1,000 devices started
 * every op read back 1,000 files. A record counts as written only while
 * the directory still lists it. */
static GMutex written_lock;
static GHashTable *written;
static char *written_in; /* the directory it is of */

/* The device number of each running entry's node at the last sync
 * (VbRunning* -> dev_t, the entry referenced: an entry never changes, so
 * its node is looked at once, not 1,000 times an op). A node that went
 * keeps its record until an observe op takes its entry away. */
static GHashTable *node_of;

typedef struct {
  GHashTable *want;
  GHashTable *own;
  GHashTable *node_of; /* this sync's */
} Wanted;

static void
add_device (const VbDeviceConfig *d, const VbRunning *r, gpointer data)
{
  Wanted *w = data;
  dev_t *rdev = node_of ? g_hash_table_lookup (node_of, r) : NULL;
  struct stat st;

  if (rdev == NULL)
    {
      if (stat (r->block_device, &st) < 0 || !S_ISBLK (st.st_mode))
        return;
      rdev = g_new (dev_t, 1);
      *rdev = st.st_rdev;
    }
  else
    rdev = g_memdup2 (rdev, sizeof *rdev);
  g_hash_table_insert (w->node_of, vb_running_copy (r), rdev);
  g_hash_table_add (w->own, g_path_get_basename (r->block_device));
  g_hash_table_insert (
      w->want, record_name (*rdev),
      g_strdup_printf ("VBLK_NODE=device\nVBLK_NAME=%s\nVBLK_UUID=%s\n", d->name, d->uuid));
}

/* The started devices' nodes: record name -> text; @own gets the names of
 * their nodes ("loop5"). */
static void
add_devices (GHashTable *want, GHashTable *own, const VbState *state, GHashTable *running)
{
  Wanted w = { want, own,
               g_hash_table_new_full (g_direct_hash, g_direct_equal,
                                      (GDestroyNotify) vb_running_free, g_free) };

  vb_running_foreach_device (state, running, add_device, &w);
  g_clear_pointer (&node_of, g_hash_table_unref);
  node_of = w.node_of;
}

/* The nodes this vblkd made that are no device's own (@own: those that
 * are, passed over without a look): loops under a dm table or an md
 * array, tagged so by the backend that made them. */
static void
add_internal (GHashTable *want, GHashTable *own, const char *instance)
{
  g_autoptr (GDir) dir = g_dir_open ("/sys/class/block", 0, NULL);
  const char *entry;

  while (dir && (entry = g_dir_read_name (dir)))
    {
      if (g_hash_table_contains (own, entry))
        continue;
      g_autofree char *loop_dir = g_build_filename ("/sys/class/block", entry, "loop", NULL);
      g_autofree char *dev_file = g_build_filename ("/sys/class/block", entry, "dev", NULL);
      g_autofree char *partition = g_build_filename ("/sys/class/block", entry, "partition", NULL);
      g_autofree char *text = NULL;
      g_auto (VbNodeOwner) owner = { 0 };
      guint maj, min;
      g_autofree char *name = NULL;

      /* internal nodes are attached loop devices (the kernel backend's
       * component loops): every other node is passed over with one stat,
       * not asked of every backend (a host with 500 loop devices spent
       * 2,900 file opens of every change here) */
      if (!g_file_test (loop_dir, G_FILE_TEST_IS_DIR) || g_file_test (partition, G_FILE_TEST_EXISTS)
          || !g_file_get_contents (dev_file, &text, NULL, NULL)
          || sscanf (text, "%u:%u", &maj, &min) != 2)
        continue;
      name = record_name (makedev (maj, min));
      if (g_hash_table_contains (want, name) || !vb_backends_node_owner (makedev (maj, min), &owner)
          || !owner.internal || g_strcmp0 (owner.instance, instance) != 0)
        continue;
      g_hash_table_insert (want, g_steal_pointer (&name),
                           g_strdup_printf ("VBLK_NODE=internal\nVBLK_UUID=%s\n", owner.uuid));
    }
}

static gboolean
runs_on_kernel (GHashTable *running)
{
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, running);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      const char *backend = ((const VbRunning *) value)->backend;
      if (backend && g_str_has_prefix (backend, "kernel"))
        return TRUE;
    }
  return FALSE;
}

/* udev looks at the node again: its rule imports the record as it is now. */
static void
announce (const char *record)
{
  g_autofree char *path = g_strdup_printf ("/sys/dev/block/%s/uevent", record + 1);
  int fd = open (path, O_WRONLY | O_CLOEXEC);

  if (fd < 0)
    return; /* the node went with its device */
  if (write (fd, "change", 6) < 0)
    g_debug ("vblk: %s: %s", path, g_strerror (errno));
  close (fd);
}

/* @present: the records the directory lists now. */
static void
write_record (const char *dir, GHashTable *present, const char *name, const char *text)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autofree char *old = NULL;
  g_autoptr (GError) local = NULL;

  if (g_hash_table_contains (present, name)
      && g_strcmp0 (g_hash_table_lookup (written, name), text) == 0)
    return;
  if (g_file_get_contents (path, &old, NULL, NULL) && strcmp (old, text) == 0)
    {
      g_hash_table_replace (written, g_strdup (name), g_strdup (text));
      return;
    }
  if (!g_file_set_contents_full (path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0644, &local))
    {
      g_warning ("vblk: udev record %s: %s", path, local->message);
      g_hash_table_remove (written, name);
      return;
    }
  g_hash_table_replace (written, g_strdup (name), g_strdup (text));
  announce (name);
}

void
vb_node_records_sync (const char *run_dir, const char *instance, const VbState *state,
                      GHashTable *running)
{
  g_autofree char *dir = g_build_filename (run_dir, "udev", NULL);
  g_autoptr (GHashTable) want = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  g_autoptr (GHashTable) own = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GHashTable) present = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GDir) listing = NULL;
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&written_lock);
  GHashTableIter iter;
  gpointer name, text;
  const char *entry;

  if (g_mkdir_with_parents (dir, 0755) < 0)
    {
      g_warning ("vblk: cannot create %s: %s", dir, g_strerror (errno));
      return;
    }
  if (written == NULL || g_strcmp0 (written_in, dir) != 0)
    {
      g_clear_pointer (&written, g_hash_table_unref);
      written = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
      g_free (written_in);
      written_in = g_strdup (dir);
    }
  add_devices (want, own, state, running);
  /* internal nodes live only under devices the kernel backend runs: none
   * run, none to look for among the host's block nodes */
  if (runs_on_kernel (running))
    add_internal (want, own, instance);
  listing = g_dir_open (dir, 0, NULL);
  while (listing && (entry = g_dir_read_name (listing)))
    {
      if (entry[0] != 'b')
        continue;
      if (g_hash_table_contains (want, entry))
        {
          g_hash_table_add (present, g_strdup (entry));
          continue;
        }
      g_autofree char *path = g_build_filename (dir, entry, NULL);
      g_hash_table_remove (written, entry);
      if (g_unlink (path) == 0)
        announce (entry);
    }
  g_hash_table_iter_init (&iter, want);
  while (g_hash_table_iter_next (&iter, &name, &text))
    write_record (dir, present, name, text);
}
