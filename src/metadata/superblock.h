/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The native vblk superblock: its in-memory form (used by every metadata
 * handler), its 4096-byte on-disk encoding (layout documented at the top of
 * superblock.c, offsets named below), and reading/writing it on a
 * component. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* Component layout (all little-endian):
 *   0 .. 4 KiB             untouched (boot sector, other tools' labels)
 *   VB_SB_OFFSET           superblock, VB_SB_SIZE bytes
 *   VB_BITMAP_OFFSET       write-intent bitmap, bitmap_bytes long
 *   data_offset            data area */
#define VB_SB_OFFSET 4096
#define VB_SB_SIZE 4096
#define VB_BITMAP_OFFSET 8192
#define VB_DATA_OFFSET_DEFAULT (1024 * 1024)
#define VB_SB_MAX_ROLES 64
#define VB_SB_ATTR_MAX 2048 /* attribute text incl. NUL */

#define VB_SB_FEATURE_BITMAP (1u << 0)
/* events_cleared is recorded: a superblock written before it existed has
 * this bit clear, and then no copy older than it is trusted (see
 * assembly.h) */
#define VB_SB_FEATURE_EVENTS_CLEARED (1u << 1)

typedef enum {
  VB_ROLE_EMPTY = 0,
  VB_ROLE_IN_SYNC,
  VB_ROLE_FAULTY,
  VB_ROLE_REBUILDING,
  VB_ROLE_MISSING
} VbRoleState;

#define VB_SB_ROLE_SPARE (-1)

typedef struct {
  char format[8];       /* the handler that read it: "vblk", "md1" */
  guint32 version;      /* 1 */
  guint32 features;     /* VB_SB_FEATURE_BITMAP, VB_SB_FEATURE_EVENTS_CLEARED */
  char device_uuid[37]; /* canonical text UUID */
  char device_name[65];
  char component_uuid[37];
  gint32 role; /* slot 0..n_roles-1, or VB_SB_ROLE_SPARE */
  char driver[33];
  char attributes[VB_SB_ATTR_MAX]; /* "key=value\n" lines, sorted by key */
  guint64 events;
  /* the events of the superblock write that came before the last clearing
   * of bitmap bits: a copy of a component with fewer events may miss
   * writes the bitmap no longer records (md's events_cleared); 0 without
   * VB_SB_FEATURE_EVENTS_CLEARED */
  guint64 events_cleared;
  gboolean clean;         /* TRUE: stopped cleanly, no write in flight */
  guint64 ctime, utime;   /* µs since the epoch */
  guint64 data_offset;    /* bytes, multiple of 4096, >= VB_BITMAP_OFFSET + bitmap_bytes */
  guint64 data_size;      /* bytes of the data area the device uses on this component */
  guint64 bitmap_chunk;   /* bytes per bit, power of two >= 64 KiB; 0 = no bitmap */
  guint32 bitmap_bytes;   /* on-disk bytes of the bitmap area, multiple of 4096 */
  guint64 rebuild_offset; /* role REBUILDING: data bytes already copied (resume point) */
  guint32 n_roles;        /* slots of the device, 1..VB_SB_MAX_ROLES */
  struct {
    char uuid[37]; /* "" for a slot with no known component */
    guint8 state;  /* VbRoleState */
  } roles[VB_SB_MAX_ROLES];
} VbSuperblock;

/* On-disk encoding: byte offsets inside the VB_SB_SIZE block (the layout
 * comment at the top of superblock.c says what each one holds). UUIDs are
 * 16 binary bytes, strings NUL-terminated and zero-padded, reserved bytes
 * zero. */
#define VB_SB_MAGIC "VBLKSB\r\n"
#define VB_SB_MAGIC_LEN 8
#define VB_SB_UUID_LEN 16
#define VB_SB_OFF_MAGIC 0
#define VB_SB_OFF_VERSION 8
#define VB_SB_OFF_FEATURES 12
#define VB_SB_OFF_CRC 16
#define VB_SB_OFF_RESERVED0 20 /* 4 bytes */
#define VB_SB_OFF_DEVICE_UUID 24
#define VB_SB_OFF_COMPONENT_UUID 40
#define VB_SB_OFF_ROLE 56
#define VB_SB_OFF_N_ROLES 60
#define VB_SB_OFF_EVENTS 64
#define VB_SB_OFF_CTIME 72
#define VB_SB_OFF_UTIME 80
#define VB_SB_OFF_DATA_OFFSET 88
#define VB_SB_OFF_DATA_SIZE 96
#define VB_SB_OFF_BITMAP_CHUNK 104
#define VB_SB_OFF_BITMAP_BYTES 112
#define VB_SB_OFF_CLEAN 116
#define VB_SB_OFF_RESERVED1 117 /* 3 bytes */
#define VB_SB_OFF_REBUILD_OFFSET 120
#define VB_SB_OFF_DEVICE_NAME 128 /* 65 bytes */
#define VB_SB_OFF_DRIVER 193      /* 33 bytes */
#define VB_SB_OFF_RESERVED2 226   /* 6 bytes */
#define VB_SB_OFF_ROLES 232       /* VB_SB_MAX_ROLES entries of VB_SB_ROLE_ENTRY */
#define VB_SB_ROLE_ENTRY 17       /* uuid (16), state (1) */
#define VB_SB_OFF_ATTRIBUTES 1320 /* VB_SB_ATTR_MAX bytes */
#define VB_SB_OFF_EVENTS_CLEARED 3368
#define VB_SB_OFF_RESERVED3 3376 /* to the end of the block */

void vb_superblock_encode (const VbSuperblock *sb, guint8 out[VB_SB_SIZE]); /* sets magic, CRC */

/* Validates everything: magic ("no vblk superblock" -> VB_ERROR_NOT_FOUND), then CRC
 * ("superblock checksum mismatch (stored X, computed Y)"), version, NUL-terminated strings,
 * UUID syntax, role range, n_roles, states, offsets/alignment/bitmap fitting before data,
 * role==slot entry consistent (roles[role].uuid == component_uuid unless spare),
 * events_cleared <= events (and 0 without its feature bit).
 * Everything but missing magic -> VB_ERROR_INVALID_ARGUMENT, message naming the field.
 * Uses the first VB_SB_SIZE bytes of @buf. */
gboolean vb_superblock_decode (const guint8 *buf, gsize len, VbSuperblock *sb, GError **error);

/* fd or path (@fd < 0: @path is opened here); O_DIRECT-safe aligned buffers;
 * write = pwrite at VB_SB_OFFSET + fdatasync. Errors are prefixed with the path
 * ("'/srv/a.img': superblock checksum mismatch ..."). A component shorter than
 * VB_SB_OFFSET + VB_SB_SIZE is VB_ERROR_NOT_FOUND "no vblk superblock (too small)". */
gboolean vb_superblock_read (int fd, const char *path, VbSuperblock *sb, GError **error);
/* How many of the data's chunks the write-intent bitmap of @sb (read from
 * @fd or @path, as above) marks dirty: 0 without a bitmap. */
gboolean vb_superblock_count_dirty (int fd, const char *path, const VbSuperblock *sb,
                                    guint64 *dirty, GError **error);
gboolean vb_superblock_write (int fd, const char *path, const VbSuperblock *sb, GError **error);

/* The attributes as the superblock keeps them: "key=value\n" lines, sorted
 * by key (cut at VB_SB_ATTR_MAX). */
void vb_superblock_set_attributes (VbSuperblock *sb, GHashTable *attributes);

/* "in-sync","faulty","rebuilding","missing","empty" ("unknown" otherwise) */
const char *vb_role_state_to_string (VbRoleState s);
char *vb_superblock_to_text (const VbSuperblock *sb); /* mdadm --examine-like */
JsonNode *vb_superblock_to_json (const VbSuperblock *sb);

G_END_DECLS
