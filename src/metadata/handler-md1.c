/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Metadata handler "md1": mdadm's 1.x superblocks (struct mdp_superblock_1
 * of linux/raid/md_p.h), read into vblk's VbSuperblock so that arrays made
 * by `mdadm --create` are examined and listed by Scan like vblk's own.
 * Version 1.2 keeps it 4 KiB from the start of the member, 1.1 at the
 * start, 1.0 at least 8 KiB from the end (4 KiB aligned).
 *
 * md itself keeps these superblocks up to date (events, roles on failure,
 * recovery and re-add) once backend kernel runs the array with md's own
 * metadata; what vblk writes is only the first superblock of a blank
 * component that joins the array as a spare (vb_md1_write_spare), made
 * from a member's as mdadm --add makes it. */
#include "config.h"

#include "handler-md1.h"
#include "metadata.h"
#include "vb-open.h"

#include <glib/gi18n-lib.h>
#include <inttypes.h>

#include "vb-error.h"
#include "vb-report.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/raid/md_p.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define MD1_BLOCK 4096
#define MD1_MAX_DEV ((MD1_BLOCK - 256) / 2)

static guint32
le32 (const guint8 *p)
{
  return (guint32) p[0] | (guint32) p[1] << 8 | (guint32) p[2] << 16 | (guint32) p[3] << 24;
}

static guint64
le64 (const guint8 *p)
{
  return (guint64) le32 (p) | (guint64) le32 (p + 4) << 32;
}

#define OFF(field) offsetof (struct mdp_superblock_1, field)

/* md's calc_sb_1_csum: the little-endian 32-bit words of the first 256 +
 * 2 * max_dev bytes with sb_csum taken as 0, folded to 32 bits. */
static guint32
md1_csum (const guint8 *b, guint32 max_dev)
{
  guint64 sum = 0;
  guint32 size = 256 + max_dev * 2;

  for (guint32 i = 0; i + 4 <= size; i += 4)
    sum += i == OFF (sb_csum) ? 0 : le32 (b + i);
  if (size % 4 == 2)
    sum += (guint32) b[size - 2] | (guint32) b[size - 1] << 8;
  return (guint32) ((sum & 0xffffffff) + (sum >> 32));
}

static void
uuid_text (const guint8 *u, char out[37])
{
  g_snprintf (out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
              u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
              u[14], u[15]);
}

static const char *
driver_of (gint32 level)
{
  switch (level)
    {
    case -1:
      return "linear";
    case 0:
      return "raid0";
    case 1:
      return "raid1";
    case 10:
      return "raid10";
    case 4:
      return "raid4";
    case 5:
      return "raid5";
    case 6:
      return "raid6";
    default:
      return "unknown";
    }
}

static gboolean refuse (GError **error, const char *format, ...) G_GNUC_PRINTF (2, 3);

static gboolean
refuse (GError **error, const char *format, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, format);
  msg = g_strdup_vprintf (format, ap);
  va_end (ap);
  g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, _ ("md 1.x superblock: %s"), msg);
  return FALSE;
}

