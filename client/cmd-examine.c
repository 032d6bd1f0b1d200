/* vbmgr examine: prints the vblk superblock of a component (image file or
 * block device) read straight from it, without vblkd — for looking at
 * components of a stopped device or of another host. */
#include "config.h"

#include "vbmgr.h"
#include "metadata.h"
#include "superblock.h"
#include "vb-error.h"

#include <glib/gi18n.h>

int
vb_cmd_examine (int argc, char **argv)
{
  gboolean json = FALSE;
  const GOptionEntry entries[]
      = { { "json", 0, 0, G_OPTION_ARG_NONE, &json, N_ ("Print JSON"), NULL },
          G_OPTION_ENTRY_NULL };
  g_autoptr (GError) error = NULL;
  VbSuperblock sb;

  if (!vb_mgr_parse_options (
          "examine", "PATH [--json]",
          _ ("Print the superblock of a component (vblk's, or mdadm's 1.x), read "
             "from it directly (no daemon)."),
          entries, &argc, &argv))
    return VB_EXIT_USAGE;
  if (argc != 2)
    return vb_mgr_usage_error ("examine", _ ("expected one path"));
  if (*argv[1] == '\0')
    return vb_mgr_usage_error ("examine", _ ("the path is empty"));

  /* Read-only (O_DIRECT where the file system allows): a block device
   * opened for writing would send a change uevent on close. */
  if (!vb_superblock_read (-1, argv[1], &sb, &error))
    {
      /* not vblk's: another format a handler reads (mdadm's 1.x) */
      gboolean read = FALSE;
      if (g_error_matches (error, VB_ERROR, VB_ERROR_NOT_FOUND))
        for (const VbMetadataHandler *const *h = vb_metadata_handlers (); *h && !read; h++)
          if (*h != &vb_metadata_vblk && (*h)->probe (-1, argv[1]))
            {
              g_clear_error (&error);
              read = (*h)->read (-1, argv[1], &sb, &error);
            }
      if (!read)
        return vb_mgr_fail ("examine", NULL, error);
    }

  if (json)
    {
      g_autoptr (JsonNode) root = vb_superblock_to_json (&sb);

      vb_mgr_print_json (root);
    }
  else
    {
      g_autofree char *text = vb_superblock_to_text (&sb);

      g_print ("%s:\n%s", argv[1], text);
    }
  return VB_EXIT_OK;
}
