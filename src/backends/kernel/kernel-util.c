/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Backend "kernel": what its md part and its device-mapper part share:
 * the block nodes under a device (a loop device over each regular-file
 * component, tagged "vblk:INSTANCE:UUID:dm" so that a vblkd killed at any
 * point finds it again), sysfs reads and writes, and the format. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "kernel-util.h"
#include "engine-runtime.h"
#include "loop-util.h"
#include "vb-error.h"
#include "vb-report.h"

#include <blockdev/blockdev.h>
#include <blockdev/loop.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define SECTOR 512

char *
vb_kernel_loop_tag (const char *instance, const char *uuid)
{
  return g_strdup_printf (VB_LOOP_TAG_PREFIX "%s:%s" VB_LOOP_TAG_KERNEL_SUFFIX, instance, uuid);
}

gboolean
vb_kernel_component_nodes (const VbBackendRequest *request, const char *tag, gboolean read_only,
                           GPtrArray *nodes, GPtrArray *attached, GError **error)
{
  for (guint i = 0; i < request->n_components; i++)
    {
      const char *path = request->paths[i];
      struct loop_config config = { 0 };
      char *loop;
      int fd;

      if (request->components[i].missing)
        {
          g_ptr_array_add (nodes, NULL);
          continue;
        }
      if (request->components[i].kind != VB_COMPONENT_KIND_FILE)
        {
          g_ptr_array_add (nodes, g_strdup (path));
          continue;
        }
      fd = open (path, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
      if (fd < 0)
        {
          int e = errno;
          g_set_error (error, VB_ERROR, e == ENOENT ? VB_ERROR_NOT_FOUND : VB_ERROR_FAILED,
                       _ ("component '%s': %s"), path, g_strerror (e));
          return FALSE;
        }
      /* buffered, as losetup makes them: direct I/O is refused at I/O time
       * (EIO), not at setup, by files that cannot do it (tmpfs, overlays) */
      config.info.lo_flags = read_only ? LO_FLAGS_READ_ONLY : 0;
      loop = vb_loop_attach (fd, &config, tag, path, error);
      close (fd);
      if (loop == NULL)
        return FALSE;
      g_ptr_array_add (nodes, loop);
      g_ptr_array_add (attached, g_strdup (loop));
    }
  return TRUE;
}

void
vb_kernel_detach_all (GPtrArray *loops)
{
  for (guint i = 0; loops && i < loops->len; i++)
    {
      g_autoptr (GError) local = NULL;
      if (!bd_loop_teardown (loops->pdata[i], &local))
        vb_report ("kernel", VB_REPORT_WARNING, "detaching %s: %s", (const char *) loops->pdata[i],
                   local->message);
    }
}

/* Every loop device tagged @tag (or, with @tag NULL, every one of
 * @instance's kernel components whose device is not in @live). */
static GPtrArray *
tagged_loops (const char *tag, const char *instance, GHashTable *live)
{
  GPtrArray *found = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GDir) dir = g_dir_open ("/sys/block", 0, NULL);
  g_autofree char *prefix = g_strdup_printf (VB_LOOP_TAG_PREFIX "%s:", instance);
  const char *entry;

  while (dir && (entry = g_dir_read_name (dir)))
    {
      g_autofree char *dev = NULL, *name = NULL;
      if (!g_str_has_prefix (entry, "loop"))
        continue;
      dev = g_strdup_printf ("/dev/%s", entry);
      name = vb_loop_get_name (dev);
      if (name == NULL)
        continue;
      if (tag ? strcmp (name, tag) == 0
              : g_str_has_prefix (name, prefix)
                    && g_str_has_suffix (name, VB_LOOP_TAG_KERNEL_SUFFIX))
        {
          if (tag == NULL)
            {
              g_autofree char *uuid
                  = g_strndup (name + strlen (prefix), strlen (name) - strlen (prefix)
                                                           - strlen (VB_LOOP_TAG_KERNEL_SUFFIX));
              if (live && g_hash_table_contains (live, uuid))
                continue;
            }
          g_ptr_array_add (found, g_steal_pointer (&dev));
        }
    }
  return found;
}

GPtrArray *
vb_kernel_tagged_loops (const char *tag, const char *instance)
{
  return tagged_loops (tag, instance, NULL);
}

GPtrArray *
vb_kernel_orphan_loops (const char *instance, GHashTable *live)
{
  return tagged_loops (NULL, instance, live);
}

int
vb_kernel_sys_write (const char *path, const char *value)
{
  int fd = open (path, O_WRONLY | O_CLOEXEC);
  int e = 0;

  if (fd < 0)
    return -errno;
  if (write (fd, value, strlen (value)) < 0)
    e = errno;
  close (fd);
  return -e;
}

char *
vb_kernel_sys_read (const char *path)
{
  char *text = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  return g_strstrip (text);
}

guint64
vb_kernel_node_size (const char *block_device)
{
  g_autofree char *base = g_path_get_basename (block_device);
  g_autofree char *path = g_strdup_printf ("/sys/class/block/%s/size", base);
  g_autofree char *text = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return 0;
  return g_ascii_strtoull (text, NULL, 10) * SECTOR;
}

/* Superblocks for a new device with metadata=vblk (raid0, raid1, raid10
 * on md, linear on dm): the engine's, so that the device can move between
 * backends. */
gboolean
vb_kernel_format (const VbBackendRequest *request, GError **error)
{
  if (g_strcmp0 (g_hash_table_lookup (request->attributes, "metadata"), "vblk") != 0)
    return TRUE; /* none; md1: the array's own, which md keeps */
  return vb_engine_runtime_format (request, error);
}

gboolean
vb_kernel_refuses_engine (GHashTable *attributes, char **reason)
{
  if (attributes && g_strcmp0 (g_hash_table_lookup (attributes, "engine"), "true") == 0)
    {
      *reason = g_strdup ("attribute engine=true asks for the engine (backend nbd or loop)");
      return TRUE;
    }
  return FALSE;
}