static gboolean
md1_decode (const guint8 *b, gsize len, VbSuperblock *sb, GError **error)
{
  guint32 max_dev, dev_number, raid_disks, chunk, layout;
  gint32 level;
  guint64 ctime_raw, utime_raw;
  GString *attrs;

  if (len < MD1_BLOCK || le32 (b + OFF (magic)) != MD_SB_MAGIC)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND, _ ("no md 1.x superblock"));
      return FALSE;
    }
  if (le32 (b + OFF (major_version)) != 1)
    return refuse (error, "major version %u, not 1", le32 (b + OFF (major_version)));
  max_dev = le32 (b + OFF (max_dev));
  if (max_dev > MD1_MAX_DEV)
    return refuse (error, "max_dev %u does not fit in %d bytes", max_dev, MD1_BLOCK);
  if (md1_csum (b, max_dev) != le32 (b + OFF (sb_csum)))
    return refuse (error, "checksum mismatch (stored 0x%08x, computed 0x%08x)",
                   le32 (b + OFF (sb_csum)), md1_csum (b, max_dev));
  raid_disks = le32 (b + OFF (raid_disks));
  dev_number = le32 (b + OFF (dev_number));
  if (raid_disks == 0 || raid_disks > VB_SB_MAX_ROLES)
    return refuse (error, "%u raid disks (vblk reads 1 to %d)", raid_disks, VB_SB_MAX_ROLES);
  if (dev_number >= max_dev)
    return refuse (error, "device number %u beyond max_dev %u", dev_number, max_dev);

  memset (sb, 0, sizeof *sb);
  g_strlcpy (sb->format, "md1", sizeof sb->format);
  sb->version = 1;
  sb->features = le32 (b + OFF (feature_map)) & MD_FEATURE_BITMAP_OFFSET ? VB_SB_FEATURE_BITMAP : 0;
  uuid_text (b + OFF (set_uuid), sb->device_uuid);
  {
    /* mdadm names arrays "HOST:NAME"; vblk's name is the NAME */
    char set_name[33] = { 0 };
    const char *colon;
    memcpy (set_name, b + OFF (set_name), 32);
    /* it reaches D-Bus and vbmgr's output, which take text only
     * (fuzz-md1 found bytes that are not UTF-8 passed on) */
    for (const char *c = set_name; *c != '\0'; c++)
      if ((guint8) *c < 0x20 || (guint8) *c > 0x7e)
        return refuse (error, "set_name: character 0x%02x is not allowed", (guint8) *c);
    colon = strrchr (set_name, ':');
    g_strlcpy (sb->device_name, colon ? colon + 1 : set_name, sizeof sb->device_name);
  }
  uuid_text (b + OFF (device_uuid), sb->component_uuid);
  level = (gint32) le32 (b + OFF (level));
  g_strlcpy (sb->driver, driver_of (level), sizeof sb->driver);
  chunk = le32 (b + OFF (chunksize)) * 512;
  layout = le32 (b + OFF (layout));
  /* md keeps its own bitmap, if any: vblk's is off */
  attrs = g_string_new ("metadata=md1\nbitmap=none\n");
  g_string_append_printf (attrs,
                          "data_offset=%" G_GUINT64_FORMAT "\ndata_size=%" G_GUINT64_FORMAT "\n",
                          le64 (b + OFF (data_offset)) * 512, le64 (b + OFF (size)) * 512);
  if (chunk)
    g_string_append_printf (attrs, "chunk_size=%u\n", chunk);
  if (level == 10)
    {
      g_string_append_printf (attrs, "copies=%u\n", layout & 0xff);
      /* md's far (f2 = 0x201) and offset (o2 = 0x10201) layouts are not
       * the near layout vblk computes with: named, so that adopting is
       * refused */
      if ((layout & ~0xffu) != 0x100)
        g_string_append_printf (attrs, "md_layout=0x%x\n", layout);
    }
  g_strlcpy (sb->attributes, attrs->str, sizeof sb->attributes);
  g_string_free (attrs, TRUE);
  sb->events = le64 (b + OFF (events));
  sb->clean = le64 (b + OFF (resync_offset)) == G_MAXUINT64;
  /* 40 bits of seconds, 24 of microseconds */
  ctime_raw = le64 (b + OFF (ctime));
  utime_raw = le64 (b + OFF (utime));
  sb->ctime = (ctime_raw & 0xffffffffffULL) * G_USEC_PER_SEC + (ctime_raw >> 40);
  sb->utime = (utime_raw & 0xffffffffffULL) * G_USEC_PER_SEC + (utime_raw >> 40);
  sb->data_offset = le64 (b + OFF (data_offset)) * 512;
  sb->data_size = le64 (b + OFF (size)) * 512; /* the used size, as vblk's data_size */
  sb->rebuild_offset = le64 (b + OFF (recovery_offset)) * 512;
  sb->n_roles = raid_disks;

  /* dev_roles[dev_number] is each member's role; a role nobody holds is
   * missing */
  for (guint32 r = 0; r < raid_disks; r++)
    sb->roles[r].state = VB_ROLE_MISSING;
  for (guint32 d = 0; d < max_dev; d++)
    {
      guint16 role = (guint16) (b[256 + 2 * d] | b[256 + 2 * d + 1] << 8);
      if (role < raid_disks)
        sb->roles[role].state = VB_ROLE_IN_SYNC;
    }
  {
    guint16 own = (guint16) (b[256 + 2 * dev_number] | b[256 + 2 * dev_number + 1] << 8);
    if (own < raid_disks)
      {
        sb->role = own;
        g_strlcpy (sb->roles[own].uuid, sb->component_uuid, sizeof sb->roles[own].uuid);
        if (le32 (b + OFF (feature_map)) & MD_FEATURE_RECOVERY_OFFSET)
          sb->roles[own].state = VB_ROLE_REBUILDING;
      }
    else if (own == MD_DISK_ROLE_FAULTY)
      return refuse (error, "this member is marked faulty (role 0x%04x)", own);
    else
      sb->role = VB_SB_ROLE_SPARE;
  }
  return TRUE;
}

