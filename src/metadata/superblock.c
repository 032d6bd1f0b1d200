/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The native vblk superblock: 4096 bytes at VB_SB_OFFSET of every
 * component. Encoding, strict validation of everything read from disk,
 * aligned (O_DIRECT-safe) reading and flushed writing, and the text and JSON
 * views vbmgr examine prints.
 *
 * On-disk layout, version 1 (offsets in bytes, integers little-endian,
 * written byte by byte; names in superblock.h):
 *
 *    0    8  magic "VBLKSB\r\n"
 *    8    4  version (1)
 *   12    4  features (bit 0: write-intent bitmap; bit 1: events_cleared
 *            is recorded; other bits refused)
 *   16    4  CRC-32C of the 4096 bytes with these 4 bytes zero
 *   20    4  reserved, zero
 *   24   16  device UUID (binary, RFC 4122 byte order), never nil
 *   40   16  component UUID, never nil
 *   56    4  role (signed; slot 0..n_roles-1, or -1 = spare)
 *   60    4  n_roles (1..64)
 *   64    8  events
 *   72    8  ctime (µs since the epoch)
 *   80    8  utime (µs since the epoch)
 *   88    8  data_offset (multiple of 4096, >= 8192 + bitmap_bytes)
 *   96    8  data_size
 *  104    8  bitmap_chunk (0, or a power of two >= 64 KiB)
 *  112    4  bitmap_bytes (multiple of 4096)
 *  116    1  clean (0 or 1)
 *  117    3  reserved, zero
 *  120    8  rebuild_offset (<= data_size)
 *  128   65  device name, NUL-terminated, zero-padded
 *  193   33  driver name, NUL-terminated, zero-padded
 *  226    6  reserved, zero
 *  232 1088  role table: 64 entries of 17 bytes, slot i at 232 + 17 * i:
 *              16  component UUID (nil: no known component)
 *               1  state (VbRoleState, 0..4)
 *            entries at and past n_roles are all zero
 * 1320 2048  attributes: "key=value\n" lines sorted by key, NUL-terminated,
 *            zero-padded
 * 3368    8  events_cleared (<= events; 0 unless features bit 1)
 * 3376  720  reserved, zero
 *
 * Every byte has one meaning, so an accepted block re-encodes to itself. */
#include "config.h"

#include <inttypes.h>
#include <glib/gi18n-lib.h>

#include "superblock.h"
#include "vb-open.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "vb-error.h"
#include "vb-util.h"

#define VB_SB_VERSION 1
#define VB_SB_ALIGN 4096
#define VB_SB_FEATURES_KNOWN (VB_SB_FEATURE_BITMAP | VB_SB_FEATURE_EVENTS_CLEARED)
#define VB_SB_MIN_CHUNK (64 * 1024)
#define VB_SB_NAME_FIELD 65
#define VB_SB_DRIVER_FIELD 33

G_STATIC_ASSERT (VB_SB_OFF_ROLES + VB_SB_MAX_ROLES * VB_SB_ROLE_ENTRY == VB_SB_OFF_ATTRIBUTES);
G_STATIC_ASSERT (VB_SB_OFF_ATTRIBUTES + VB_SB_ATTR_MAX == VB_SB_OFF_EVENTS_CLEARED);
G_STATIC_ASSERT (VB_SB_OFF_EVENTS_CLEARED + 8 == VB_SB_OFF_RESERVED3);
G_STATIC_ASSERT (VB_SB_OFF_RESERVED3 < VB_SB_SIZE);
G_STATIC_ASSERT (VB_SB_OFF_DEVICE_NAME + VB_SB_NAME_FIELD == VB_SB_OFF_DRIVER);
G_STATIC_ASSERT (VB_SB_OFF_DRIVER + VB_SB_DRIVER_FIELD == VB_SB_OFF_RESERVED2);
G_STATIC_ASSERT (sizeof (((VbSuperblock *) 0)->device_name) == VB_SB_NAME_FIELD);
G_STATIC_ASSERT (sizeof (((VbSuperblock *) 0)->driver) == VB_SB_DRIVER_FIELD);
G_STATIC_ASSERT (sizeof (VB_SB_MAGIC) - 1 == VB_SB_MAGIC_LEN);

