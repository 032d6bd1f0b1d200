/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The state directory of a vblkd (vb-state-dir.h). */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-state-dir.h"
#include "backend.h"
#include "driver.h"
#include "vb-error.h"
#include "vb-graph.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* Drivers and attributes of a loaded state are checked as CreateDevice
 * would; a state.json naming what this vblkd cannot run is refused. An
 * attribute the file does not name takes the value the device had before
 * the attribute existed (a raid0 or linear saved without superblocks
 * stays metadata=none: its data starts at byte 0). */
gboolean
vb_state_dir_check (VbState *state, GError **error)
{
  g_autoptr (VbGraph) graph = vb_graph_new (state);

  for (guint i = 0; i < state->devices->len; i++)
    {
      const VbDeviceConfig *d = state->devices->pdata[i];
      const VbDriver *driver = vb_driver_lookup (d->driver);
      GHashTable *resolved;
      if (driver == NULL)
        {
          g_autofree char *known = vb_drivers_known_names ();
          g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                       _ ("devices[%u] (%s): driver '%s': unknown (known: %s)"), i, d->name,
                       d->driver, known);
          return FALSE;
        }
      resolved = vb_driver_resolve_saved_attributes (driver, d->attributes, error);
      if (resolved == NULL)
        {
          g_prefix_error (error, _ ("devices[%u] (%s): "), i, d->name);
          return FALSE;
        }
      /* only a config that changes is copied (it is shared with what the
       * store keeps as durable: pointers equal, nothing to compare) */
      if (vb_attributes_equal (resolved, d->attributes))
        g_hash_table_unref (resolved);
      else
        {
          VbDeviceConfig *w = vb_state_device_mut (state, i);
          g_hash_table_unref (w->attributes);
          w->attributes = resolved;
        }
    }
  return vb_graph_check (graph, error);
}

#define LOCK_WAIT_MS 15000

/* The file a vblkd locks its state dir by; -1 and errno. */
int
vb_state_dir_open_lock (const char *dir)
{
  g_autofree char *path = g_build_filename (dir, ".lock", NULL);
  int fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

  /* a read-only state dir (the root file system before it is remounted
   * read-write, early in a boot from a vblk root): the directory itself
   * is locked; a change to the desired state fails until then */
  if (fd < 0 && errno == EROFS)
    fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return fd;
}

/* Only one vblkd per state dir: flock of @fd (vb_state_dir_open_lock's, taken
 * over, closed on failure); @wait lets a --replace'd or taken over one
 * finish. */
int
vb_state_dir_lock (const char *dir, int fd, gboolean wait, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + LOCK_WAIT_MS * 1000;
  int e;

  if (fd < 0)
    goto fail;
  while (flock (fd, LOCK_EX | LOCK_NB) < 0)
    {
      if (errno != EWOULDBLOCK || !wait || g_get_monotonic_time () > deadline)
        goto fail;
      g_usleep (100 * 1000);
    }
  return fd;
fail:
  e = errno;
  g_set_error (error, G_IO_ERROR, g_io_error_from_errno (e), _ ("%s/.lock: %s%s"), dir,
               g_strerror (e),
               e == EWOULDBLOCK ? " (another vblkd uses this state; --replace takes over)" : "");
  if (fd >= 0)
    close (fd);
  return -1;
}

/* A random id for this state dir, kept beside state.json: the backends tag
 * block nodes with it, so vblkds of other state dirs leave them alone. */
char *
vb_state_dir_instance_id (const char *dir, GError **error)
{
  g_autofree char *path = g_build_filename (dir, "instance-id", NULL);
  g_autofree char *text = NULL;
  char *id;

  if (g_file_get_contents (path, &text, NULL, NULL))
    {
      g_strstrip (text);
      if (strlen (text) == VB_INSTANCE_ID_LEN
          && strspn (text, "0123456789abcdef") == VB_INSTANCE_ID_LEN)
        return g_steal_pointer (&text);
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("%s: '%s' is not %d lower-case hex digits"), path, text, VB_INSTANCE_ID_LEN);
      return NULL;
    }
  id = g_strdup_printf ("%08x", g_random_int ());
  if (!g_file_set_contents_full (
          path, id, -1, G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE, 0600, error))
    {
      g_free (id);
      return NULL;
    }
  return id;
}