static guint64
size_of (int fd)
{
  struct stat st;
  guint64 size = 0;

  if (fstat (fd, &st) != 0)
    return 0;
  if (S_ISBLK (st.st_mode))
    return ioctl (fd, BLKGETSIZE64, &size) == 0 ? size : 0;
  return (guint64) st.st_size;
}

/* Tries 1.2 (4 KiB), 1.1 (0) and 1.0 (the end); TRUE when one decodes
 * (with @sb NULL: when one carries md's magic, damaged or not). */
static gboolean
md1_read_fd (int fd, const char *path, VbSuperblock *sb, GError **error)
{
  guint64 size = size_of (fd);
  guint64 offsets[3] = { 4096, 0, 0 };
  guint n = 2;
  void *buf = NULL;
  g_autoptr (GError) first = NULL;

  if (size >= 3 * MD1_BLOCK)
    offsets[n++] = ((size - 8192) & ~(guint64) (MD1_BLOCK - 1));
  if (posix_memalign (&buf, MD1_BLOCK, MD1_BLOCK) != 0)
    g_error ("out of memory");
  for (guint i = 0; i < n; i++)
    {
      g_autoptr (GError) local = NULL;
      if (pread (fd, buf, MD1_BLOCK, offsets[i]) != MD1_BLOCK)
        continue;
      if (sb == NULL)
        {
          if (le32 (buf) != MD_SB_MAGIC)
            continue;
          free (buf);
          return TRUE;
        }
      if (md1_decode (buf, MD1_BLOCK, sb, &local))
        {
          static const char *const versions[] = { "1.2", "1.1", "1.0" };
          gsize len = strlen (sb->attributes);
          g_snprintf (sb->attributes + len, sizeof sb->attributes - len, "md_version=%s\n",
                      versions[i]);
          free (buf);
          return TRUE;
        }
      if (!g_error_matches (local, VB_ERROR, VB_ERROR_NOT_FOUND) && first == NULL)
        first = g_steal_pointer (&local);
    }
  free (buf);
  if (sb == NULL)
    return FALSE;
  if (first)
    {
      g_set_error (error, VB_ERROR, first->code, "%s: %s", path, first->message);
      return FALSE;
    }
  g_set_error (error, VB_ERROR, VB_ERROR_NOT_FOUND, _ ("%s: no md 1.x superblock"), path);
  return FALSE;
}

/* With @sb NULL: a probe (the magic only). */
static gboolean
md1_read (int fd, const char *path, VbSuperblock *sb, GError **error)
{
  gboolean ok;
  int own = -1;

  if (fd < 0)
    {
      /* O_DIRECT: md writes its superblocks past the page cache of the
       * member's node, which would otherwise show an old one */
      own = vb_open_component (path, VB_OPEN_DIRECT, NULL);
      if (own < 0)
        {
          int e = errno;
          g_set_error (error, VB_ERROR, e == ENOENT ? VB_ERROR_NOT_FOUND : VB_ERROR_FAILED,
                       "%s: %s", path, g_strerror (e));
          return FALSE;
        }
      fd = own;
    }
  ok = md1_read_fd (fd, path, sb, error);
  if (own >= 0)
    close (own);
  return ok;
}

