/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What vblkd does around boot (vb-boot.h). */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-boot.h"
#include "vb-error.h"
#include "vb-graph.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#define PID_FILE "vblkd.pid"

static char *
pid_path (const char *run_dir)
{
  return g_build_filename (run_dir, PID_FILE, NULL);
}

gboolean
vb_boot_write_pid (const char *run_dir, GError **error)
{
  g_autofree char *path = pid_path (run_dir);
  g_autofree char *text = g_strdup_printf ("%d\n", (int) getpid ());

  return g_file_set_contents (path, text, -1, error);
}

/* The pid a pid file names, 0: none. */
static pid_t
read_pid (const char *path)
{
  g_autofree char *text = NULL;
  guint64 pid;

  if (!g_file_get_contents (path, &text, NULL, NULL)
      || !g_ascii_string_to_unsigned (g_strstrip (text), 10, 2, G_MAXINT32, &pid, NULL))
    return 0;
  return (pid_t) pid;
}

void
vb_boot_remove_pid (const char *run_dir)
{
  g_autofree char *path = pid_path (run_dir);

  if (read_pid (path) == getpid ())
    unlink (path);
}

/* A vblkd: a pid file left by a vblkd that died names whatever process
 * has its number now. Its comm (the name it was executed by), as argv[0]
 * may start with '@' and its file may be gone (the initramfs's, freed). */
static gboolean
is_vblkd (pid_t pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/comm", (int) pid);
  g_autofree char *comm = NULL;

  return g_file_get_contents (path, &comm, NULL, NULL) && strcmp (g_strstrip (comm), "vblkd") == 0;
}

/* Exited, and not reaped yet (a zombie: its parent is an init that does
 * not reap, or has not yet). */
static gboolean
exited (pid_t pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", (int) pid);
  g_autofree char *stat = NULL;
  const char *end;

  if (kill (pid, 0) < 0)
    return TRUE;
  /* "PID (COMM) STATE ...": COMM may hold spaces and parentheses */
  if (!g_file_get_contents (path, &stat, NULL, NULL) || (end = strrchr (stat, ')')) == NULL)
    return TRUE;
  return end[1] == ' ' && (end[2] == 'Z' || end[2] == 'X');
}

gboolean
vb_boot_takeover (const char *run_dir, guint timeout_ms, GError **error)
{
  g_autofree char *path = pid_path (run_dir);
  pid_t pid = read_pid (path);
  gint64 deadline;

  if (pid == 0 || pid == getpid () || !is_vblkd (pid) || exited (pid))
    return TRUE;
  g_message ("vblk: taking over from vblkd %d (%s)", (int) pid, path);
  /* SIGUSR1: leave now (SIGTERM would let it stay for a device in use) */
  if (kill (pid, SIGUSR1) < 0 && errno != ESRCH)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("cannot ask vblkd %d to leave: %s"),
                   (int) pid, g_strerror (errno));
      return FALSE;
    }
  deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  while (g_get_monotonic_time () < deadline)
    {
      if (exited (pid) || !is_vblkd (pid))
        return TRUE;
      g_usleep (50 * 1000);
    }
  g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
               _ ("vblkd %d (%s) did not leave within %u ms; not taking over"), (int) pid, path,
               timeout_ms);
  return FALSE;
}

gboolean
vb_boot_keep_only (VbState *state, const char *names, GError **error)
{
  g_autoptr (VbGraph) graph = vb_graph_new (state);
  g_auto (GStrv) wanted = g_strsplit (names, ",", -1);
  g_autoptr (GHashTable) keep = g_hash_table_new (g_str_hash, g_str_equal);

  for (guint i = 0; wanted[i]; i++)
    {
      const char *name = g_strstrip (wanted[i]);
      g_auto (GStrv) order = NULL;

      if (*name == '\0')
        continue;
      if (vb_state_lookup (state, name) == NULL)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND,
                       _ ("device '%s' (for the root file system) is not in the desired state"),
                       name);
          return FALSE;
        }
      order = vb_graph_start_order (graph, name);
      for (guint j = 0; order[j]; j++)
        {
          const VbDeviceConfig *d = vb_state_lookup (state, order[j]);
          if (d)
            g_hash_table_add (keep, d->name);
        }
    }
  for (guint i = 0; i < state->devices->len; i++)
    {
      gboolean wanted_now
          = g_hash_table_contains (keep, ((const VbDeviceConfig *) state->devices->pdata[i])->name);
      VbDeviceConfig *d = vb_state_device_mut (state, i);
      d->autostart = wanted_now;
      d->started = wanted_now;
    }
  return TRUE;
}

void
vb_boot_mark_root_storage (char **argv)
{
  if (argv[0] && argv[0][0] != '\0')
    argv[0][0] = '@';
}
