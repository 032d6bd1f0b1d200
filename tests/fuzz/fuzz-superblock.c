/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzz target for the vblk superblock decoder, the parser of what a
 * component (possibly hostile or corrupt) holds. Every input is decoded as
 * given and, when it is block-sized, again with its CRC recomputed so that
 * field validation is reached too. An accepted block must re-encode to the
 * same bytes and decode to the same superblock; the text and JSON views
 * must survive it. Built for libFuzzer (clang) and for the standalone
 * driver of fuzz-main.c. */
#include "config.h"

#include "fuzz.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "superblock.h"
#include "vb-error.h"


static void
check_one (const uint8_t *data, size_t size)
{
  VbSuperblock sb, again;
  guint8 out[VB_SB_SIZE];
  GError *error = NULL;

  if (!vb_superblock_decode (data, size, &sb, &error))
    {
      FUZZ_CHECK (error != NULL && error->domain == VB_ERROR);
      FUZZ_CHECK (error->code == VB_ERROR_NOT_FOUND || error->code == VB_ERROR_INVALID_ARGUMENT);
      FUZZ_CHECK (error->message != NULL && *error->message != '\0');
      /* Messages reach D-Bus callers, which take UTF-8 only. */
      FUZZ_CHECK (g_utf8_validate (error->message, -1, NULL));
      g_error_free (error);
      return;
    }
  FUZZ_CHECK (error == NULL);
  FUZZ_CHECK (size >= VB_SB_SIZE);

  vb_superblock_encode (&sb, out);
  FUZZ_CHECK (memcmp (out, data, VB_SB_SIZE) == 0);
  FUZZ_CHECK (vb_superblock_decode (out, sizeof out, &again, &error));
  FUZZ_CHECK (memcmp (&sb, &again, sizeof sb) == 0);

  {
    char *text = vb_superblock_to_text (&sb);
    JsonNode *json = vb_superblock_to_json (&sb);

    FUZZ_CHECK (text != NULL && strstr (text, sb.device_uuid) != NULL);
    FUZZ_CHECK (json != NULL);
    g_free (text);
    json_node_unref (json);
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  check_one (data, size);
  if (size >= VB_SB_SIZE)
    {
      guint8 block[VB_SB_SIZE];
      guint32 crc;

      memcpy (block, data, sizeof block);
      memset (block + VB_SB_OFF_CRC, 0, 4);
      crc = vb_crc32c (0, block, sizeof block);
      for (int i = 0; i < 4; i++)
        block[VB_SB_OFF_CRC + i] = (guint8) (crc >> (8 * i));
      check_one (block, sizeof block);
    }
  return 0;
}

/* Seeds: a few valid superblocks of different shapes. */

static void
seed_base (VbSuperblock *sb, guint n_roles)
{
  memset (sb, 0, sizeof *sb);
  sb->version = 1;
  g_strlcpy (sb->device_uuid, "5d0f7a52-2c4e-4b8e-9a51-0f6b3c2d1e00", sizeof sb->device_uuid);
  g_strlcpy (sb->device_name, "data", sizeof sb->device_name);
  g_strlcpy (sb->driver, "raid1", sizeof sb->driver);
  sb->events = 7;
  sb->clean = TRUE;
  sb->ctime = G_GUINT64_CONSTANT (1700000000000000);
  sb->utime = G_GUINT64_CONSTANT (1700000100000000);
  sb->data_offset = VB_DATA_OFFSET_DEFAULT;
  sb->data_size = G_GUINT64_CONSTANT (1) << 30;
  sb->n_roles = n_roles;
  for (guint i = 0; i < n_roles; i++)
    {
      g_snprintf (sb->roles[i].uuid, sizeof sb->roles[i].uuid, "%08x-0000-4000-8000-%012x",
                  0x5eed0000 + i, i + 1);
      sb->roles[i].state = VB_ROLE_IN_SYNC;
    }
  sb->role = 0;
  g_strlcpy (sb->component_uuid, sb->roles[0].uuid, sizeof sb->component_uuid);
}

static gboolean
write_seed (const char *dir, const char *name, const VbSuperblock *sb)
{
  guint8 block[VB_SB_SIZE];
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autoptr (GError) error = NULL;
  VbSuperblock check;

  vb_superblock_encode (sb, block);
  if (!vb_superblock_decode (block, sizeof block, &check, &error))
    {
      fprintf (stderr, "seed %s is not valid: %s\n", name, error->message);
      return FALSE;
    }
  if (!g_file_set_contents (path, (const char *) block, sizeof block, &error))
    {
      fprintf (stderr, "%s\n", error->message);
      return FALSE;
    }
  return TRUE;
}

int
vb_fuzz_write_seeds (const char *dir)
{
  VbSuperblock sb;
  gboolean ok = TRUE;

  /* A plain file component: one slot, no bitmap, no attributes. */
  seed_base (&sb, 1);
  g_strlcpy (sb.driver, "file", sizeof sb.driver);
  sb.data_offset = VB_BITMAP_OFFSET;
  ok &= write_seed (dir, "file-one-slot", &sb);

  /* A degraded mirror with a bitmap, seen from slot 1; slot 2 missing. */
  seed_base (&sb, 3);
  sb.features = VB_SB_FEATURE_BITMAP;
  sb.bitmap_chunk = 64 << 20;
  sb.bitmap_bytes = 4096;
  sb.clean = FALSE;
  sb.role = 1;
  g_strlcpy (sb.component_uuid, sb.roles[1].uuid, sizeof sb.component_uuid);
  sb.roles[0].state = VB_ROLE_FAULTY;
  sb.roles[2].state = VB_ROLE_MISSING;
  sb.roles[2].uuid[0] = '\0';
  g_strlcpy (sb.attributes, "bitmap_chunk=67108864\nsync_speed=1000\n", sizeof sb.attributes);
  ok &= write_seed (dir, "raid1-degraded-bitmap", &sb);
  /* The same with events_cleared recorded (bits last cleared at 5). */
  sb.features |= VB_SB_FEATURE_EVENTS_CLEARED;
  sb.events_cleared = 5;
  ok &= write_seed (dir, "raid1-events-cleared", &sb);

  /* A spare of a raid10, and a component halfway through a rebuild. */
  seed_base (&sb, 4);
  g_strlcpy (sb.driver, "raid10", sizeof sb.driver);
  g_strlcpy (sb.attributes, "chunk_size=65536\ncopies=2\nlayout=near\n", sizeof sb.attributes);
  sb.role = VB_SB_ROLE_SPARE;
  g_strlcpy (sb.component_uuid, "5eedffff-0000-4000-8000-0000000000ff", sizeof sb.component_uuid);
  ok &= write_seed (dir, "raid10-spare", &sb);
  sb.role = 3;
  g_strlcpy (sb.component_uuid, sb.roles[3].uuid, sizeof sb.component_uuid);
  sb.roles[3].state = VB_ROLE_REBUILDING;
  sb.rebuild_offset = 123 << 20;
  ok &= write_seed (dir, "raid10-rebuilding", &sb);

  /* Every slot used, every state, a long name. */
  seed_base (&sb, VB_SB_MAX_ROLES);
  g_strlcpy (sb.driver, "linear", sizeof sb.driver);
  memset (sb.device_name, 'x', 64);
  for (guint i = 1; i < VB_SB_MAX_ROLES; i++)
    {
      sb.roles[i].state = i % 5;
      if (sb.roles[i].state == VB_ROLE_EMPTY)
        sb.roles[i].uuid[0] = '\0';
    }
  ok &= write_seed (dir, "linear-64-slots", &sb);
  return ok ? 0 : 1;
}