/* Where version @version keeps the superblock on a member of @size bytes. */
static guint64
sb_offset_for (const char *version, guint64 size)
{
  if (strcmp (version, "1.2") == 0)
    return 4096;
  if (strcmp (version, "1.1") == 0)
    return 0;
  return (size - 8192) & ~(guint64) (MD1_BLOCK - 1);
}

static gboolean
parse_uuid (const char *text, guint8 out[16])
{
  guint n = 0;

  for (const char *p = text; *p && n < 32; p++)
    {
      if (*p == '-')
        continue;
      if (!g_ascii_isxdigit (*p))
        return FALSE;
      if (n % 2 == 0)
        out[n / 2] = (guint8) (g_ascii_xdigit_value (*p) << 4);
      else
        out[n / 2] |= (guint8) g_ascii_xdigit_value (*p);
      n++;
    }
  return n == 32;
}

static void
put_le32 (guint8 *p, guint32 v)
{
  for (guint i = 0; i < 4; i++)
    p[i] = (guint8) (v >> (8 * i));
}

static void
put_le64 (guint8 *p, guint64 v)
{
  put_le32 (p, (guint32) v);
  put_le32 (p + 4, (guint32) (v >> 32));
}

static int
open_direct (const char *path, int flags)
{
  return vb_open_component (
      path, ((flags & O_ACCMODE) == O_RDONLY ? 0 : VB_OPEN_WRITE) | VB_OPEN_DIRECT, NULL);
}

