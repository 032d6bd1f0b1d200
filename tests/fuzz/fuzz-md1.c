/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzz target for the md 1.x superblock decoder (handler md1), the reader
 * of what mdadm, or a hostile disk, left on a member. Every input is
 * decoded as given and, when it is block-sized, again with md's checksum
 * recomputed so that the fields are reached too. A refusal must be
 * VB_ERROR_NOT_FOUND without md's magic, else VB_ERROR_INVALID_ARGUMENT,
 * in UTF-8; an accepted block must give a superblock whose slots, role and
 * UUIDs are in range, whose strings are UTF-8 (they reach D-Bus and JSON),
 * and whose text and JSON views survive it. Built for libFuzzer (clang)
 * and for the standalone driver of fuzz-main.c. */
#include "config.h"

#include "fuzz.h"

#include <linux/raid/md_p.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metadata.h"
#include "vb-error.h"


#define MD1_BLOCK 4096
#define OFF(field) offsetof (struct mdp_superblock_1, field)

static guint32
get32 (const guint8 *p)
{
  return (guint32) p[0] | (guint32) p[1] << 8 | (guint32) p[2] << 16 | (guint32) p[3] << 24;
}

static void
put32 (guint8 *p, guint32 v)
{
  for (int i = 0; i < 4; i++)
    p[i] = (guint8) (v >> (8 * i));
}

static void
put64 (guint8 *p, guint64 v)
{
  put32 (p, (guint32) v);
  put32 (p + 4, (guint32) (v >> 32));
}

/* md's calc_sb_1_csum (drivers/md/md.c), over a block whose max_dev fits:
 * the little-endian words of 256 + 2 * max_dev bytes, sb_csum as 0, a
 * trailing half word, folded to 32 bits. */
static void
seal (guint8 *b)
{
  guint32 size = 256 + 2 * get32 (b + OFF (max_dev));
  guint64 sum = 0;
  guint32 i;

  put32 (b + OFF (sb_csum), 0);
  for (i = 0; size - i >= 4; i += 4)
    sum += get32 (b + i);
  if (size - i == 2)
    sum += (guint32) b[i] | (guint32) b[i + 1] << 8;
  put32 (b + OFF (sb_csum), (guint32) ((sum & 0xffffffff) + (sum >> 32)));
}

static void
check_utf8_field (const char *s, gsize field)
{
  FUZZ_CHECK (memchr (s, '\0', field) != NULL);
  FUZZ_CHECK (g_utf8_validate (s, -1, NULL));
}

/* "key=value\n" lines, each key once. */
static void
check_attributes (const char *attributes)
{
  g_auto (GStrv) lines = g_strsplit (attributes, "\n", -1);
  g_autoptr (GHashTable) keys = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  guint n = g_strv_length (lines);

  FUZZ_CHECK (n >= 1 && *lines[n - 1] == '\0');
  for (guint i = 0; i + 1 < n; i++)
    {
      const char *eq = strchr (lines[i], '=');

      FUZZ_CHECK (eq != NULL && eq > lines[i]);
      FUZZ_CHECK (g_hash_table_add (keys, g_strndup (lines[i], eq - lines[i])));
    }
  FUZZ_CHECK (g_hash_table_contains (keys, "metadata"));
}

static void
check_views (const VbSuperblock *sb)
{
  g_autofree char *text = vb_superblock_to_text (sb);
  g_autoptr (JsonNode) json = vb_superblock_to_json (sb);
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autofree char *printed = NULL;
  JsonObject *back;

  FUZZ_CHECK (text != NULL && strstr (text, sb->device_uuid) != NULL);
  FUZZ_CHECK (g_utf8_validate (text, -1, NULL));
  /* what vbmgr examine --json prints must read back as JSON */
  FUZZ_CHECK (json != NULL);
  json_generator_set_root (gen, json);
  printed = json_generator_to_data (gen, NULL);
  FUZZ_CHECK (json_parser_load_from_data (parser, printed, -1, NULL));
  back = json_node_get_object (json_parser_get_root (parser));
  FUZZ_CHECK (strcmp (json_object_get_string_member (back, "device_name"), sb->device_name) == 0);
  FUZZ_CHECK (json_array_get_length (json_object_get_array_member (back, "roles")) == sb->n_roles);
}