/* Little-endian byte packing. */

static void
put_u32 (guint8 *p, guint32 v)
{
  for (int i = 0; i < 4; i++)
    p[i] = (guint8) (v >> (8 * i));
}

static void
put_u64 (guint8 *p, guint64 v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (guint8) (v >> (8 * i));
}

static guint32
get_u32 (const guint8 *p)
{
  guint32 v = 0;

  for (int i = 3; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

static guint64
get_u64 (const guint8 *p)
{
  guint64 v = 0;

  for (int i = 7; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

/* UUIDs: canonical text <-> 16 bytes. "" and anything that is not a UUID
 * encode as the nil UUID, which decodes as "". */

static int
hex_value (char c)
{
  return g_ascii_xdigit_value (c);
}

static void
uuid_to_bytes (const char *text, guint8 out[VB_SB_UUID_LEN])
{
  memset (out, 0, VB_SB_UUID_LEN);
  if (!g_uuid_string_is_valid (text))
    return;
  for (int i = 0, n = 0; text[i] != '\0' && n < 2 * VB_SB_UUID_LEN; i++)
    {
      if (text[i] == '-')
        continue;
      out[n / 2] |= (guint8) (hex_value (text[i]) << ((n % 2) ? 0 : 4));
      n++;
    }
}

static gboolean
uuid_is_nil (const guint8 *bytes)
{
  for (int i = 0; i < VB_SB_UUID_LEN; i++)
    if (bytes[i] != 0)
      return FALSE;
  return TRUE;
}

static void
uuid_to_text (const guint8 *bytes, char out[37])
{
  static const char digits[] = "0123456789abcdef";
  int o = 0;

  if (uuid_is_nil (bytes))
    {
      out[0] = '\0';
      return;
    }
  for (int i = 0; i < VB_SB_UUID_LEN; i++)
    {
      if (i == 4 || i == 6 || i == 8 || i == 10)
        out[o++] = '-';
      out[o++] = digits[bytes[i] >> 4];
      out[o++] = digits[bytes[i] & 0xf];
    }
  out[o] = '\0';
}

/* Copies at most @size bytes of @s (up to its NUL) and zero-pads; a string
 * that fills the field stays unterminated on disk, and decode refuses it. */
static void
put_string (guint8 *p, gsize size, const char *s)
{
  gsize n = strnlen (s, size);

  memcpy (p, s, n);
  memset (p + n, 0, size - n);
}

void
vb_superblock_encode (const VbSuperblock *sb, guint8 out[VB_SB_SIZE])
{
  guint n_entries;

  g_return_if_fail (sb != NULL && out != NULL);

  memset (out, 0, VB_SB_SIZE);
  memcpy (out + VB_SB_OFF_MAGIC, VB_SB_MAGIC, VB_SB_MAGIC_LEN);
  put_u32 (out + VB_SB_OFF_VERSION, sb->version);
  put_u32 (out + VB_SB_OFF_FEATURES, sb->features);
  uuid_to_bytes (sb->device_uuid, out + VB_SB_OFF_DEVICE_UUID);
  uuid_to_bytes (sb->component_uuid, out + VB_SB_OFF_COMPONENT_UUID);
  put_u32 (out + VB_SB_OFF_ROLE, (guint32) sb->role);
  put_u32 (out + VB_SB_OFF_N_ROLES, sb->n_roles);
  put_u64 (out + VB_SB_OFF_EVENTS, sb->events);
  put_u64 (out + VB_SB_OFF_EVENTS_CLEARED, sb->events_cleared);
  put_u64 (out + VB_SB_OFF_CTIME, sb->ctime);
  put_u64 (out + VB_SB_OFF_UTIME, sb->utime);
  put_u64 (out + VB_SB_OFF_DATA_OFFSET, sb->data_offset);
  put_u64 (out + VB_SB_OFF_DATA_SIZE, sb->data_size);
  put_u64 (out + VB_SB_OFF_BITMAP_CHUNK, sb->bitmap_chunk);
  put_u32 (out + VB_SB_OFF_BITMAP_BYTES, sb->bitmap_bytes);
  out[VB_SB_OFF_CLEAN] = sb->clean ? 1 : 0;
  put_u64 (out + VB_SB_OFF_REBUILD_OFFSET, sb->rebuild_offset);
  put_string (out + VB_SB_OFF_DEVICE_NAME, VB_SB_NAME_FIELD, sb->device_name);
  put_string (out + VB_SB_OFF_DRIVER, VB_SB_DRIVER_FIELD, sb->driver);
  n_entries = MIN (sb->n_roles, VB_SB_MAX_ROLES);
  for (guint i = 0; i < n_entries; i++)
    {
      guint8 *entry = out + VB_SB_OFF_ROLES + i * VB_SB_ROLE_ENTRY;

      uuid_to_bytes (sb->roles[i].uuid, entry);
      entry[VB_SB_UUID_LEN] = sb->roles[i].state;
    }
  put_string (out + VB_SB_OFF_ATTRIBUTES, VB_SB_ATTR_MAX, sb->attributes);
  put_u32 (out + VB_SB_OFF_CRC, vb_crc32c (0, out, VB_SB_SIZE));
}

/* Decoding: every check names the field it refuses. */

static gboolean refuse (GError **error, const char *format, ...) G_GNUC_PRINTF (2, 3);

static gboolean
refuse (GError **error, const char *format, ...)
{
  va_list args;

  va_start (args, format);
  g_propagate_error (error, g_error_new_valist (VB_ERROR, VB_ERROR_INVALID_ARGUMENT, format, args));
  va_end (args);
  return FALSE;
}

static gboolean
check_zero (const guint8 *buf, gsize offset, gsize len, GError **error)
{
  for (gsize i = 0; i < len; i++)
    if (buf[offset + i] != 0)
      return refuse (error, "reserved: byte %" G_GSIZE_FORMAT " is not zero", offset + i);
  return TRUE;
}

/* A NUL-terminated, zero-padded string field of @size bytes into @out. */
static gboolean
get_string (const guint8 *buf, gsize offset, gsize size, const char *field, char *out,
            GError **error)
{
  const guint8 *p = buf + offset;
  const guint8 *nul = memchr (p, 0, size);

  if (nul == NULL)
    return refuse (error, "%s: not NUL-terminated within its %" G_GSIZE_FORMAT " bytes", field,
                   size);
  for (const guint8 *q = nul; q < p + size; q++)
    if (*q != 0)
      return refuse (error, "%s: bytes after the terminating NUL are not zero", field);
  memcpy (out, p, nul - p + 1);
  return TRUE;
}

/* Before a name is quoted in a message: error messages travel over D-Bus,
 * which takes UTF-8 only. */
static gboolean
check_printable (const char *text, const char *field, GError **error)
{
  for (const char *c = text; *c != '\0'; c++)
    if ((guint8) *c < 0x20 || (guint8) *c > 0x7e)
      return refuse (error, "%s: character 0x%02x is not allowed", field, (guint8) *c);
  return TRUE;
}

static gboolean
check_driver (const char *driver, GError **error)
{
  if (*driver == '\0')
    return refuse (error, "driver: must not be empty");
  for (const char *c = driver; *c != '\0'; c++)
    if (!g_ascii_islower (*c) && !g_ascii_isdigit (*c) && *c != '_' && *c != '-')
      return refuse (error, "driver: character 0x%02x is not allowed ([a-z0-9_-])", (guint8) *c);
  return TRUE;
}

/* "key=value\n" lines: keys [A-Za-z0-9._-]+ strictly ascending, values
 * UTF-8 without control characters; the last newline may be missing. */
static gboolean
check_attributes (const char *text, GError **error)
{
  g_autofree char *previous = NULL;
  guint line = 0;

  if (!g_utf8_validate (text, -1, NULL))
    return refuse (error, "attributes: not valid UTF-8");
  for (const char *p = text; *p != '\0'; line++)
    {
      const char *end = strchr (p, '\n');
      const char *eq;
      g_autofree char *key = NULL;

      if (end == NULL)
        end = p + strlen (p);
      eq = memchr (p, '=', end - p);
      if (eq == NULL)
        return refuse (error, "attributes: line %u has no '='", line + 1);
      if (eq == p)
        return refuse (error, "attributes: line %u has an empty key", line + 1);
      for (const char *c = p; c < eq; c++)
        if (!g_ascii_isalnum (*c) && *c != '_' && *c != '-' && *c != '.')
          return refuse (error, "attributes: line %u: key character 0x%02x is not allowed",
                         line + 1, (guint8) *c);
      for (const char *c = eq + 1; c < end; c++)
        if ((guint8) *c < 0x20 || *c == 0x7f)
          return refuse (error, "attributes: line %u: value has control character 0x%02x", line + 1,
                         (guint8) *c);
      key = g_strndup (p, eq - p);
      if (previous != NULL && strcmp (previous, key) >= 0)
        return refuse (error, "attributes: key '%s' %s (keys must be sorted and unique)", key,
                       strcmp (previous, key) == 0 ? "is repeated" : "is out of order");
      g_free (previous);
      previous = g_steal_pointer (&key);
      p = *end == '\n' ? end + 1 : end;
    }
  return TRUE;
}

static gboolean
check_roles (const guint8 *buf, VbSuperblock *sb, GError **error)
{
  for (guint i = 0; i < VB_SB_MAX_ROLES; i++)
    {
      const guint8 *entry = buf + VB_SB_OFF_ROLES + i * VB_SB_ROLE_ENTRY;
      guint8 state = entry[VB_SB_UUID_LEN];
      gboolean nil = uuid_is_nil (entry);

      if (i >= sb->n_roles)
        {
          if (!nil || state != 0)
            return refuse (error, "roles[%u]: set past n_roles %u", i, sb->n_roles);
          continue;
        }
      if (state > VB_ROLE_MISSING)
        return refuse (error, "roles[%u].state: unknown value %u", i, state);
      if (state == VB_ROLE_EMPTY && !nil)
        return refuse (error, "roles[%u].uuid: set on an empty slot", i);
      /* A missing slot may never have had a component (created degraded). */
      if (nil && state != VB_ROLE_EMPTY && state != VB_ROLE_MISSING)
        return refuse (error, "roles[%u].uuid: nil UUID for a %s slot", i,
                       vb_role_state_to_string (state));
      for (guint j = 0; !nil && j < i; j++)
        if (memcmp (entry, buf + VB_SB_OFF_ROLES + j * VB_SB_ROLE_ENTRY, VB_SB_UUID_LEN) == 0)
          return refuse (error, "roles[%u].uuid: same component as roles[%u]", i, j);
      uuid_to_text (entry, sb->roles[i].uuid);
      sb->roles[i].state = state;
    }
  return TRUE;
}

/* Bytes of bitmap one bit per @chunk over @data_size needs, in 4 KiB blocks. */
static guint64
bitmap_bytes_needed (guint64 data_size, guint64 chunk)
{
  guint64 bits = data_size / chunk + (data_size % chunk != 0);
  guint64 bytes = bits / 8 + (bits % 8 != 0);

  return (bytes + VB_SB_ALIGN - 1) / VB_SB_ALIGN * VB_SB_ALIGN;
}

static gboolean
check_layout (const VbSuperblock *sb, GError **error)
{
  guint64 bitmap_end = (guint64) VB_BITMAP_OFFSET + sb->bitmap_bytes;

  if (sb->bitmap_bytes % VB_SB_ALIGN != 0)
    return refuse (error, "bitmap_bytes: %u is not a multiple of %d", sb->bitmap_bytes,
                   VB_SB_ALIGN);
  if (sb->bitmap_chunk != 0
      && (sb->bitmap_chunk < VB_SB_MIN_CHUNK || (sb->bitmap_chunk & (sb->bitmap_chunk - 1)) != 0))
    return refuse (error, "bitmap_chunk: %" G_GUINT64_FORMAT " is not 0 or a power of two >= %d",
                   sb->bitmap_chunk, VB_SB_MIN_CHUNK);
  if (sb->data_offset % VB_SB_ALIGN != 0)
    return refuse (error, "data_offset: %" G_GUINT64_FORMAT " is not a multiple of %d",
                   sb->data_offset, VB_SB_ALIGN);
  if (sb->data_offset < bitmap_end)
    return refuse (error,
                   "data_offset: %" G_GUINT64_FORMAT " overlaps the superblock or the bitmap "
                   "(must be >= %" G_GUINT64_FORMAT ")",
                   sb->data_offset, bitmap_end);
  if (sb->data_size > G_MAXUINT64 - sb->data_offset)
    return refuse (error, "data_size: %" G_GUINT64_FORMAT " overflows past data_offset",
                   sb->data_size);
  if (sb->rebuild_offset > sb->data_size)
    return refuse (error,
                   "rebuild_offset: %" G_GUINT64_FORMAT " is past data_size %" G_GUINT64_FORMAT,
                   sb->rebuild_offset, sb->data_size);
  if (sb->features & VB_SB_FEATURE_BITMAP)
    {
      guint64 needed;

      if (sb->bitmap_chunk == 0)
        return refuse (error, "bitmap_chunk: 0 but the bitmap feature is on");
      if (sb->bitmap_bytes == 0)
        return refuse (error, "bitmap_bytes: 0 but the bitmap feature is on");
      needed = bitmap_bytes_needed (sb->data_size, sb->bitmap_chunk);
      if (sb->bitmap_bytes < needed)
        return refuse (error,
                       "bitmap_bytes: %u too small for data_size %" G_GUINT64_FORMAT
                       " at bitmap_chunk %" G_GUINT64_FORMAT " (needs %" G_GUINT64_FORMAT ")",
                       sb->bitmap_bytes, sb->data_size, sb->bitmap_chunk, needed);
    }
  return TRUE;
}

static gboolean
decode_fields (const guint8 *buf, VbSuperblock *sb, GError **error)
{
  guint8 clean;

  g_strlcpy (sb->format, "vblk", sizeof sb->format);
  sb->version = get_u32 (buf + VB_SB_OFF_VERSION);
  if (sb->version != VB_SB_VERSION)
    return refuse (error, "version: %u is not supported (this build reads %d)", sb->version,
                   VB_SB_VERSION);
  sb->features = get_u32 (buf + VB_SB_OFF_FEATURES);
  if (sb->features & ~VB_SB_FEATURES_KNOWN)
    return refuse (error, "features: unknown bits 0x%08x", sb->features & ~VB_SB_FEATURES_KNOWN);
  if (!check_zero (buf, VB_SB_OFF_RESERVED0, 4, error)
      || !check_zero (buf, VB_SB_OFF_RESERVED1, 3, error)
      || !check_zero (buf, VB_SB_OFF_RESERVED2, VB_SB_OFF_ROLES - VB_SB_OFF_RESERVED2, error)
      || !check_zero (buf, VB_SB_OFF_RESERVED3, VB_SB_SIZE - VB_SB_OFF_RESERVED3, error))
    return FALSE;

  if (uuid_is_nil (buf + VB_SB_OFF_DEVICE_UUID))
    return refuse (error, "device_uuid: nil UUID");
  uuid_to_text (buf + VB_SB_OFF_DEVICE_UUID, sb->device_uuid);
  if (uuid_is_nil (buf + VB_SB_OFF_COMPONENT_UUID))
    return refuse (error, "component_uuid: nil UUID");
  uuid_to_text (buf + VB_SB_OFF_COMPONENT_UUID, sb->component_uuid);

  if (!get_string (buf, VB_SB_OFF_DEVICE_NAME, VB_SB_NAME_FIELD, "device_name", sb->device_name,
                   error)
      || !check_printable (sb->device_name, "device_name", error)
      || !vb_name_is_valid (sb->device_name, "device_name", error))
    return FALSE;
  if (!get_string (buf, VB_SB_OFF_DRIVER, VB_SB_DRIVER_FIELD, "driver", sb->driver, error)
      || !check_driver (sb->driver, error))
    return FALSE;
  if (!get_string (buf, VB_SB_OFF_ATTRIBUTES, VB_SB_ATTR_MAX, "attributes", sb->attributes, error)
      || !check_attributes (sb->attributes, error))
    return FALSE;

  sb->events = get_u64 (buf + VB_SB_OFF_EVENTS);
  sb->events_cleared = get_u64 (buf + VB_SB_OFF_EVENTS_CLEARED);
  if (!(sb->features & VB_SB_FEATURE_EVENTS_CLEARED) && sb->events_cleared != 0)
    return refuse (error,
                   "events_cleared: %" G_GUINT64_FORMAT " but the events_cleared feature is off",
                   sb->events_cleared);
  if (sb->events_cleared > sb->events)
    return refuse (error,
                   "events_cleared: %" G_GUINT64_FORMAT " is above events %" G_GUINT64_FORMAT,
                   sb->events_cleared, sb->events);
  sb->ctime = get_u64 (buf + VB_SB_OFF_CTIME);
  sb->utime = get_u64 (buf + VB_SB_OFF_UTIME);
  clean = buf[VB_SB_OFF_CLEAN];
  if (clean > 1)
    return refuse (error, "clean: %u is neither 0 nor 1", clean);
  sb->clean = clean == 1;

  sb->data_offset = get_u64 (buf + VB_SB_OFF_DATA_OFFSET);
  sb->data_size = get_u64 (buf + VB_SB_OFF_DATA_SIZE);
  sb->bitmap_chunk = get_u64 (buf + VB_SB_OFF_BITMAP_CHUNK);
  sb->bitmap_bytes = get_u32 (buf + VB_SB_OFF_BITMAP_BYTES);
  sb->rebuild_offset = get_u64 (buf + VB_SB_OFF_REBUILD_OFFSET);
  if (!check_layout (sb, error))
    return FALSE;

  sb->n_roles = get_u32 (buf + VB_SB_OFF_N_ROLES);
  if (sb->n_roles < 1 || sb->n_roles > VB_SB_MAX_ROLES)
    return refuse (error, "n_roles: %u is out of range 1..%d", sb->n_roles, VB_SB_MAX_ROLES);
  sb->role = (gint32) get_u32 (buf + VB_SB_OFF_ROLE);
  if (sb->role != VB_SB_ROLE_SPARE && (sb->role < 0 || (guint32) sb->role >= sb->n_roles))
    return refuse (error, "role: %d is out of range (0..%u, or -1 for a spare)", sb->role,
                   sb->n_roles - 1);
  if (!check_roles (buf, sb, error))
    return FALSE;
  if (sb->role != VB_SB_ROLE_SPARE && strcmp (sb->roles[sb->role].uuid, sb->component_uuid) != 0)
    return refuse (error, "roles[%d].uuid: '%s' is not this component (component_uuid '%s')",
                   sb->role, sb->roles[sb->role].uuid, sb->component_uuid);
  return TRUE;
}

gboolean
vb_superblock_decode (const guint8 *buf, gsize len, VbSuperblock *sb, GError **error)
{
  guint32 stored, computed;
  static const guint8 zero_crc[4] = { 0 };

  g_return_val_if_fail (buf != NULL || len == 0, FALSE);
  g_return_val_if_fail (sb != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  memset (sb, 0, sizeof *sb);
  if (len < VB_SB_MAGIC_LEN || memcmp (buf + VB_SB_OFF_MAGIC, VB_SB_MAGIC, VB_SB_MAGIC_LEN) != 0)
    {
      g_set_error_literal (error, VB_ERROR, VB_ERROR_NOT_FOUND, _ ("no vblk superblock"));
      return FALSE;
    }
  if (len < VB_SB_SIZE)
    return refuse (error, "superblock: truncated (%" G_GSIZE_FORMAT " of %d bytes)", len,
                   VB_SB_SIZE);

  stored = get_u32 (buf + VB_SB_OFF_CRC);
  computed = vb_crc32c (0, buf, VB_SB_OFF_CRC);
  computed = vb_crc32c (computed, zero_crc, sizeof zero_crc);
  computed = vb_crc32c (computed, buf + VB_SB_OFF_CRC + 4, VB_SB_SIZE - VB_SB_OFF_CRC - 4);
  if (stored != computed)
    return refuse (error, "superblock checksum mismatch (stored 0x%08x, computed 0x%08x)", stored,
                   computed);

  if (!decode_fields (buf, sb, error))
    {
      memset (sb, 0, sizeof *sb);
      return FALSE;
    }
  return TRUE;
}

/* Reading and writing on a component. */

typedef struct {
  int fd;
  gboolean owned;
  char *label; /* the path, or "fd N" */
} Target;

static void
target_clear (Target *t)
{
  if (t->owned && t->fd >= 0)
    close (t->fd);
  g_clear_pointer (&t->label, g_free);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Target, target_clear)

/* @fd as given, or @path opened O_DIRECT (buffered where the filesystem
 * refuses it, as tmpfs does). */
static gboolean
target_open (Target *t, int fd, const char *path, int flags, GError **error)
{
  t->fd = fd;
  t->label = path != NULL ? g_strdup (path) : g_strdup_printf ("fd %d", fd);
  if (fd >= 0)
    return TRUE;
  g_return_val_if_fail (path != NULL, FALSE);
  t->fd = vb_open_component (path, (flags == O_RDONLY ? 0 : VB_OPEN_WRITE) | VB_OPEN_DIRECT, NULL);
  if (t->fd < 0)
    {
      int errsv = errno;
      struct stat st;

      /* a FIFO, a directory, a device of another kind: never opened */
      if (errsv == ENOTBLK && stat (path, &st) == 0)
        g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                     _ ("'%s': %s, not a regular file or block device"), path,
                     vb_file_type_name (st.st_mode));
      else
        g_set_error (error, VB_ERROR, errsv == ENOENT ? VB_ERROR_NOT_FOUND : VB_ERROR_FAILED,
                     _ ("'%s': cannot open: %s"), path, g_strerror (errsv));
      return FALSE;
    }
  t->owned = TRUE;
  return TRUE;
}

static guint8 *
aligned_block (void)
{
  void *p = NULL;

  if (posix_memalign (&p, VB_SB_ALIGN, VB_SB_SIZE) != 0)
    g_error ("out of memory for a %d-byte superblock buffer", VB_SB_SIZE);
  return p;
}

static void
aligned_free (guint8 *p)
{
  free (p);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (guint8, aligned_free)

/* Size of the component when it can be told (regular file, block device);
 * -1 otherwise, and the read decides. */
static gint64
target_size (int fd)
{
  struct stat st;
  guint64 bytes;

  if (fstat (fd, &st) != 0)
    return -1;
  if (S_ISREG (st.st_mode))
    return st.st_size;
  if (S_ISBLK (st.st_mode) && ioctl (fd, BLKGETSIZE64, &bytes) == 0)
    return (gint64) MIN (bytes, (guint64) G_MAXINT64);
  return -1;
}

gboolean
vb_superblock_read (int fd, const char *path, VbSuperblock *sb, GError **error)
{
  g_auto (Target) t = { -1, FALSE, NULL };
  g_autoptr (guint8) buf = NULL;
  gint64 size;
  gssize n;

  g_return_val_if_fail (fd >= 0 || path != NULL, FALSE);
  g_return_val_if_fail (sb != NULL, FALSE);

  if (!target_open (&t, fd, path, O_RDONLY, error))
    return FALSE;
  size = target_size (t.fd);
  if (size >= 0 && size < VB_SB_OFFSET + VB_SB_SIZE)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND, _ ("'%s': no vblk superblock (too small)"),
                   t.label);
      return FALSE;
    }
  buf = aligned_block ();
  do
    n = pread (t.fd, buf, VB_SB_SIZE, VB_SB_OFFSET);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    {
      int errsv = errno;

      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("'%s': cannot read the superblock: %s"),
                   t.label, g_strerror (errsv));
      return FALSE;
    }
  if (n == 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND, _ ("'%s': no vblk superblock (too small)"),
                   t.label);
      return FALSE;
    }
  if (n != VB_SB_SIZE)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("'%s': short read of the superblock (%"
                      "zd"
                      " of %d bytes)"),
                   t.label, n, VB_SB_SIZE);
      return FALSE;
    }
  if (!vb_superblock_decode (buf, VB_SB_SIZE, sb, error))
    {
      g_prefix_error (error, "'%s': ", t.label);
      return FALSE;
    }
  return TRUE;
}