gboolean
vb_md1_write_spare (const char *member, const char *version, const char *path,
                    const char *component_uuid, guint32 at_least, guint32 *next, GError **error)
{
  guint8 *tmpl = NULL, *block = NULL;
  int tfd = -1, fd = -1;
  guint64 tsize, size, toff, off, data_offset, used;
  guint32 max_dev, features, dev_number;
  VbSuperblock check;
  gboolean ok = FALSE;
  guint8 uuid[16];

  if (!parse_uuid (component_uuid, uuid))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT, _ ("'%s' is not a UUID"),
                   component_uuid);
      return FALSE;
    }
  if (posix_memalign ((void **) &tmpl, MD1_BLOCK, MD1_BLOCK) != 0
      || posix_memalign ((void **) &block, MD1_BLOCK, MD1_BLOCK) != 0)
    g_error ("out of memory");
  tfd = open_direct (member, O_RDONLY);
  fd = open_direct (path, O_RDWR);
  if (tfd < 0 || fd < 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "'%s': %s", tfd < 0 ? member : path,
                   g_strerror (errno));
      goto out;
    }
  tsize = size_of (tfd);
  size = size_of (fd);
  toff = sb_offset_for (version, tsize);
  if (pread (tfd, tmpl, MD1_BLOCK, toff) != MD1_BLOCK
      || !md1_decode (tmpl, MD1_BLOCK, &check, error))
    {
      if (error && *error == NULL)
        g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("'%s': reading its md %s superblock: %s"),
                     member, version, g_strerror (errno));
      else
        g_prefix_error (error, "'%s': ", member);
      goto out;
    }
  data_offset = le64 (tmpl + OFF (data_offset));
  used = le64 (tmpl + OFF (size));
  off = sb_offset_for (version, size);
  if (size < 3 * MD1_BLOCK
      || (strcmp (version, "1.0") == 0 ? (data_offset + used) * 512 > off
                                       : (data_offset + used) * 512 > size))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("'%s': %" PRIu64 " bytes, too small for the array (%" PRIu64
                      " bytes of data from %" PRIu64 ")"),
                   path, size, used * 512, data_offset * 512);
      goto out;
    }

  memcpy (block, tmpl, MD1_BLOCK);
  memcpy (block + OFF (device_uuid), uuid, 16);
  put_le64 (block + OFF (super_offset), off / 512);
  /* 1.0: the bitmap and bad block log lie between the data and the
   * superblock, so the data is what the array uses */
  put_le64 (block + OFF (data_size),
            strcmp (version, "1.0") == 0 ? used : size / 512 - data_offset);
  block[OFF (devflags)] = 0; /* not write-mostly or failfast because a member is */
  put_le64 (block + OFF (recovery_offset), 0);
  features = le32 (block + OFF (feature_map));
  features &= ~(guint32) (MD_FEATURE_RECOVERY_OFFSET | MD_FEATURE_REPLACEMENT
                          | MD_FEATURE_RECOVERY_BITMAP | MD_FEATURE_BAD_BLOCKS);
  put_le32 (block + OFF (feature_map), features);
  /* a new entry after the role table: md writes max_dev as one past the
   * highest device number in use, and an entry 0xffff may be an idle
   * spare's; @at_least skips the numbers handed out since */
  max_dev = le32 (block + OFF (max_dev));
  dev_number = MAX (max_dev, at_least);
  if (dev_number + 1 > MD1_MAX_DEV)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("'%s': the array's role table is full"),
                   member);
      goto out;
    }
  for (guint32 d = max_dev; d <= dev_number; d++)
    block[256 + 2 * d] = block[256 + 2 * d + 1] = 0xff;
  max_dev = dev_number + 1;
  put_le32 (block + OFF (max_dev), max_dev);
  put_le32 (block + OFF (dev_number), dev_number);
  block[256 + 2 * dev_number] = 0xff;
  block[256 + 2 * dev_number + 1] = 0xff;
  put_le32 (block + OFF (sb_csum), md1_csum (block, max_dev));

  /* an empty bad block log, as mdadm leaves it */
  {
    guint16 bb_sectors = (guint16) (block[OFF (bblog_size)] | block[OFF (bblog_size) + 1] << 8);
    gint32 bb_offset = (gint32) le32 (block + OFF (bblog_offset));
    if (bb_sectors && bb_offset)
      {
        gsize len = ((gsize) bb_sectors * 512 + MD1_BLOCK - 1) & ~(gsize) (MD1_BLOCK - 1);
        guint8 *ff = NULL;
        if (posix_memalign ((void **) &ff, MD1_BLOCK, len) != 0)
          g_error ("out of memory");
        memset (ff, 0xff, len);
        if (pwrite (fd, ff, len, (off_t) (off + (gint64) bb_offset * 512)) != (ssize_t) len)
          vb_report (path, VB_REPORT_WARNING, "clearing its bad block log: %s", g_strerror (errno));
        free (ff);
      }
  }
  if (pwrite (fd, block, MD1_BLOCK, off) != MD1_BLOCK || fsync (fd) != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("'%s': writing its md superblock: %s"),
                   path, g_strerror (errno));
      goto out;
    }
  ok = TRUE;
  if (next)
    *next = dev_number + 1;
out:
  if (tfd >= 0)
    close (tfd);
  if (fd >= 0)
    close (fd);
  free (tmpl);
  free (block);
  return ok;
}

static gboolean
md1_probe (int fd, const char *path)
{
  /* a damaged one counts as found: read says what is wrong */
  return md1_read (fd, path, NULL, NULL);
}

static gboolean
md1_write (int fd, const char *path, const VbSuperblock *sb, GError **error)
{
  g_set_error (
      error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
      _ ("%s: md writes md 1.x superblocks itself (backend kernel); vblk writes only a new "
         "spare's"),
      path);
  return FALSE;
}

static void
md1_update_role (VbSuperblock *sb, guint role, VbRoleState state)
{
  g_return_if_fail (role < sb->n_roles && role < VB_SB_MAX_ROLES);
  sb->roles[role].state = state;
  sb->events++;
}

static void
md1_encode (const VbSuperblock *sb, guint8 *block)
{
  /* never called: md1 is not a value of attribute metadata */
  g_return_if_reached ();
}

const VbMetadataHandler vb_metadata_md1 = {
  .name = "md1",
  .probe = md1_probe,
  .read = md1_read,
  .write = md1_write,
  .update_role = md1_update_role,
  .block_offset = 4096,
  .block_size = MD1_BLOCK,
  .encode = md1_encode,
  .decode = md1_decode,
};