static void
check_one (const uint8_t *data, size_t size)
{
  VbSuperblock sb;
  GError *error = NULL;

  if (!vb_metadata_md1.decode (data, size, &sb, &error))
    {
      gboolean magic = size >= MD1_BLOCK && get32 (data + OFF (magic)) == MD_SB_MAGIC;

      FUZZ_CHECK (error != NULL && error->domain == VB_ERROR);
      FUZZ_CHECK (error->code == (magic ? VB_ERROR_INVALID_ARGUMENT : VB_ERROR_NOT_FOUND));
      FUZZ_CHECK (error->message != NULL && *error->message != '\0');
      /* Messages reach D-Bus callers, which take UTF-8 only. */
      FUZZ_CHECK (g_utf8_validate (error->message, -1, NULL));
      g_error_free (error);
      return;
    }
  FUZZ_CHECK (error == NULL);
  FUZZ_CHECK (size >= MD1_BLOCK && get32 (data + OFF (magic)) == MD_SB_MAGIC);
  FUZZ_CHECK (get32 (data + OFF (major_version)) == 1);

  FUZZ_CHECK (strcmp (sb.format, "md1") == 0 && sb.version == 1);
  FUZZ_CHECK (g_uuid_string_is_valid (sb.device_uuid));
  FUZZ_CHECK (g_uuid_string_is_valid (sb.component_uuid));
  FUZZ_CHECK (sb.n_roles >= 1 && sb.n_roles <= VB_SB_MAX_ROLES);
  FUZZ_CHECK (sb.role == VB_SB_ROLE_SPARE || (sb.role >= 0 && (guint32) sb.role < sb.n_roles));
  for (guint i = 0; i < sb.n_roles; i++)
    {
      FUZZ_CHECK (sb.roles[i].state == VB_ROLE_IN_SYNC || sb.roles[i].state == VB_ROLE_MISSING
                  || sb.roles[i].state == VB_ROLE_REBUILDING);
      /* only this member's slot names a component */
      if ((gint32) i == sb.role)
        FUZZ_CHECK (strcmp (sb.roles[i].uuid, sb.component_uuid) == 0
                    && sb.roles[i].state != VB_ROLE_MISSING);
      else
        FUZZ_CHECK (sb.roles[i].uuid[0] == '\0');
    }
  /* the strings reach D-Bus ('s': UTF-8 only) and JSON */
  check_utf8_field (sb.device_name, sizeof sb.device_name);
  check_utf8_field (sb.driver, sizeof sb.driver);
  check_utf8_field (sb.attributes, sizeof sb.attributes);
  check_attributes (sb.attributes);
  check_views (&sb);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  check_one (data, size);
  if (size >= MD1_BLOCK && get32 (data + OFF (max_dev)) <= (MD1_BLOCK - 256) / 2)
    {
      guint8 block[MD1_BLOCK];

      memcpy (block, data, sizeof block);
      seal (block);
      check_one (block, sizeof block);
    }
  return 0;
}

/* Seeds: md 1.x superblocks as mdadm --create writes them, of a few levels
 * and member states. */

typedef struct {
  gint32 level;
  guint32 layout;
  guint32 chunk_sectors;
  guint32 raid_disks;
  guint32 max_dev;
  guint32 dev_number;
  guint32 feature_map;
  guint64 recovery_offset;
  gboolean clean;
  const char *set_name;
  const guint16 *roles; /* max_dev entries */
} Md1Seed;