gboolean
vb_superblock_count_dirty (int fd, const char *path, const VbSuperblock *sb, guint64 *dirty,
                           GError **error)
{
  g_auto (Target) t = { -1, FALSE, NULL };
  g_autoptr (guint8) buf = NULL;
  guint64 chunks, bit = 0;

  g_return_val_if_fail (sb != NULL && dirty != NULL, FALSE);
  *dirty = 0;
  if (!(sb->features & VB_SB_FEATURE_BITMAP) || sb->bitmap_chunk == 0)
    return TRUE;
  if (!target_open (&t, fd, path, O_RDONLY, error))
    return FALSE;
  chunks = (sb->data_size + sb->bitmap_chunk - 1) / sb->bitmap_chunk;
  buf = aligned_block ();
  /* block by block (O_DIRECT: whole aligned blocks); bits past the last
   * chunk are not the data's */
  for (guint64 off = 0; off < sb->bitmap_bytes && bit < chunks; off += VB_SB_SIZE)
    {
      gssize n;
      do
        n = pread (t.fd, buf, VB_SB_SIZE, VB_BITMAP_OFFSET + off);
      while (n < 0 && errno == EINTR);
      if (n != VB_SB_SIZE)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       _ ("'%s': cannot read the bitmap at %" PRIu64 ": %s"), t.label,
                       VB_BITMAP_OFFSET + off, n < 0 ? g_strerror (errno) : "short read");
          return FALSE;
        }
      for (guint i = 0; i < VB_SB_SIZE && bit < chunks; i++, bit += 8)
        {
          guint8 byte = buf[i];
          if (chunks - bit < 8)
            byte &= (guint8) ((1u << (chunks - bit)) - 1);
          *dirty += (guint64) __builtin_popcount (byte);
        }
    }
  return TRUE;
}

