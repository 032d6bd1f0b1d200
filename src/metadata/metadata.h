/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Metadata handlers: how one on-component metadata format is probed, read
 * and written. One file and one const struct per format (handler-*.c); the
 * engine and vbmgr reach a format only through this struct. */
#pragma once

#include <glib.h>

#include "superblock.h"

G_BEGIN_DECLS

typedef struct {
  const char *name; /* "vblk" */
  /* Carries this metadata (magic found). */
  gboolean (*probe) (int fd, const char *path);
  gboolean (*read) (int fd, const char *path, VbSuperblock *sb, GError **error);
  gboolean (*write) (int fd, const char *path, const VbSuperblock *sb, GError **error);
  /* In memory: role @role turns @state, events + 1, utime now. */
  void (*update_role) (VbSuperblock *sb, guint role, VbRoleState state);
  /* Where the metadata block lies on a component, and its codec, for a
   * caller that does its own I/O (the engine, which also reaches
   * components served in process). decode: VB_ERROR_NOT_FOUND when the
   * block carries no such metadata. */
  guint64 block_offset;
  gsize block_size;
  void (*encode) (const VbSuperblock *sb, guint8 *block);
  gboolean (*decode) (const guint8 *block, gsize len, VbSuperblock *sb, GError **error);
} VbMetadataHandler;

/* The handler called @name, or NULL. */
const VbMetadataHandler *vb_metadata_lookup (const char *name);
/* Every handler, NULL-terminated. */
const VbMetadataHandler *const *vb_metadata_handlers (void);

extern const VbMetadataHandler vb_metadata_vblk; /* handler-vblk.c */
extern const VbMetadataHandler vb_metadata_md1;  /* handler-md1.c: mdadm 1.x, read only */

G_END_DECLS