static void
make_block (guint8 *b, const Md1Seed *s)
{
  static const guint8 set_uuid[16] = { 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
                                       0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef };
  guint8 dev_uuid[16];

  for (guint i = 0; i < 16; i++)
    dev_uuid[i] = (guint8) (0xa0 + i + 16 * s->dev_number);
  memset (b, 0, MD1_BLOCK);
  put32 (b + OFF (magic), MD_SB_MAGIC);
  put32 (b + OFF (major_version), 1);
  put32 (b + OFF (feature_map), s->feature_map);
  memcpy (b + OFF (set_uuid), set_uuid, 16);
  memcpy (b + OFF (set_name), s->set_name, strlen (s->set_name));
  put64 (b + OFF (ctime), 1700000000ULL | (123456ULL << 40));
  put32 (b + OFF (level), (guint32) s->level);
  put32 (b + OFF (layout), s->layout);
  put64 (b + OFF (size), 2097152);
  put32 (b + OFF (chunksize), s->chunk_sectors);
  put32 (b + OFF (raid_disks), s->raid_disks);
  put64 (b + OFF (data_offset), 2048);
  put64 (b + OFF (data_size), 2097152);
  put64 (b + OFF (super_offset), 8);
  put64 (b + OFF (recovery_offset), s->recovery_offset);
  put32 (b + OFF (dev_number), s->dev_number);
  memcpy (b + OFF (device_uuid), dev_uuid, 16);
  put64 (b + OFF (utime), 1700000100ULL | (42ULL << 40));
  put64 (b + OFF (events), 171);
  put64 (b + OFF (resync_offset), s->clean ? G_MAXUINT64 : 4096);
  put32 (b + OFF (max_dev), s->max_dev);
  for (guint32 d = 0; d < s->max_dev; d++)
    {
      b[256 + 2 * d] = (guint8) s->roles[d];
      b[256 + 2 * d + 1] = (guint8) (s->roles[d] >> 8);
    }
  seal (b);
}

static gboolean
write_seed (const char *dir, const char *name, const Md1Seed *s)
{
  guint8 block[MD1_BLOCK];
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autoptr (GError) error = NULL;
  VbSuperblock check;

  make_block (block, s);
  if (!vb_metadata_md1.decode (block, sizeof block, &check, &error))
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
  static const guint16 mirror[] = { 0, 1 };
  static const guint16 mirror_spare[] = { 0, 1, 0xffff };
  static const guint16 raid10[] = { 0, 1, 2, 3 };
  static const guint16 raid5_failed[] = { 0, MD_DISK_ROLE_FAULTY, 2, 1 };
  /* max_dev odd: the checksum ends with a half word */
  static const guint16 linear[] = { 0, 1, 2 };
  const Md1Seed seeds[] = {
    { .level = 1,
      .raid_disks = 2,
      .max_dev = 2,
      .clean = TRUE,
      .set_name = "host:data",
      .roles = mirror },
    /* the spare of a mirror, with md's bitmap, not clean */
    { .level = 1,
      .raid_disks = 2,
      .max_dev = 3,
      .dev_number = 2,
      .feature_map = MD_FEATURE_BITMAP_OFFSET,
      .set_name = "backup",
      .roles = mirror_spare },
    /* a near raid10 (n2), and a far one (f2) of a member being rebuilt */
    { .level = 10,
      .layout = 0x102,
      .chunk_sectors = 1024,
      .raid_disks = 4,
      .max_dev = 4,
      .dev_number = 3,
      .clean = TRUE,
      .set_name = "nas:pool",
      .roles = raid10 },
    { .level = 10,
      .layout = 0x201,
      .chunk_sectors = 128,
      .raid_disks = 4,
      .max_dev = 4,
      .dev_number = 1,
      .feature_map = MD_FEATURE_RECOVERY_OFFSET,
      .recovery_offset = 8192,
      .clean = TRUE,
      .set_name = "nas:far",
      .roles = raid10 },
    /* a raid5 that lost device 1 (its role 1 now on device 3) */
    { .level = 5,
      .layout = 2,
      .chunk_sectors = 1024,
      .raid_disks = 3,
      .max_dev = 4,
      .dev_number = 3,
      .clean = TRUE,
      .set_name = "a:b:raid5",
      .roles = raid5_failed },
    /* a name that fills set_name: no NUL on disk */
    { .level = -1,
      .raid_disks = 3,
      .max_dev = 3,
      .dev_number = 2,
      .clean = TRUE,
      .set_name = "0123456789abcdef0123456789abcdef",
      .roles = linear },
  };
  static const char *const names[] = {
    "raid1",        "raid1-spare-bitmap",       "raid10-near", "raid10-far-recovering",
    "raid5-failed", "linear-name-unterminated",
  };
  gboolean ok = TRUE;

  G_STATIC_ASSERT (G_N_ELEMENTS (seeds) == G_N_ELEMENTS (names));
  for (guint i = 0; i < G_N_ELEMENTS (seeds); i++)
    ok &= write_seed (dir, names[i], &seeds[i]);
  return ok ? 0 : 1;
}