gboolean
vb_superblock_write (int fd, const char *path, const VbSuperblock *sb, GError **error)
{
  g_auto (Target) t = { -1, FALSE, NULL };
  g_autoptr (guint8) buf = NULL;
  gssize n;

  g_return_val_if_fail (fd >= 0 || path != NULL, FALSE);
  g_return_val_if_fail (sb != NULL, FALSE);

  if (!target_open (&t, fd, path, O_WRONLY, error))
    return FALSE;
  buf = aligned_block ();
  vb_superblock_encode (sb, buf);
  do
    n = pwrite (t.fd, buf, VB_SB_SIZE, VB_SB_OFFSET);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    {
      int errsv = errno;

      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("'%s': cannot write the superblock: %s"),
                   t.label, g_strerror (errsv));
      return FALSE;
    }
  if (n != VB_SB_SIZE)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("'%s': short write of the superblock (%"
                      "zd"
                      " of %d bytes)"),
                   t.label, n, VB_SB_SIZE);
      return FALSE;
    }
  if (fdatasync (t.fd) != 0)
    {
      int errsv = errno;

      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("'%s': cannot flush the superblock: %s"),
                   t.label, g_strerror (errsv));
      return FALSE;
    }
  return TRUE;
}

/* Views for people and scripts. */

const char *
vb_role_state_to_string (VbRoleState s)
{
  switch (s)
    {
    case VB_ROLE_EMPTY:
      return "empty";
    case VB_ROLE_IN_SYNC:
      return "in-sync";
    case VB_ROLE_FAULTY:
      return "faulty";
    case VB_ROLE_REBUILDING:
      return "rebuilding";
    case VB_ROLE_MISSING:
      return "missing";
    }
  return "unknown";
}

static int
compare_keys (const void *a, const void *b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

void
vb_superblock_set_attributes (VbSuperblock *sb, GHashTable *attributes)
{
  guint n = 0;
  g_autofree const char **keys = (const char **) g_hash_table_get_keys_as_array (attributes, &n);
  g_autoptr (GString) s = g_string_new (NULL);

  qsort (keys, n, sizeof *keys, compare_keys);
  for (guint i = 0; i < n; i++)
    g_string_append_printf (s, "%s=%s\n", keys[i],
                            (char *) g_hash_table_lookup (attributes, keys[i]));
  if (s->len >= sizeof sb->attributes)
    g_string_truncate (s, sizeof sb->attributes - 1);
  memcpy (sb->attributes, s->str, s->len + 1);
}
