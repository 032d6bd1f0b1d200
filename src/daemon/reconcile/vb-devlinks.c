/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The stable links DEV_DIR/NAME -> block node, one per started device.
 * DEV_DIR belongs to vblkd: links of devices not running are removed. */
#include "config.h"

#include "vb-devlinks.h"
#include "vb-testhook.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* What this process last linked (name -> target), so that a sync reads
 * no link it made itself while DEV_DIR still lists it (with 1,000 devices
 * started every op read 1,000 links). */
static GMutex linked_lock;
static GHashTable *linked_to;
static char *linked_in; /* the DEV_DIR it is of */

/* @present: the names DEV_DIR lists now. */
static void
link_atomically (const char *dev_dir, GHashTable *present, const char *name, const char *target)
{
  g_autofree char *path = g_build_filename (dev_dir, name, NULL);
  g_autofree char *tmp = g_strdup_printf ("%s/.%s.tmp", dev_dir, name);
  g_autofree char *current = NULL;

  if (g_hash_table_contains (present, name)
      && g_strcmp0 (g_hash_table_lookup (linked_to, name), target) == 0)
    return;
  current = g_file_read_link (path, NULL);
  if (g_strcmp0 (current, target) == 0)
    {
      g_hash_table_replace (linked_to, g_strdup (name), g_strdup (target));
      return;
    }
  unlink (tmp);
  if (symlink (target, tmp) < 0 || rename (tmp, path) < 0)
    {
      g_warning ("vblk: %s: cannot link %s -> %s: %s", name, path, target, g_strerror (errno));
      unlink (tmp);
      g_hash_table_remove (linked_to, name);
      return;
    }
  g_hash_table_replace (linked_to, g_strdup (name), g_strdup (target));
}

static void
add_link (const VbDeviceConfig *d, const VbRunning *r, gpointer linked)
{
  g_hash_table_insert (linked, d->name, r->block_device);
}

void
vb_devlinks_sync (const char *dev_dir, const VbState *state, GHashTable *running)
{
  /* the names that keep a link: one pass, not a search of the state for
   * each link (O(N²) with thousands started) */
  g_autoptr (GHashTable) linked = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GHashTable) present = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GMutexLocker) locker = g_mutex_locker_new (&linked_lock);
  g_autoptr (GDir) dir = NULL;
  GHashTableIter iter;
  gpointer name, target;
  const char *entry;

  if (g_mkdir_with_parents (dev_dir, 0755) < 0)
    {
      g_warning ("vblk: cannot create %s: %s", dev_dir, g_strerror (errno));
      return;
    }
  if (linked_to == NULL || g_strcmp0 (linked_in, dev_dir) != 0)
    {
      g_clear_pointer (&linked_to, g_hash_table_unref);
      linked_to = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
      g_free (linked_in);
      linked_in = g_strdup (dev_dir);
    }
  vb_running_foreach_device (state, running, add_link, linked);
  /* what is there that should not be goes first */
  dir = g_dir_open (dev_dir, 0, NULL);
  while (dir && (entry = g_dir_read_name (dir)))
    {
      if (g_hash_table_contains (linked, entry))
        {
          g_hash_table_add (present, g_strdup (entry));
          continue;
        }
      g_autofree char *path = g_build_filename (dev_dir, entry, NULL);
      g_hash_table_remove (linked_to, entry);
      unlink (path);
    }
  g_hash_table_iter_init (&iter, linked);
  while (g_hash_table_iter_next (&iter, &name, &target))
    {
      vb_test_hook ("start:before-link");
      link_atomically (dev_dir, present, name, target);
    }
}
