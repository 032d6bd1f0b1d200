/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vbmgr wipe: asks vblkd to erase vblk's superblock and bitmap from a disk
 * or image file (Manager.Wipe), as mdadm --zero-superblock does for md's;
 * vblkd refuses a component of a device it runs or knows (unless forced). */
#include "config.h"

#include "vbmgr.h"

#include <glib/gi18n.h>

int
vb_cmd_wipe (int argc, char **argv)
{
  gboolean force = FALSE, md = FALSE;
  const GOptionEntry entries[]
      = { { "force", 0, 0, G_OPTION_ARG_NONE, &force,
            N_ ("Wipe a component of a stopped device vblk knows too"), NULL },
          { "md", 0, 0, G_OPTION_ARG_NONE, &md, N_ ("Erase an mdadm 1.x superblock too"), NULL },
          G_OPTION_ENTRY_NULL };
  g_auto (GVariantBuilder) options = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (VbDBusManager) iface = NULL;
  g_autoptr (GVariant) reply = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *path = NULL;
  g_autofree const char **erased = NULL;

  if (!vb_mgr_parse_options ("wipe", "PATH [--force] [--md]",
                             _ ("Erase vblk's superblock and bitmap from a disk or image file, "
                                "so that nothing sees a member there any more. A component of a "
                                "started device is refused; one of a stopped device vblk knows "
                                "needs --force."),
                             entries, &argc, &argv))
    return VB_EXIT_USAGE;
  if (argc != 2)
    return vb_mgr_usage_error ("wipe", _ ("expected one path"));
  if (*argv[1] == '\0')
    return vb_mgr_usage_error ("wipe", _ ("the path is empty"));
  path = g_canonicalize_filename (argv[1], NULL);
  if (force)
    g_variant_builder_add (&options, "{sv}", "force", g_variant_new_boolean (TRUE));
  if (md)
    g_variant_builder_add (&options, "{sv}", "md", g_variant_new_boolean (TRUE));

  manager = vb_mgr_connect ();
  if (manager == NULL)
    return VB_EXIT_FAILED;
  iface = vb_mgr_get_manager (manager, "wipe", NULL);
  if (iface == NULL)
    return VB_EXIT_FAILED;
  reply = vb_mgr_call (iface, "Wipe",
                       g_variant_new ("(s@a{sv})", path, g_variant_builder_end (&options)), &error);
  if (reply == NULL)
    return vb_mgr_fail ("wipe", path, error);
  g_variant_get (reply, "(^a&s)", &erased);
  for (guint i = 0; erased[i]; i++)
    g_print (_ ("%s: erased the %s\n"), path, erased[i]);
  return VB_EXIT_OK;
}
