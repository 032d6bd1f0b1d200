/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Backend "kernel", device-mapper part: the vblk superblocks of a linear
 * table (backend-kernel-dm-meta.c). */
#pragma once

#include "backend.h"
#include "superblock.h"

G_BEGIN_DECLS

/* The vblk superblocks of a linear table (backend-kernel-dm-meta.c),
 * through the block nodes the table maps (@nodes, in slot order). check:
 * reads them and applies the rules of a device with one copy of its data;
 * @grown: components appended online are new slots. *@table gets the role
 * table to write. write: the superblocks say running (events + 1, not
 * clean). stop: every node of the device says clean (events + 1). found:
 * whether a component (by its path) carries a superblock of the device. */
gboolean vb_kernel_dm_meta_found (const VbBackendRequest *request);
gboolean vb_kernel_dm_meta_check (const VbBackendRequest *request, GPtrArray *nodes, gboolean grown,
                                  VbSuperblock *table, GError **error);
gboolean vb_kernel_dm_meta_write (const VbBackendRequest *request, GPtrArray *nodes,
                                  VbSuperblock *table, GError **error);
void vb_kernel_dm_meta_stop (const char *device_name, const char *uuid, GPtrArray *nodes);

G_END_DECLS
