/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The native vblk superblock: CRC-32C vectors and chaining, encode/decode
 * round trips, refusal of every corrupted byte and of each semantic
 * violation (with a valid CRC, naming the field), reading and writing
 * through files (O_DIRECT and buffered), the text and JSON views, and the
 * "vblk" metadata handler. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "metadata.h"
#include "superblock.h"
#include "vb-error.h"

/* CRC-32C */

/* Bit by bit, straight from the definition. */
static guint32
crc32c_reference (guint32 crc, const guint8 *p, gsize len)
{
  crc = ~crc;
  for (gsize i = 0; i < len; i++)
    {
      crc ^= p[i];
      for (int bit = 0; bit < 8; bit++)
        crc = (crc >> 1) ^ ((crc & 1) ? 0x82F63B78u : 0);
    }
  return ~crc;
}

static void
test_crc32c_vectors (void)
{
  guint8 buf[32];

  g_assert_cmphex (vb_crc32c (0, "123456789", 9), ==, 0xE3069283);
  g_assert_cmphex (vb_crc32c_software (0, "123456789", 9), ==, 0xE3069283);
  g_assert_cmphex (vb_crc32c (0, NULL, 0), ==, 0);
  g_assert_cmphex (vb_crc32c (0x12345678, "", 0), ==, 0x12345678);
  /* RFC 3720 (iSCSI), appendix B.4. */
  memset (buf, 0, sizeof buf);
  g_assert_cmphex (vb_crc32c (0, buf, sizeof buf), ==, 0x8A9136AA);
  memset (buf, 0xff, sizeof buf);
  g_assert_cmphex (vb_crc32c (0, buf, sizeof buf), ==, 0x62A8AB43);
  for (int i = 0; i < 32; i++)
    buf[i] = i;
  g_assert_cmphex (vb_crc32c (0, buf, sizeof buf), ==, 0x46DD794E);
  g_assert_cmphex (vb_crc32c_software (0, buf, sizeof buf), ==, 0x46DD794E);
  for (int i = 0; i < 32; i++)
    buf[i] = 31 - i;
  g_assert_cmphex (vb_crc32c (0, buf, sizeof buf), ==, 0x113FDB5C);
}

/* Every length and alignment: hardware (when present), tables and the
 * bitwise reference agree, and splitting anywhere chains to the same. */
static void
test_crc32c_chaining (void)
{
  g_autoptr (GRand) rand = g_rand_new_with_seed (4);
  guint8 data[600];

  for (gsize i = 0; i < sizeof data; i++)
    data[i] = g_rand_int_range (rand, 0, 256);
  for (gsize start = 0; start < 8; start++)
    for (gsize len = 0; len + start <= 300; len++)
      {
        guint32 ref = crc32c_reference (0, data + start, len);

        g_assert_cmphex (vb_crc32c (0, data + start, len), ==, ref);
        g_assert_cmphex (vb_crc32c_software (0, data + start, len), ==, ref);
      }
  for (gsize split = 0; split <= sizeof data; split++)
    {
      guint32 whole = vb_crc32c (0, data, sizeof data);
      guint32 a = vb_crc32c (0, data, split);
      guint32 sa = vb_crc32c_software (0, data, split);

      g_assert_cmphex (vb_crc32c (a, data + split, sizeof data - split), ==, whole);
      g_assert_cmphex (vb_crc32c_software (sa, data + split, sizeof data - split), ==, whole);
    }
}

/* Superblocks to work with */

#define DEV_UUID "6f1c2d3e-4b5a-4978-8a1b-0c2d3e4f5a6b"
#define UUID0 "11111111-2222-4333-8444-555555555555"
#define UUID1 "aaaaaaaa-bbbb-4ccc-9ddd-eeeeeeeeeeee"

/* A two-way mirror with a missing third slot, seen from slot 1. */
static void
make_sb (VbSuperblock *sb)
{
  memset (sb, 0, sizeof *sb);
  sb->version = 1;
  sb->features = VB_SB_FEATURE_BITMAP;
  g_strlcpy (sb->device_uuid, DEV_UUID, sizeof sb->device_uuid);
  g_strlcpy (sb->device_name, "data", sizeof sb->device_name);
  g_strlcpy (sb->component_uuid, UUID1, sizeof sb->component_uuid);
  sb->role = 1;
  g_strlcpy (sb->driver, "raid1", sizeof sb->driver);
  g_strlcpy (sb->attributes, "bitmap_chunk=67108864\nsync_speed=1000\n", sizeof sb->attributes);
  sb->events = 42;
  sb->clean = TRUE;
  sb->ctime = G_GUINT64_CONSTANT (1700000000000000);
  sb->utime = G_GUINT64_CONSTANT (1700000005123456);
  sb->data_offset = VB_DATA_OFFSET_DEFAULT;
  sb->data_size = G_GUINT64_CONSTANT (1) << 30;
  sb->bitmap_chunk = 64 << 20;
  sb->bitmap_bytes = 4096;
  sb->n_roles = 3;
  g_strlcpy (sb->roles[0].uuid, UUID0, sizeof sb->roles[0].uuid);
  sb->roles[0].state = VB_ROLE_IN_SYNC;
  g_strlcpy (sb->roles[1].uuid, UUID1, sizeof sb->roles[1].uuid);
  sb->roles[1].state = VB_ROLE_IN_SYNC;
  sb->roles[2].state = VB_ROLE_MISSING;
}

static void
role_uuid (guint i, char out[37])
{
  g_snprintf (out, 37, "%08x-%04x-4%03x-8%03x-%012x", 0xc0ffee00 + i, i, i, i, i * 7919 + 1);
}

/* Every field at its largest: 64 roles in every state, the longest name
 * and driver, attributes filling their field, large numbers. */
