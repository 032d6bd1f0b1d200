/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Handler md1: mdadm 1.x superblocks built here byte by byte as
 * linux/raid/md_p.h lays them out (checksum as md computes it), read at
 * each version's place (1.2 at 4 KiB, 1.1 at 0, 1.0 near the end) into
 * VbSuperblock; a bad checksum, a wrong version, a faulty member and a
 * blank file are each told apart. No root: files in a temporary folder. */
#include "config.h"

#include "handler-md1.h"
#include "metadata.h"
#include "vb-error.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <linux/raid/md_p.h>
#include <string.h>
#include <unistd.h>

#define OFF(field) offsetof (struct mdp_superblock_1, field)
#define SIZE (16u << 20)

static void
put32 (guint8 *b, gsize off, guint32 v)
{
  for (int i = 0; i < 4; i++)
    b[off + i] = (guint8) (v >> (8 * i));
}

static void
put64 (guint8 *b, gsize off, guint64 v)
{
  put32 (b, off, (guint32) v);
  put32 (b, off + 4, (guint32) (v >> 32));
}

/* md's own way: little-endian words of 256 + 2 * max_dev bytes, folded */
static void
seal (guint8 *b, guint32 max_dev)
{
  guint64 sum = 0;

  put32 (b, OFF (sb_csum), 0);
  for (guint32 i = 0; i < 256 + max_dev * 2; i += 4)
    sum += (guint32) b[i] | (guint32) b[i + 1] << 8 | (guint32) b[i + 2] << 16
           | (guint32) b[i + 3] << 24;
  put32 (b, OFF (sb_csum), (guint32) ((sum & 0xffffffff) + (sum >> 32)));
}

/* A member of a 2-disk raid1 "vmtest", this one dev_number 1 in role 1. */
static void
make (guint8 *b, guint16 own_role)
{
  static const guint8 set_uuid[16] = { 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
                                       0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef };
  static const guint8 dev_uuid[16] = { 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00, 0x11,
                                       0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99 };

  memset (b, 0, 4096);
  put32 (b, OFF (magic), MD_SB_MAGIC);
  put32 (b, OFF (major_version), 1);
  memcpy (b + OFF (set_uuid), set_uuid, 16);
  memcpy (b + OFF (set_name), "host:vmtest", 11);
  put64 (b, OFF (ctime), 1700000000ULL | (123456ULL << 40));
  put32 (b, OFF (level), 1);
  put64 (b, OFF (size), 30720);
  put32 (b, OFF (raid_disks), 2);
  put64 (b, OFF (data_offset), 2048);
  put64 (b, OFF (data_size), 30720);
  put64 (b, OFF (super_offset), 8);
  put32 (b, OFF (dev_number), 1);
  memcpy (b + OFF (device_uuid), dev_uuid, 16);
  put64 (b, OFF (utime), 1700000100ULL);
  put64 (b, OFF (events), 17);
  put64 (b, OFF (resync_offset), G_MAXUINT64);
  put32 (b, OFF (max_dev), 4);
  /* dev_roles: dev 0 role 0, dev 1 own_role, devs 2 and 3 spare */
  b[256] = 0;
  b[257] = 0;
  b[258] = (guint8) own_role;
  b[259] = (guint8) (own_role >> 8);
  b[260] = b[261] = b[262] = b[263] = 0xff;
  seal (b, 4);
}

static char *
file_with (const guint8 *block, guint64 at)
{
  g_autoptr (GError) error = NULL;
  char *path = NULL;
  int fd = g_file_open_tmp ("vblk-md1-XXXXXX", &path, &error);

  g_assert_no_error (error);
  g_assert_cmpint (ftruncate (fd, SIZE), ==, 0);
  if (block)
    g_assert_cmpint (pwrite (fd, block, 4096, at), ==, 4096);
  close (fd);
  return path;
}

