/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vbmgr cancel: asks a job (vbmgr jobs) to stop through Job.Cancel. */
#include "config.h"

#include "vbmgr.h"

#include <glib/gi18n.h>
#include <inttypes.h>
#include <string.h>

#define JOBS_PATH VB_OBJECT_ROOT "/jobs/"

int
vb_cmd_cancel (int argc, char **argv)
{
  const GOptionEntry entries[] = { G_OPTION_ENTRY_NULL };
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (GDBusObject) object = NULL;
  g_autoptr (VbDBusJob) job = NULL;
  g_autoptr (GVariant) reply = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *path = NULL;
  guint64 number;

  if (!vb_mgr_parse_options ("cancel", "JOB",
                             _ ("Ask a job to stop (vbmgr jobs lists them): a resync, rebuild, "
                                "check or repair stops where it is; an apply stops after its "
                                "running step and undoes the steps before; a replace takes the "
                                "new component out again. Its starter may; anyone else needs "
                                "org.vblk.manage."),
                             entries, &argc, &argv))
    return VB_EXIT_USAGE;
  if (argc != 2)
    return vb_mgr_usage_error ("cancel", _ ("expected one job (a number or an object path)"));
  if (g_str_has_prefix (argv[1], JOBS_PATH)
      && g_ascii_string_to_unsigned (argv[1] + strlen (JOBS_PATH), 10, 1, G_MAXUINT, &number, NULL))
    path = g_strdup (argv[1]);
  else if (g_ascii_string_to_unsigned (argv[1], 10, 1, G_MAXUINT, &number, NULL))
    path = g_strdup_printf (JOBS_PATH "%" G_GUINT64_FORMAT, number);
  else
    return vb_mgr_usage_error ("cancel", _ ("'%s' is not a job number or path (%sN)"), argv[1],
                               JOBS_PATH);
  manager = vb_mgr_connect ();
  if (manager == NULL)
    return VB_EXIT_FAILED;
  object = g_dbus_object_manager_get_object (manager, path);
  job = object ? vb_dbus_object_get_job (VB_DBUS_OBJECT (object)) : NULL;
  if (job == NULL)
    {
      g_autofree char *text = g_strdup_printf (_ ("no job %s"), argv[1]);

      g_printerr ("vbmgr: cancel %s: NotFound: %s\n", argv[1], text);
      return VB_EXIT_FAILED;
    }
  reply = vb_mgr_call (job, "Cancel", g_variant_new ("(@a{sv})", g_variant_new ("a{sv}", NULL)),
                       &error);
  if (reply == NULL)
    return vb_mgr_fail ("cancel", argv[1], error);
  g_print (_ ("job %" PRIu64 " (%s): asked to stop\n"), number, vb_dbus_job_get_operation (job));
  return VB_EXIT_OK;
}