static void
make_full_sb (VbSuperblock *sb)
{
  GString *attrs = g_string_new (NULL);
  char last[VB_SB_ATTR_MAX];

  memset (sb, 0, sizeof *sb);
  sb->version = 1;
  sb->features = VB_SB_FEATURE_BITMAP;
  g_strlcpy (sb->device_uuid, "ffffffff-ffff-4fff-bfff-ffffffffffff", sizeof sb->device_uuid);
  memset (sb->device_name, 'n', 64);
  sb->device_name[0] = 'N';
  sb->device_name[63] = '9';
  memset (sb->driver, 'd', 32);
  sb->driver[31] = '_';
  for (guint i = 0; attrs->len + 2 * 45 < VB_SB_ATTR_MAX; i++)
    g_string_append_printf (attrs, "key%04u=value %u with spaces/ünïcode\n", i, i);
  /* Fill exactly to 2047 bytes with one last sorted key. */
  memset (last, 'z', sizeof last);
  last[VB_SB_ATTR_MAX - 1 - attrs->len - 1] = '\0';
  memcpy (last, "zz=", 3);
  g_string_append (attrs, last);
  g_string_append_c (attrs, '\n');
  g_assert_cmpuint (attrs->len, ==, VB_SB_ATTR_MAX - 1);
  memcpy (sb->attributes, attrs->str, attrs->len + 1);
  g_string_free (attrs, TRUE);
  sb->events = G_MAXUINT64 - 1;
  sb->features |= VB_SB_FEATURE_EVENTS_CLEARED;
  sb->events_cleared = sb->events;
  sb->clean = FALSE;
  sb->ctime = G_MAXUINT64;
  sb->utime = 1;
  sb->data_size = G_GUINT64_CONSTANT (1) << 50;
  sb->bitmap_chunk = G_GUINT64_CONSTANT (1) << 20;
  sb->bitmap_bytes = 128 << 20; /* (2^50 / 2^20) bits */
  sb->data_offset = VB_BITMAP_OFFSET + (guint64) sb->bitmap_bytes;
  sb->rebuild_offset = sb->data_size;
  sb->n_roles = VB_SB_MAX_ROLES;
  for (guint i = 0; i < VB_SB_MAX_ROLES; i++)
    {
      sb->roles[i].state = i % 5;
      if (sb->roles[i].state != VB_ROLE_EMPTY && i != 9)
        role_uuid (i, sb->roles[i].uuid);
    }
  sb->role = 63;
  g_strlcpy (sb->component_uuid, sb->roles[63].uuid, sizeof sb->component_uuid);
  g_assert_cmpint (sb->roles[63].state, ==, VB_ROLE_REBUILDING);
}

static void
assert_sb_equal (const VbSuperblock *a, const VbSuperblock *b)
{
  g_assert_cmpuint (a->version, ==, b->version);
  g_assert_cmpuint (a->features, ==, b->features);
  g_assert_cmpstr (a->device_uuid, ==, b->device_uuid);
  g_assert_cmpstr (a->device_name, ==, b->device_name);
  g_assert_cmpstr (a->component_uuid, ==, b->component_uuid);
  g_assert_cmpint (a->role, ==, b->role);
  g_assert_cmpstr (a->driver, ==, b->driver);
  g_assert_cmpstr (a->attributes, ==, b->attributes);
  g_assert_cmpuint (a->events, ==, b->events);
  g_assert_cmpuint (a->events_cleared, ==, b->events_cleared);
  g_assert_cmpint (!!a->clean, ==, !!b->clean);
  g_assert_cmpuint (a->ctime, ==, b->ctime);
  g_assert_cmpuint (a->utime, ==, b->utime);
  g_assert_cmpuint (a->data_offset, ==, b->data_offset);
  g_assert_cmpuint (a->data_size, ==, b->data_size);
  g_assert_cmpuint (a->bitmap_chunk, ==, b->bitmap_chunk);
  g_assert_cmpuint (a->bitmap_bytes, ==, b->bitmap_bytes);
  g_assert_cmpuint (a->rebuild_offset, ==, b->rebuild_offset);
  g_assert_cmpuint (a->n_roles, ==, b->n_roles);
  for (guint i = 0; i < a->n_roles; i++)
    {
      g_assert_cmpstr (a->roles[i].uuid, ==, b->roles[i].uuid);
      g_assert_cmpuint (a->roles[i].state, ==, b->roles[i].state);
    }
}

static void
assert_round_trip (const VbSuperblock *sb)
{
  guint8 buf[VB_SB_SIZE], again[VB_SB_SIZE];
  VbSuperblock out;
  g_autoptr (GError) error = NULL;

  vb_superblock_encode (sb, buf);
  g_assert_cmpmem (buf, VB_SB_MAGIC_LEN, VB_SB_MAGIC, VB_SB_MAGIC_LEN);
  g_assert_true (vb_superblock_decode (buf, sizeof buf, &out, &error));
  g_assert_no_error (error);
  assert_sb_equal (sb, &out);
  /* An accepted block has one encoding. */
  vb_superblock_encode (&out, again);
  g_assert_cmpmem (buf, sizeof buf, again, sizeof again);
}

static void
test_round_trip (void)
{
  VbSuperblock sb;

  make_sb (&sb);
  assert_round_trip (&sb);
  make_full_sb (&sb);
  assert_round_trip (&sb);

  /* A spare, no bitmap, data right after the superblock. */
  make_sb (&sb);
  sb.role = VB_SB_ROLE_SPARE;
  g_strlcpy (sb.component_uuid, "0a0b0c0d-0e0f-4a1b-8c2d-3e4f5a6b7c8d", sizeof sb.component_uuid);
  sb.features = 0;
  sb.bitmap_chunk = 0;
  sb.bitmap_bytes = 0;
  sb.data_offset = VB_BITMAP_OFFSET;
  sb.attributes[0] = '\0';
  sb.clean = FALSE;
  assert_round_trip (&sb);

  /* events_cleared recorded (at its offset, little-endian), below events */
  make_sb (&sb);
  sb.features |= VB_SB_FEATURE_EVENTS_CLEARED;
  sb.events_cleared = 40;
  assert_round_trip (&sb);
  {
    guint8 buf[VB_SB_SIZE];

    vb_superblock_encode (&sb, buf);
    g_assert_cmpmem (buf + VB_SB_OFF_EVENTS_CLEARED, 8, "\x28\0\0\0\0\0\0\0", 8);
    g_assert_cmpuint (buf[VB_SB_OFF_FEATURES], ==, 3);
  }
  /* recorded at 0 (a new device) is not the same as not recorded */
  sb.events_cleared = 0;
  assert_round_trip (&sb);

  /* One slot, no final newline in the attributes. */
  make_sb (&sb);
  sb.n_roles = 1;
  sb.role = 0;
  g_strlcpy (sb.roles[0].uuid, UUID1, sizeof sb.roles[0].uuid);
  memset (&sb.roles[1], 0, sizeof sb.roles[1] * 2);
  g_strlcpy (sb.attributes, "a=1\nb=", sizeof sb.attributes);
  assert_round_trip (&sb);
}

/* Text UUIDs in either case and the nil UUID: stored as 16 bytes, read
 * back lower case; nil reads back as "". */
