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

static void
link_atomically (const char *dev_dir, const char *name, const char *target)
{
  g_autofree char *path = g_build_filename (dev_dir, name, NULL);
  g_autofree char *tmp = g_strdup_printf ("%s/.%s.tmp", dev_dir, name);
  g_autofree char *current = g_file_read_link (path, NULL);

  if (g_strcmp0 (current, target) == 0)
    return;
  unlink (tmp);
  if (symlink (target, tmp) < 0 || rename (tmp, path) < 0)
    {
      g_warning ("vblk: %s: cannot link %s -> %s: %s", name, path, target, g_strerror (errno));
      unlink (tmp);
    }
}

void
vb_devlinks_sync (const char *dev_dir, const VbState *state, GHashTable *running)
{
  /* the names that keep a link: one pass, not a search of the state for
   * each link (O(N²) with thousands started) */
  g_autoptr (GHashTable) linked = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GDir) dir = NULL;
  const char *entry;

  if (g_mkdir_with_parents (dev_dir, 0755) < 0)
    {
      g_warning ("vblk: cannot create %s: %s", dev_dir, g_strerror (errno));
      return;
    }
  /* (nothing runs: no device looked up, thousands may be configured) */
  for (guint i = 0; g_hash_table_size (running) > 0 && i < state->devices->len; i++)
    {
      const VbDeviceConfig *d = state->devices->pdata[i];
      const VbRunning *r = g_hash_table_lookup (running, d->uuid);
      if (r)
        {
          vb_test_hook ("start:before-link");
          link_atomically (dev_dir, d->name, r->block_device);
          g_hash_table_add (linked, d->name);
        }
    }
  dir = g_dir_open (dev_dir, 0, NULL);
  while (dir && (entry = g_dir_read_name (dir)))
    if (!g_hash_table_contains (linked, entry))
      {
        g_autofree char *path = g_build_filename (dev_dir, entry, NULL);
        unlink (path);
      }
}
