/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vbmgr examine: prints the vblk superblock of a component (image file or
 * block device) read straight from it, without vblkd — for looking at
 * components of a stopped device or of another host; with --udev, the
 * properties udev's rule imports for a member (data/udev/). */
#include "config.h"

#include "vbmgr.h"
#include "metadata.h"
#include "superblock.h"
#include "vb-error.h"

#include <glib/gi18n.h>
#include <string.h>

/* udev's encoding of a property value for its *_ENC keys (blkid's): bytes
 * other than letters, digits and "#+-.:=@_" as \xNN. */
static char *
udev_encode (const char *s)
{
  GString *out = g_string_new (NULL);

  for (const guchar *p = (const guchar *) s; *p; p++)
    if (g_ascii_isalnum (*p) || strchr ("#+-.:=@_", *p))
      g_string_append_c (out, (char) *p);
    else
      g_string_append_printf (out, "\\x%02x", *p);
  return g_string_free (out, FALSE);
}

/* For udev's IMPORT{program}: the member's identity the way blkid gives
 * md's (linux_raid_member): the device's UUID, the component's as the
 * sub-UUID, the device's name as the label. */
static void
print_udev (const VbSuperblock *sb)
{
  g_autofree char *label = udev_encode (sb->device_name);

  g_print ("ID_FS_TYPE=vblk_member\nID_FS_USAGE=raid\nID_FS_VERSION=%u\n", sb->version);
  g_print ("ID_FS_UUID=%s\nID_FS_UUID_ENC=%s\n", sb->device_uuid, sb->device_uuid);
  g_print ("ID_FS_UUID_SUB=%s\nID_FS_UUID_SUB_ENC=%s\n", sb->component_uuid, sb->component_uuid);
  g_print ("ID_FS_LABEL=%s\nID_FS_LABEL_ENC=%s\n", label, label);
  g_print ("VBLK_MEMBER_DEVICE=%s\nVBLK_MEMBER_DRIVER=%s\n", label, sb->driver);
  if (sb->role == VB_SB_ROLE_SPARE)
    g_print ("VBLK_MEMBER_ROLE=spare\n");
  else
    g_print ("VBLK_MEMBER_ROLE=%d\n", sb->role);
}

int
vb_cmd_examine (int argc, char **argv)
{
  gboolean json = FALSE, udev = FALSE;
  const GOptionEntry entries[]
      = { { "json", 0, 0, G_OPTION_ARG_NONE, &json, N_ ("Print JSON"), NULL },
          { "udev", 0, 0, G_OPTION_ARG_NONE, &udev,
            N_ ("Print udev properties of a vblk member (nothing when it is none)"), NULL },
          G_OPTION_ENTRY_NULL };
  g_autoptr (GError) error = NULL;
  VbSuperblock sb;
  guint64 dirty = 0;

  if (!vb_mgr_parse_options (
          "examine", "PATH [--json|--udev]",
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
  if (udev)
    {
      /* vblk's own superblock only (an md 1.x one is blkid's to name);
       * none is no error for a rule run on every disk */
      if (vb_superblock_read (-1, argv[1], &sb, &error))
        print_udev (&sb);
      else if (!g_error_matches (error, VB_ERROR, VB_ERROR_NOT_FOUND))
        return vb_mgr_fail ("examine", NULL, error);
      return VB_EXIT_OK;
    }
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

  /* the bitmap's dirty chunks (mdadm -X's "dirty"): what a start would
   * resync */
  if ((sb.features & VB_SB_FEATURE_BITMAP)
      && !vb_superblock_count_dirty (-1, argv[1], &sb, &dirty, &error))
    return vb_mgr_fail ("examine", NULL, error);
  if (json)
    {
      g_autoptr (JsonNode) root = vb_superblock_to_json (&sb);

      if (sb.features & VB_SB_FEATURE_BITMAP)
        json_object_set_int_member (json_node_get_object (root), "bitmap_dirty", (gint64) dirty);
      vb_mgr_print_json (root);
    }
  else
    {
      g_autofree char *text = vb_superblock_to_text (&sb);

      g_print ("%s:\n%s", argv[1], text);
      if (sb.features & VB_SB_FEATURE_BITMAP)
        g_print ("%16s : %" G_GUINT64_FORMAT " chunk(s)\n", "Bitmap Dirty", dirty);
    }
  return VB_EXIT_OK;
}