static void
test_read_versions (void)
{
  /* 1.2, 1.1 and 1.0 (at (size - 8 KiB) & ~4 KiB) */
  const guint64 places[] = { 4096, 0, (SIZE - 8192) & ~4095ULL };
  guint8 b[4096];

  make (b, 1);
  for (guint i = 0; i < G_N_ELEMENTS (places); i++)
    {
      g_autofree char *path = file_with (b, places[i]);
      g_autoptr (GError) error = NULL;
      VbSuperblock sb;

      g_assert_true (vb_metadata_md1.probe (-1, path));
      g_assert_false (vb_metadata_vblk.probe (-1, path));
      g_assert_true (vb_metadata_md1.read (-1, path, &sb, &error));
      g_assert_no_error (error);
      g_assert_cmpstr (sb.format, ==, "md1");
      g_assert_cmpstr (sb.device_uuid, ==, "12345678-9abc-def0-0123-456789abcdef");
      g_assert_cmpstr (sb.component_uuid, ==, "aabbccdd-eeff-0011-2233-445566778899");
      /* mdadm's "HOST:NAME": the name is vblk's */
      g_assert_cmpstr (sb.device_name, ==, "vmtest");
      g_assert_cmpstr (sb.driver, ==, "raid1");
      g_assert_cmpuint (sb.events, ==, 17);
      g_assert_true (sb.clean);
      g_assert_cmpuint (sb.data_offset, ==, 1 << 20);
      g_assert_cmpuint (sb.data_size, ==, 30720 * 512);
      g_assert_cmpuint (sb.ctime, ==, 1700000000ULL * G_USEC_PER_SEC + 123456);
      g_assert_cmpuint (sb.n_roles, ==, 2);
      g_assert_cmpint (sb.role, ==, 1);
      g_assert_cmpuint (sb.roles[0].state, ==, VB_ROLE_IN_SYNC);
      g_assert_cmpuint (sb.roles[1].state, ==, VB_ROLE_IN_SYNC);
      g_assert_cmpstr (sb.roles[1].uuid, ==, sb.component_uuid);
      g_assert_nonnull (strstr (sb.attributes, "metadata=md1\n"));
      g_assert_nonnull (strstr (sb.attributes, "bitmap=none\n"));
      g_assert_nonnull (strstr (sb.attributes, "data_offset=1048576\n"));
      g_assert_nonnull (strstr (sb.attributes, "data_size=15728640\n"));
      /* where it was found */
      g_assert_nonnull (strstr (sb.attributes, i == 0   ? "md_version=1.2\n"
                                               : i == 1 ? "md_version=1.1\n"
                                                        : "md_version=1.0\n"));
      g_unlink (path);
    }
}

