/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Handler "md1" (handler-md1.c): what it offers beyond VbMetadataHandler. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The first md superblock of blank component @path (UUID @component_uuid)
 * joining an mdadm array as a spare: a copy of @member's (md @version:
 * "1.0", "1.1", "1.2") with the new device's UUID, a free role-table entry
 * after the role table (device number at least @at_least; the next free one
 * is put in @next, may be NULL), its own offsets and sizes and no recovery
 * in progress. InvalidArgument when @path is too small for the array. */
gboolean vb_md1_write_spare (const char *member, const char *version, const char *path,
                             const char *component_uuid, guint32 at_least, guint32 *next,
                             GError **error);

G_END_DECLS