static void
test_uuid_forms (void)
{
  VbSuperblock sb, out;
  guint8 buf[VB_SB_SIZE];
  g_autoptr (GError) error = NULL;

  make_sb (&sb);
  g_strlcpy (sb.device_uuid, "6F1C2D3E-4B5A-4978-8A1B-0C2D3E4F5A6B", sizeof sb.device_uuid);
  g_strlcpy (sb.roles[2].uuid, "00000000-0000-0000-0000-000000000000", sizeof sb.roles[2].uuid);
  vb_superblock_encode (&sb, buf);
  g_assert_true (vb_superblock_decode (buf, sizeof buf, &out, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (out.device_uuid, ==, DEV_UUID);
  g_assert_cmpstr (out.roles[2].uuid, ==, "");
  g_assert_cmpmem (buf + VB_SB_OFF_DEVICE_UUID, 4, "\x6f\x1c\x2d\x3e", 4);
}

/* Raw byte helpers for forging blocks */

static void
poke_u32 (guint8 *b, gsize off, guint32 v)
{
  for (int i = 0; i < 4; i++)
    b[off + i] = v >> (8 * i);
}

static void
poke_u64 (guint8 *b, gsize off, guint64 v)
{
  for (int i = 0; i < 8; i++)
    b[off + i] = v >> (8 * i);
}

static void
poke_string (guint8 *b, gsize off, gsize size, const char *s)
{
  memset (b + off, 0, size);
  memcpy (b + off, s, strlen (s));
}

static guint8 *
role_entry (guint8 *b, guint i)
{
  return b + VB_SB_OFF_ROLES + i * VB_SB_ROLE_ENTRY;
}

/* A correct CRC over whatever the block now holds. */
static void
reseal (guint8 *b)
{
  poke_u32 (b, VB_SB_OFF_CRC, 0);
  poke_u32 (b, VB_SB_OFF_CRC, vb_crc32c (0, b, VB_SB_SIZE));
}

static void
test_every_byte_flip (void)
{
  VbSuperblock sb, out;
  guint8 good[VB_SB_SIZE], buf[VB_SB_SIZE];
  static const guint8 masks[] = { 0x01, 0x80, 0xff, 0x5a };

  make_sb (&sb);
  vb_superblock_encode (&sb, good);
  for (gsize i = 0; i < VB_SB_SIZE; i++)
    for (gsize m = 0; m < G_N_ELEMENTS (masks); m++)
      {
        g_autoptr (GError) error = NULL;

        memcpy (buf, good, sizeof buf);
        buf[i] ^= masks[m];
        g_assert_false (vb_superblock_decode (buf, sizeof buf, &out, &error));
        if (i < VB_SB_MAGIC_LEN)
          {
            g_assert_error (error, VB_ERROR, VB_ERROR_NOT_FOUND);
            g_assert_cmpstr (error->message, ==, "no vblk superblock");
          }
        else
          {
            g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
            g_assert_true (
                g_str_has_prefix (error->message, "superblock checksum mismatch (stored 0x"));
          }
      }
}

static void
test_no_superblock (void)
{
  VbSuperblock sb, out;
  guint8 buf[VB_SB_SIZE];
  g_autoptr (GError) e1 = NULL;
  g_autoptr (GError) e2 = NULL;
  g_autoptr (GError) e3 = NULL;
  g_autoptr (GError) e4 = NULL;

  memset (buf, 0, sizeof buf);
  g_assert_false (vb_superblock_decode (buf, sizeof buf, &out, &e1));
  g_assert_error (e1, VB_ERROR, VB_ERROR_NOT_FOUND);
  g_assert_false (vb_superblock_decode (buf, 0, &out, &e2));
  g_assert_error (e2, VB_ERROR, VB_ERROR_NOT_FOUND);

  make_sb (&sb);
  vb_superblock_encode (&sb, buf);
  g_assert_false (vb_superblock_decode (buf, VB_SB_SIZE - 1, &out, &e3));
  g_assert_error (e3, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_cmpstr (e3->message, ==, "superblock: truncated (4095 of 4096 bytes)");
  g_assert_false (vb_superblock_decode (buf, 5, &out, &e4));
  g_assert_error (e4, VB_ERROR, VB_ERROR_NOT_FOUND);
}

/* Semantic violations, each forged with a correct CRC */

typedef struct {
  const char *name;
  const char *prefix; /* the message starts with the field */
  void (*mutate) (guint8 *b);
} Violation;

static void
v_version_2 (guint8 *b)
{
  poke_u32 (b, VB_SB_OFF_VERSION, 2);
}
static void
v_version_0 (guint8 *b)
{
  poke_u32 (b, VB_SB_OFF_VERSION, 0);
}
static void
v_features (guint8 *b)
{
  poke_u32 (b, VB_SB_OFF_FEATURES, VB_SB_FEATURE_BITMAP | 0x100);
}
static void
v_reserved0 (guint8 *b)
{
  b[VB_SB_OFF_RESERVED0 + 2] = 1;
}
static void
v_reserved1 (guint8 *b)
{
  b[VB_SB_OFF_RESERVED1] = 0x80;
}
static void
v_reserved2 (guint8 *b)
{
  b[VB_SB_OFF_RESERVED2 + 5] = 1;
}
static void
v_reserved3 (guint8 *b)
{
  b[VB_SB_SIZE - 1] = 1;
}
static void
v_device_uuid_nil (guint8 *b)
{
  memset (b + VB_SB_OFF_DEVICE_UUID, 0, VB_SB_UUID_LEN);
}
static void
v_component_uuid_nil (guint8 *b)
{
  memset (b + VB_SB_OFF_COMPONENT_UUID, 0, VB_SB_UUID_LEN);
}
static void
v_name_unterminated (guint8 *b)
{
  memset (b + VB_SB_OFF_DEVICE_NAME, 'a', 65);
}
static void
v_name_empty (guint8 *b)
{
  memset (b + VB_SB_OFF_DEVICE_NAME, 0, 65);
}
static void
v_name_bad_char (guint8 *b)
{
  poke_string (b, VB_SB_OFF_DEVICE_NAME, 65, "da/ta");
}
static void
v_name_not_utf8 (guint8 *b)
{
  poke_string (b, VB_SB_OFF_DEVICE_NAME, 65, "d\xffta");
}
static void
v_name_dotdot (guint8 *b)
{
  poke_string (b, VB_SB_OFF_DEVICE_NAME, 65, "..");
}
static void
v_name_garbage_after_nul (guint8 *b)
{
  b[VB_SB_OFF_DEVICE_NAME + 64] = 'x';
}
static void
v_driver_unterminated (guint8 *b)
{
  memset (b + VB_SB_OFF_DRIVER, 'r', 33);
}
static void
v_driver_empty (guint8 *b)
{
  memset (b + VB_SB_OFF_DRIVER, 0, 33);
}
static void
v_driver_upper (guint8 *b)
{
  poke_string (b, VB_SB_OFF_DRIVER, 33, "RAID1");
}
static void
v_attributes_unterminated (guint8 *b)
{
  memset (b + VB_SB_OFF_ATTRIBUTES, 'a', VB_SB_ATTR_MAX);
}
static void
v_attributes_garbage_after_nul (guint8 *b)
{
  b[VB_SB_OFF_ATTRIBUTES + VB_SB_ATTR_MAX - 1] = 'x';
}
static void
v_attributes_unsorted (guint8 *b)
{
  poke_string (b, VB_SB_OFF_ATTRIBUTES, VB_SB_ATTR_MAX, "b=1\na=2\n");
}
static void
v_attributes_repeated (guint8 *b)
{
  poke_string (b, VB_SB_OFF_ATTRIBUTES, VB_SB_ATTR_MAX, "a=1\na=2\n");
}
static void
v_attributes_no_equals (guint8 *b)
{
  poke_string (b, VB_SB_OFF_ATTRIBUTES, VB_SB_ATTR_MAX, "a=1\nbad\n");
}
static void
v_attributes_empty_line (guint8 *b)
{
  poke_string (b, VB_SB_OFF_ATTRIBUTES, VB_SB_ATTR_MAX, "a=1\n\nb=2\n");
}
static void
v_attributes_empty_key (guint8 *b)
{
  poke_string (b, VB_SB_OFF_ATTRIBUTES, VB_SB_ATTR_MAX, "=1\n");
}
static void
v_attributes_bad_key (guint8 *b)
{
  poke_string (b, VB_SB_OFF_ATTRIBUTES, VB_SB_ATTR_MAX, "a b=1\n");
}
static void
v_attributes_control (guint8 *b)
{
  poke_string (b, VB_SB_OFF_ATTRIBUTES, VB_SB_ATTR_MAX, "a=1\tx\n");
}
static void
v_attributes_utf8 (guint8 *b)
{
  poke_string (b, VB_SB_OFF_ATTRIBUTES, VB_SB_ATTR_MAX, "a=\xff\xfe\n");
}
static void
v_role_too_big (guint8 *b)
{
  poke_u32 (b, VB_SB_OFF_ROLE, 3);
}
static void
v_role_huge (guint8 *b)
{
  poke_u32 (b, VB_SB_OFF_ROLE, 0x7fffffff);
}
static void
v_role_negative (guint8 *b)
{
  poke_u32 (b, VB_SB_OFF_ROLE, (guint32) -2);
}
static void
v_role_not_this_component (guint8 *b)
{
  poke_u32 (b, VB_SB_OFF_ROLE, 0);
}
static void
v_role_on_nil_slot (guint8 *b)
{
  poke_u32 (b, VB_SB_OFF_ROLE, 2);
}
static void
v_n_roles_0 (guint8 *b)
{
  poke_u32 (b, VB_SB_OFF_N_ROLES, 0);
}
static void
v_n_roles_65 (guint8 *b)
{
  poke_u32 (b, VB_SB_OFF_N_ROLES, 65);
}
static void
v_n_roles_huge (guint8 *b)
{
  poke_u32 (b, VB_SB_OFF_N_ROLES, G_MAXUINT32);
}
static void
v_state_unknown (guint8 *b)
{
  role_entry (b, 0)[VB_SB_UUID_LEN] = VB_ROLE_MISSING + 1;
}
static void
v_state_ff (guint8 *b)
{
  role_entry (b, 2)[VB_SB_UUID_LEN] = 0xff;
}
static void
v_empty_slot_with_uuid (guint8 *b)
{
  role_entry (b, 0)[VB_SB_UUID_LEN] = VB_ROLE_EMPTY;
}
static void
v_in_sync_nil_uuid (guint8 *b)
{
  role_entry (b, 2)[VB_SB_UUID_LEN] = VB_ROLE_IN_SYNC;
}
static void
v_duplicate_uuid (guint8 *b)
{
  memcpy (role_entry (b, 2), role_entry (b, 0), VB_SB_UUID_LEN);
}
static void
v_entry_past_n_roles (guint8 *b)
{
  role_entry (b, 3)[VB_SB_UUID_LEN] = VB_ROLE_IN_SYNC;
}
static void
v_uuid_past_n_roles (guint8 *b)
{
  role_entry (b, 63)[0] = 1;
}
static void
v_clean_2 (guint8 *b)
{
  b[VB_SB_OFF_CLEAN] = 2;
}
static void
v_data_offset_unaligned (guint8 *b)
{
  poke_u64 (b, VB_SB_OFF_DATA_OFFSET, VB_DATA_OFFSET_DEFAULT + 512);
}
static void
v_data_offset_too_small (guint8 *b)
{
  poke_u64 (b, VB_SB_OFF_DATA_OFFSET, VB_BITMAP_OFFSET); /* bitmap_bytes is 4096 */
}
static void
v_data_offset_zero (guint8 *b)
{
  poke_u64 (b, VB_SB_OFF_DATA_OFFSET, 0);
}
static void
v_bitmap_overlaps_data (guint8 *b)
{
  poke_u32 (b, VB_SB_OFF_BITMAP_BYTES, VB_DATA_OFFSET_DEFAULT);
}
static void
v_bitmap_bytes_unaligned (guint8 *b)
{
  poke_u32 (b, VB_SB_OFF_BITMAP_BYTES, 4000);
}
static void
v_bitmap_chunk_not_power (guint8 *b)
{
  poke_u64 (b, VB_SB_OFF_BITMAP_CHUNK, 3 * 65536);
}
static void
v_bitmap_chunk_small (guint8 *b)
{
  poke_u64 (b, VB_SB_OFF_BITMAP_CHUNK, 32768);
}
static void
v_bitmap_feature_no_chunk (guint8 *b)
{
  poke_u64 (b, VB_SB_OFF_BITMAP_CHUNK, 0);
}
static void
v_bitmap_feature_no_bytes (guint8 *b)
{
  poke_u32 (b, VB_SB_OFF_BITMAP_BYTES, 0);
}
static void
v_bitmap_too_small (guint8 *b)
{
  /* 4096 bytes of bitmap cover 32768 chunks of 64 MiB: one byte more. */
  poke_u64 (b, VB_SB_OFF_DATA_SIZE, (G_GUINT64_CONSTANT (64) << 20) * 32768 + 1);
}
static void
v_data_size_overflow (guint8 *b)
{
  poke_u64 (b, VB_SB_OFF_DATA_SIZE, G_MAXUINT64 - 4096);
}
static void
v_rebuild_past_data (guint8 *b)
{
  poke_u64 (b, VB_SB_OFF_REBUILD_OFFSET, (G_GUINT64_CONSTANT (1) << 30) + 1);
}

static void
v_events_cleared_no_feature (guint8 *b)
{
  poke_u64 (b, VB_SB_OFF_EVENTS_CLEARED, 5);
}
static void
v_events_cleared_above_events (guint8 *b)
{
  poke_u32 (b, VB_SB_OFF_FEATURES, VB_SB_FEATURE_BITMAP | VB_SB_FEATURE_EVENTS_CLEARED);
  poke_u64 (b, VB_SB_OFF_EVENTS_CLEARED, 43);
}

static const Violation violations[] = {
  { "version-2", "version: 2 is not supported", v_version_2 },
  { "version-0", "version: 0 ", v_version_0 },
  { "features", "features: unknown bits 0x00000100", v_features },
  { "reserved0", "reserved: byte 22 ", v_reserved0 },
  { "reserved1", "reserved: byte 117 ", v_reserved1 },
  { "reserved2", "reserved: byte 231 ", v_reserved2 },
  { "reserved3", "reserved: byte 4095 ", v_reserved3 },
  { "device-uuid-nil", "device_uuid: nil UUID", v_device_uuid_nil },
  { "component-uuid-nil", "component_uuid: nil UUID", v_component_uuid_nil },
  { "name-unterminated", "device_name: not NUL-terminated", v_name_unterminated },
  { "name-empty", "device_name: must not be empty", v_name_empty },
  { "name-bad-char", "device_name 'da/ta': character 3 is not allowed", v_name_bad_char },
  { "name-not-utf8", "device_name: character 0xff is not allowed", v_name_not_utf8 },
  { "name-dotdot", "device_name '..'", v_name_dotdot },
  { "name-garbage", "device_name: bytes after the terminating NUL", v_name_garbage_after_nul },
  { "driver-unterminated", "driver: not NUL-terminated", v_driver_unterminated },
  { "driver-empty", "driver: must not be empty", v_driver_empty },
  { "driver-upper", "driver: character 0x52", v_driver_upper },
  { "attributes-unterminated", "attributes: not NUL-terminated", v_attributes_unterminated },
  { "attributes-garbage", "attributes: bytes after", v_attributes_garbage_after_nul },
  { "attributes-unsorted", "attributes: key 'a' is out of order", v_attributes_unsorted },
  { "attributes-repeated", "attributes: key 'a' is repeated", v_attributes_repeated },
  { "attributes-no-equals", "attributes: line 2 has no '='", v_attributes_no_equals },
  { "attributes-empty-line", "attributes: line 2 has no '='", v_attributes_empty_line },
  { "attributes-empty-key", "attributes: line 1 has an empty key", v_attributes_empty_key },
  { "attributes-bad-key", "attributes: line 1: key character 0x20", v_attributes_bad_key },
  { "attributes-control", "attributes: line 1: value has control character 0x09",
    v_attributes_control },
  { "attributes-utf8", "attributes: not valid UTF-8", v_attributes_utf8 },
  { "role-too-big", "role: 3 is out of range", v_role_too_big },
  { "role-huge", "role: 2147483647 is out of range", v_role_huge },
  { "role-negative", "role: -2 is out of range", v_role_negative },
  { "role-not-this-component", "roles[0].uuid: '" UUID0 "' is not this component",
    v_role_not_this_component },
  { "role-on-nil-slot", "roles[2].uuid: '' is not this component", v_role_on_nil_slot },
  { "n-roles-0", "n_roles: 0 is out of range 1..64", v_n_roles_0 },
  { "n-roles-65", "n_roles: 65 is out of range 1..64", v_n_roles_65 },
  { "n-roles-huge", "n_roles: 4294967295 ", v_n_roles_huge },
  { "state-unknown", "roles[0].state: unknown value 5", v_state_unknown },
  { "state-ff", "roles[2].state: unknown value 255", v_state_ff },
  { "empty-slot-with-uuid", "roles[0].uuid: set on an empty slot", v_empty_slot_with_uuid },
  { "in-sync-nil-uuid", "roles[2].uuid: nil UUID for a in-sync slot", v_in_sync_nil_uuid },
  { "duplicate-uuid", "roles[2].uuid: same component as roles[0]", v_duplicate_uuid },
  { "entry-past-n-roles", "roles[3]: set past n_roles 3", v_entry_past_n_roles },
  { "uuid-past-n-roles", "roles[63]: set past n_roles 3", v_uuid_past_n_roles },
  { "clean-2", "clean: 2 is neither 0 nor 1", v_clean_2 },
  { "data-offset-unaligned", "data_offset: 1049088 is not a multiple of 4096",
    v_data_offset_unaligned },
  { "data-offset-too-small", "data_offset: 8192 overlaps", v_data_offset_too_small },
  { "data-offset-zero", "data_offset: 0 overlaps", v_data_offset_zero },
  { "bitmap-overlaps-data",
    "data_offset: 1048576 overlaps the superblock or the bitmap (must be >= 1056768)",
    v_bitmap_overlaps_data },
  { "bitmap-bytes-unaligned", "bitmap_bytes: 4000 is not a multiple of 4096",
    v_bitmap_bytes_unaligned },
  { "bitmap-chunk-not-power", "bitmap_chunk: 196608 ", v_bitmap_chunk_not_power },
  { "bitmap-chunk-small", "bitmap_chunk: 32768 ", v_bitmap_chunk_small },
  { "bitmap-feature-no-chunk", "bitmap_chunk: 0 but the bitmap feature is on",
    v_bitmap_feature_no_chunk },
  { "bitmap-feature-no-bytes", "bitmap_bytes: 0 but the bitmap feature is on",
    v_bitmap_feature_no_bytes },
  { "bitmap-too-small", "bitmap_bytes: 4096 too small", v_bitmap_too_small },
  { "data-size-overflow", "data_size: ", v_data_size_overflow },
  { "rebuild-past-data", "rebuild_offset: 1073741825 is past data_size", v_rebuild_past_data },
  { "events-cleared-no-feature", "events_cleared: 5 but the events_cleared feature is off",
    v_events_cleared_no_feature },
  { "events-cleared-above-events", "events_cleared: 43 is above events 42",
    v_events_cleared_above_events },
};

static void
test_violation (gconstpointer data)
{
  const Violation *v = data;
  VbSuperblock sb, out;
  guint8 buf[VB_SB_SIZE];
  g_autoptr (GError) stale = NULL;
  g_autoptr (GError) error = NULL;

  make_sb (&sb);
  vb_superblock_encode (&sb, buf);
  v->mutate (buf);
  /* The forgery changed something: the old CRC no longer holds. */
  g_assert_false (vb_superblock_decode (buf, sizeof buf, &out, &stale));
  g_assert_true (g_str_has_prefix (stale->message, "superblock checksum mismatch"));
  reseal (buf);
  g_assert_false (vb_superblock_decode (buf, sizeof buf, &out, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  if (!g_str_has_prefix (error->message, v->prefix))
    g_error ("%s: got '%s', expected it to start with '%s'", v->name, error->message, v->prefix);
  /* Nothing half-decoded is left behind. */
  g_assert_cmpuint (out.version, ==, 0);
  g_assert_cmpstr (out.device_uuid, ==, "");
}

/* The unmodified base with a fresh CRC still decodes (the violations are
 * refused for what they change, not for resealing). */
static void
test_reseal_keeps_valid (void)
{
  VbSuperblock sb, out;
  guint8 buf[VB_SB_SIZE];
  g_autoptr (GError) error = NULL;

  make_sb (&sb);
  vb_superblock_encode (&sb, buf);
  reseal (buf);
  g_assert_true (vb_superblock_decode (buf, sizeof buf, &out, &error));
  g_assert_no_error (error);
}

/* Reading and writing through files */

static void
remove_tree (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *p = g_build_filename (dir, name, NULL);

      g_unlink (p);
    }
  g_rmdir (dir);
}

/* @where: the directory to make the temporary directory in. */
static char *
make_dir (const char *where)
{
  g_autofree char *template = g_build_filename (where, "vblk-sb-XXXXXX", NULL);

  if (g_mkdtemp (template) == NULL)
    return NULL;
  return g_steal_pointer (&template);
}

/* Opens @path for I/O; with @direct O_DIRECT, falling back to buffered
 * where the file system refuses it (*@got_direct says which). */
static int
open_component (const char *path, int flags, gboolean direct, gboolean *got_direct)
{
  int fd = -1;

  *got_direct = FALSE;
  if (direct)
    {
      fd = open (path, flags | O_DIRECT | O_CLOEXEC, 0600);
      if (fd >= 0)
        *got_direct = TRUE;
      else
        g_assert_cmpint (errno, ==, EINVAL);
    }
  if (fd < 0)
    fd = open (path, flags | O_CLOEXEC, 0600);
  g_assert_cmpint (fd, >=, 0);
  return fd;
}

static void
check_io_in (const char *where, gboolean direct)
{
  g_autofree char *dir = make_dir (where);
  g_autofree char *path = NULL;
  g_autofree char *contents = NULL;
  gsize length;
  VbSuperblock sb, out;
  gboolean got_direct;
  int fd;
  g_autoptr (GError) error = NULL;
  guint8 pattern[VB_SB_OFFSET];

  if (dir == NULL)
    {
      g_test_message ("cannot make a directory in %s: skipped", where);
      return;
    }
  path = g_build_filename (dir, "component.img", NULL);

  /* Bytes before the superblock and after it stay as they are. */
  memset (pattern, 0xa5, sizeof pattern);
  fd = open_component (path, O_RDWR | O_CREAT, FALSE, &got_direct);
  g_assert_cmpint (pwrite (fd, pattern, sizeof pattern, 0), ==, sizeof pattern);
  g_assert_cmpint (pwrite (fd, pattern, sizeof pattern, 3 * VB_SB_OFFSET), ==, sizeof pattern);
  close (fd);

  make_sb (&sb);
  fd = open_component (path, O_RDWR, direct, &got_direct);
  g_test_message ("%s: %s", where,
                  got_direct ? "O_DIRECT" : (direct ? "O_DIRECT refused, buffered" : "buffered"));
  g_assert_true (vb_superblock_write (fd, path, &sb, &error));
  g_assert_no_error (error);
  g_assert_true (vb_superblock_read (fd, path, &out, &error));
  g_assert_no_error (error);
  assert_sb_equal (&sb, &out);
  g_assert_true (vb_metadata_vblk.probe (fd, path));
  close (fd);

  g_assert_true (g_file_get_contents (path, &contents, &length, NULL));
  g_assert_cmpuint (length, ==, 4 * VB_SB_OFFSET);
  g_assert_cmpmem (contents, VB_SB_OFFSET, pattern, sizeof pattern);
  g_assert_cmpmem (contents + 3 * VB_SB_OFFSET, VB_SB_OFFSET, pattern, sizeof pattern);
  g_assert_cmpmem (contents + VB_SB_OFFSET, VB_SB_MAGIC_LEN, VB_SB_MAGIC, VB_SB_MAGIC_LEN);

  /* By path alone. */
  memset (&out, 0, sizeof out);
  g_assert_true (vb_superblock_read (-1, path, &out, &error));
  g_assert_no_error (error);
  assert_sb_equal (&sb, &out);
  sb.events++;
  g_assert_true (vb_superblock_write (-1, path, &sb, &error));
  g_assert_no_error (error);
  g_assert_true (vb_metadata_vblk.read (-1, path, &out, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (out.events, ==, 43);

  remove_tree (dir);
}

static void
test_io_buffered (void)
{
  check_io_in (g_get_tmp_dir (), FALSE);
  check_io_in (".", FALSE);
}

static void
test_io_direct (void)
{
  check_io_in (g_get_tmp_dir (), TRUE);
  check_io_in (".", TRUE);
  if (g_file_test ("/dev/shm", G_FILE_TEST_IS_DIR) && access ("/dev/shm", W_OK) == 0)
    check_io_in ("/dev/shm", TRUE); /* tmpfs: may refuse O_DIRECT */
}

/* The bitmap's dirty count (vbmgr examine): bits of the data's chunks
 * only, across blocks; a bitmap area cut short is an error naming the file. */
static void
test_count_dirty (void)
{
  g_autofree char *dir = make_dir (g_get_tmp_dir ());
  g_autofree char *path = g_build_filename (dir, "bm.img", NULL);
  g_autofree guint8 *bits = g_malloc0 (2 * 4096);
  g_autoptr (GError) error = NULL;
  VbSuperblock sb;
  guint64 dirty = 99;
  int fd;

  make_sb (&sb);
  /* 40000 chunks: the bitmap spans two blocks; bits 40000.. are not data */
  sb.bitmap_chunk = 4096;
  sb.data_size = 40000ull * 4096 - 100; /* the last chunk partial */
  sb.bitmap_bytes = 2 * 4096;
  bits[0] = 0x81;                       /* chunks 0, 7 */
  bits[4096] = 0x01;                    /* chunk 32768 */
  bits[39999 / 8] |= 1u << (39999 % 8); /* the last chunk */
  bits[40000 / 8] |= 1u << (40000 % 8); /* past it: not counted */
  bits[8191] = 0xff;                    /* past it */
  fd = g_open (path, O_RDWR | O_CREAT, 0600);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (ftruncate (fd, VB_BITMAP_OFFSET + 4096), ==, 0);
  g_assert_true (vb_superblock_write (fd, NULL, &sb, NULL));
  /* only the first block there */
  g_assert_cmpint (pwrite (fd, bits, 4096, VB_BITMAP_OFFSET), ==, 4096);
  g_assert_false (vb_superblock_count_dirty (fd, NULL, &sb, &dirty, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "cannot read the bitmap at 12288"));
  g_clear_error (&error);
  g_assert_cmpint (pwrite (fd, bits + 4096, 4096, VB_BITMAP_OFFSET + 4096), ==, 4096);
  g_assert_true (vb_superblock_count_dirty (-1, path, &sb, &dirty, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (dirty, ==, 4);
  /* no bitmap: nothing dirty, nothing read */
  sb.features &= ~(guint32) VB_SB_FEATURE_BITMAP;
  g_assert_true (vb_superblock_count_dirty (-1, "/nonexistent", &sb, &dirty, &error));
  g_assert_cmpuint (dirty, ==, 0);
  close (fd);
  g_unlink (path);
  g_rmdir (dir);
}

static void
assert_read_fails (const char *path, int code, const char *message)
{
  VbSuperblock out;
  g_autoptr (GError) error = NULL;
  g_autofree char *expected = g_strdup_printf ("'%s': %s", path, message);

  g_assert_false (vb_superblock_read (-1, path, &out, &error));
  g_assert_error (error, VB_ERROR, code);
  if (!g_str_has_prefix (error->message, expected))
    g_error ("got '%s', expected it to start with '%s'", error->message, expected);
}

static void
test_io_refusals (void)
{
  g_autofree char *dir = make_dir (g_get_tmp_dir ());
  g_autofree char *small = g_build_filename (dir, "small.img", NULL);
  g_autofree char *empty = g_build_filename (dir, "empty.img", NULL);
  g_autofree char *zeros = g_build_filename (dir, "zeros.img", NULL);
  g_autofree char *corrupt = g_build_filename (dir, "corrupt.img", NULL);
  g_autofree char *absent = g_build_filename (dir, "absent.img", NULL);
  g_autofree char *zero_block = g_malloc0 (3 * VB_SB_SIZE);
  guint8 block[VB_SB_SIZE];
  VbSuperblock sb;
  g_autoptr (GError) error = NULL;

  g_assert_nonnull (dir);
  g_assert_true (g_file_set_contents (small, zero_block, VB_SB_OFFSET + VB_SB_SIZE - 1, NULL));
  g_assert_true (g_file_set_contents (empty, "", 0, NULL));
  g_assert_true (g_file_set_contents (zeros, zero_block, 3 * VB_SB_SIZE, NULL));
  g_assert_true (g_file_set_contents (corrupt, zero_block, 3 * VB_SB_SIZE, NULL));
  make_sb (&sb);
  g_assert_true (vb_superblock_write (-1, corrupt, &sb, &error));
  g_assert_no_error (error);

  assert_read_fails (small, VB_ERROR_NOT_FOUND, "no vblk superblock (too small)");
  assert_read_fails (empty, VB_ERROR_NOT_FOUND, "no vblk superblock (too small)");
  assert_read_fails (zeros, VB_ERROR_NOT_FOUND, "no vblk superblock");
  assert_read_fails (absent, VB_ERROR_NOT_FOUND, "cannot open");
  /* only a regular file or a block device is ever opened: a character
   * device, a directory or a FIFO is named for what it is */
  assert_read_fails ("/dev/null", VB_ERROR_INVALID_ARGUMENT, "a character device, not");
  assert_read_fails (dir, VB_ERROR_INVALID_ARGUMENT, "a directory, not");
  {
    g_autofree char *fifo = g_build_filename (dir, "fifo", NULL);
    g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
    assert_read_fails (fifo, VB_ERROR_INVALID_ARGUMENT, "a FIFO (named pipe), not");
    unlink (fifo);
  }

  /* A flipped byte in the stored block: the CRC names the mismatch. */
  {
    int fd = open (corrupt, O_RDWR);

    g_assert_cmpint (pread (fd, block, sizeof block, VB_SB_OFFSET), ==, sizeof block);
    block[VB_SB_OFF_EVENTS] ^= 1;
    g_assert_cmpint (pwrite (fd, block, sizeof block, VB_SB_OFFSET), ==, sizeof block);
    close (fd);
  }
  assert_read_fails (corrupt, VB_ERROR_INVALID_ARGUMENT, "superblock checksum mismatch (stored 0x");
  g_assert_false (vb_metadata_vblk.probe (-1, zeros));
  g_assert_true (vb_metadata_vblk.probe (-1, corrupt)); /* the magic is there */

  /* Writing through a read-only fd fails naming the path. */
  {
    int fd = open (zeros, O_RDONLY);
    g_autoptr (GError) werror = NULL;
    g_autofree char *expected = g_strdup_printf ("'%s': cannot write the superblock: ", zeros);

    g_assert_false (vb_superblock_write (fd, zeros, &sb, &werror));
    g_assert_error (werror, VB_ERROR, VB_ERROR_FAILED);
    g_assert_true (g_str_has_prefix (werror->message, expected));
    close (fd);
  }
  remove_tree (dir);
}

/* Views */

static void
test_views (void)
{
  VbSuperblock sb;
  g_autofree char *text = NULL;
  g_autofree char *json = NULL;
  g_autoptr (JsonNode) root = NULL;
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  JsonObject *o;
  JsonArray *roles;

  make_sb (&sb);
  sb.roles[0].state = VB_ROLE_FAULTY;
  text = vb_superblock_to_text (&sb);
  g_test_message ("%s", text);
  g_assert_nonnull (strstr (text, DEV_UUID));
  g_assert_nonnull (strstr (text, UUID0));
  g_assert_nonnull (strstr (text, UUID1));
  g_assert_nonnull (strstr (text, "faulty"));
  g_assert_nonnull (strstr (text, "in-sync"));
  g_assert_nonnull (strstr (text, "missing"));
  g_assert_nonnull (strstr (text, "raid1"));
  g_assert_nonnull (strstr (text, "sync_speed=1000"));
  g_assert_nonnull (strstr (text, "Events : 42"));
  g_assert_nonnull (strstr (text, "Events Cleared : not recorded"));
  g_assert_nonnull (strstr (text, "Features : bitmap\n"));

  root = vb_superblock_to_json (&sb);
  json_generator_set_root (gen, root);
  json = json_generator_to_data (gen, NULL);
  g_test_message ("%s", json);
  o = json_node_get_object (root);
  g_assert_cmpstr (json_object_get_string_member (o, "device_uuid"), ==, DEV_UUID);
  g_assert_cmpstr (json_object_get_string_member (o, "component_uuid"), ==, UUID1);
  g_assert_cmpstr (json_object_get_string_member (o, "device_name"), ==, "data");
  g_assert_cmpint (json_object_get_int_member (o, "role"), ==, 1);
  g_assert_false (json_object_get_boolean_member (o, "spare"));
  g_assert_cmpint (json_object_get_int_member (o, "events"), ==, 42);
  g_assert_true (json_object_get_null_member (o, "events_cleared"));
  g_assert_true (json_object_get_boolean_member (o, "clean"));
  g_assert_cmpstr (
      json_object_get_string_member (json_object_get_object_member (o, "attributes"), "sync_speed"),
      ==, "1000");
  roles = json_object_get_array_member (o, "roles");
  g_assert_cmpuint (json_array_get_length (roles), ==, 3);
  g_assert_cmpstr (json_object_get_string_member (json_array_get_object_element (roles, 0), "uuid"),
                   ==, UUID0);
  g_assert_cmpstr (
      json_object_get_string_member (json_array_get_object_element (roles, 0), "state"), ==,
      "faulty");
  g_assert_cmpstr (
      json_object_get_string_member (json_array_get_object_element (roles, 1), "state"), ==,
      "in-sync");
  g_assert_true (json_object_get_null_member (json_array_get_object_element (roles, 2), "uuid"));
  g_assert_cmpstr (
      json_object_get_string_member (json_array_get_object_element (roles, 2), "state"), ==,
      "missing");

  /* A spare, and a component halfway through a rebuild. */
  {
    g_autofree char *spare = NULL;
    g_autofree char *full = NULL;
    g_autoptr (JsonNode) full_json = NULL;

    sb.role = VB_SB_ROLE_SPARE;
    spare = vb_superblock_to_text (&sb);
    g_assert_nonnull (strstr (spare, "Role : spare"));
    g_assert_null (strstr (spare, "(this component)"));
    make_full_sb (&sb);
    full = vb_superblock_to_text (&sb);
    g_assert_nonnull (strstr (full, "Rebuild Offset : 1125899906842624 ("));
    g_assert_nonnull (strstr (full, "Features : bitmap, events_cleared\n"));
    g_assert_nonnull (strstr (full, "Events Cleared : 18446744073709551614\n"));
    g_assert_nonnull (strstr (full, "63  rebuilding"));
    g_assert_nonnull (strstr (full, "(this component)"));
    full_json = vb_superblock_to_json (&sb);
    g_assert_cmpint (
        json_object_get_int_member (json_node_get_object (full_json), "events_cleared"), ==,
        G_MAXINT64);
    g_assert_cmpstr (
        json_array_get_string_element (
            json_object_get_array_member (json_node_get_object (full_json), "features"), 1),
        ==, "events_cleared");
    g_assert_cmpuint (json_array_get_length (
                          json_object_get_array_member (json_node_get_object (full_json), "roles")),
                      ==, VB_SB_MAX_ROLES);
  }

  g_assert_cmpstr (vb_role_state_to_string (VB_ROLE_EMPTY), ==, "empty");
  g_assert_cmpstr (vb_role_state_to_string (VB_ROLE_REBUILDING), ==, "rebuilding");
  g_assert_cmpstr (vb_role_state_to_string (99), ==, "unknown");
}

/* The handler */

static void
test_handler (void)
{
  const VbMetadataHandler *const *all = vb_metadata_handlers ();
  VbSuperblock sb;
  guint64 before;
  guint n = 0;

  g_assert_true (vb_metadata_lookup ("vblk") == &vb_metadata_vblk);
  g_assert_true (vb_metadata_lookup ("md1") == &vb_metadata_md1);
  g_assert_null (vb_metadata_lookup ("md0"));
  for (; all[n] != NULL; n++)
    g_assert_nonnull (all[n]->name);
  g_assert_cmpuint (n, >=, 1);
  g_assert_true (all[0] == &vb_metadata_vblk);
  g_assert_cmpstr (vb_metadata_vblk.name, ==, "vblk");

  make_sb (&sb);
  before = sb.utime;
  vb_metadata_vblk.update_role (&sb, 0, VB_ROLE_FAULTY);
  g_assert_cmpuint (sb.roles[0].state, ==, VB_ROLE_FAULTY);
  g_assert_cmpstr (sb.roles[0].uuid, ==, UUID0);
  g_assert_cmpuint (sb.events, ==, 43);
  g_assert_cmpuint (sb.utime, >, before);
  assert_round_trip (&sb);
  vb_metadata_vblk.update_role (&sb, 0, VB_ROLE_EMPTY);
  g_assert_cmpstr (sb.roles[0].uuid, ==, "");
  g_assert_cmpuint (sb.events, ==, 44);
  assert_round_trip (&sb);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/crc32c/vectors", test_crc32c_vectors);
  g_test_add_func ("/crc32c/chaining", test_crc32c_chaining);
  g_test_add_func ("/superblock/round-trip", test_round_trip);
  g_test_add_func ("/superblock/uuid-forms", test_uuid_forms);
  g_test_add_func ("/superblock/every-byte-flip", test_every_byte_flip);
  g_test_add_func ("/superblock/no-superblock", test_no_superblock);
  g_test_add_func ("/superblock/reseal-keeps-valid", test_reseal_keeps_valid);
  for (gsize i = 0; i < G_N_ELEMENTS (violations); i++)
    {
      g_autofree char *name = g_strdup_printf ("/superblock/refused/%s", violations[i].name);

      g_test_add_data_func (name, &violations[i], test_violation);
    }
  g_test_add_func ("/superblock/io/buffered", test_io_buffered);
  g_test_add_func ("/superblock/io/direct", test_io_direct);
  g_test_add_func ("/superblock/io/refusals", test_io_refusals);
  g_test_add_func ("/superblock/io/count-dirty", test_count_dirty);
  g_test_add_func ("/superblock/views", test_views);
  g_test_add_func ("/metadata/handler", test_handler);
  return g_test_run ();
}