static void
test_refusals (void)
{
  guint8 b[4096];
  g_autoptr (GError) error = NULL;
  VbSuperblock sb;
  char *path;

  /* a bad checksum: found, and refused naming it */
  make (b, 1);
  b[OFF (events)] ^= 1;
  path = file_with (b, 4096);
  g_assert_true (vb_metadata_md1.probe (-1, path));
  g_assert_false (vb_metadata_md1.read (-1, path, &sb, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "checksum mismatch"));
  g_assert_nonnull (strstr (error->message, path));
  g_clear_error (&error);
  g_unlink (path);
  g_free (path);

  /* major version 2, sealed correctly */
  make (b, 1);
  put32 (b, OFF (major_version), 2);
  seal (b, 4);
  path = file_with (b, 4096);
  g_assert_false (vb_metadata_md1.read (-1, path, &sb, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "major version 2"));
  g_clear_error (&error);
  g_unlink (path);
  g_free (path);

  /* a name with a byte that is not text (fuzz-md1's first find: it went
   * on to D-Bus), sealed correctly: refused, naming the field */
  make (b, 1);
  b[OFF (set_name) + 6] = 0xff;
  seal (b, 4);
  path = file_with (b, 4096);
  g_assert_false (vb_metadata_md1.read (-1, path, &sb, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "set_name: character 0xff is not allowed"));
  g_clear_error (&error);
  g_unlink (path);
  g_free (path);

  /* this member marked faulty */
  make (b, MD_DISK_ROLE_FAULTY);
  path = file_with (b, 4096);
  g_assert_false (vb_metadata_md1.read (-1, path, &sb, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "faulty"));
  g_clear_error (&error);
  g_unlink (path);
  g_free (path);

  /* a spare: read, role spare, its slots' states from the others */
  make (b, MD_DISK_ROLE_SPARE);
  path = file_with (b, 4096);
  g_assert_true (vb_metadata_md1.read (-1, path, &sb, &error));
  g_assert_no_error (error);
  g_assert_cmpint (sb.role, ==, VB_SB_ROLE_SPARE);
  g_assert_cmpuint (sb.roles[0].state, ==, VB_ROLE_IN_SYNC);
  g_assert_cmpuint (sb.roles[1].state, ==, VB_ROLE_MISSING);
  g_unlink (path);
  g_free (path);

  /* blank: not found, and nobody's */
  path = file_with (NULL, 0);
  g_assert_false (vb_metadata_md1.probe (-1, path));
  g_assert_false (vb_metadata_md1.read (-1, path, &sb, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_NOT_FOUND);
  g_unlink (path);
  g_free (path);
}

/* A blank component joining as a spare: the member's superblock with its
 * own UUID, a free role entry marked spare, valid checksum. */
static void
test_write_spare (void)
{
  guint8 b[4096];
  g_autoptr (GError) error = NULL;
  g_autofree char *member = NULL, *blank = NULL, *small = NULL;
  VbSuperblock sb, spare;
  guint32 next = 0;
  int fd;

  make (b, 1);
  member = file_with (b, 4096);
  blank = file_with (NULL, 0);
  g_assert_true (vb_md1_write_spare (member, "1.2", blank, "01234567-89ab-cdef-0123-456789abcdef",
                                     0, &next, &error));
  g_assert_no_error (error);
  g_assert_true (vb_metadata_md1.read (-1, member, &sb, NULL));
  g_assert_true (vb_metadata_md1.read (-1, blank, &spare, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (spare.device_uuid, ==, sb.device_uuid);
  g_assert_cmpstr (spare.component_uuid, ==, "01234567-89ab-cdef-0123-456789abcdef");
  g_assert_cmpint (spare.role, ==, VB_SB_ROLE_SPARE);
  g_assert_cmpuint (spare.events, ==, sb.events);
  g_assert_cmpuint (spare.data_offset, ==, sb.data_offset);
  g_assert_cmpuint (spare.data_size, ==, sb.data_size);
  /* a new entry after the member's four: device number 4 */
  g_assert_cmpuint (next, ==, 5);
  /* the members' roles are untouched */
  g_assert_cmpuint (spare.roles[0].state, ==, VB_ROLE_IN_SYNC);
  g_assert_cmpuint (spare.roles[1].state, ==, VB_ROLE_IN_SYNC);

  /* too small for the data: refused, nothing written */
  small = file_with (NULL, 0);
  fd = open (small, O_RDWR);
  g_assert_cmpint (ftruncate (fd, 4 << 20), ==, 0);
  close (fd);
  g_assert_false (vb_md1_write_spare (member, "1.2", small, "01234567-89ab-cdef-0123-456789abcdef",
                                      0, NULL, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "too small for the array"));
  g_clear_error (&error);
  g_assert_false (vb_metadata_md1.probe (-1, small));
  g_assert_false (vb_md1_write_spare (member, "1.2", blank, "not-a-uuid", 0, NULL, &error));
  g_assert_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT);
  g_unlink (member);
  g_unlink (blank);
  g_unlink (small);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/md1/read-versions", test_read_versions);
  g_test_add_func ("/md1/refusals", test_refusals);
  g_test_add_func ("/md1/write-spare", test_write_spare);
  return g_test_run ();
}
