/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Backend "kernel": what its md part and its device-mapper part share
 * (kernel-util.c): the block nodes under a device, sysfs, the format. */
#pragma once

#include "backend.h"

G_BEGIN_DECLS

/* "vblk:INSTANCE:UUID:dm": the tag of the loop devices under a kernel
 * device (dm table or md array) for its regular-file components. */
char *vb_kernel_loop_tag (const char *instance, const char *uuid);

/* The block devices under the device: a component's own path, or a loop
 * device over a regular file (attached here, tagged @tag; @attached lists
 * them). Components the request marks missing get NULL. */
gboolean vb_kernel_component_nodes (const VbBackendRequest *request, const char *tag,
                                    gboolean read_only, GPtrArray *nodes, GPtrArray *attached,
                                    GError **error);
/* Every loop device tagged @tag. */
GPtrArray *vb_kernel_tagged_loops (const char *tag, const char *instance);
/* Every loop device under a kernel device of @instance whose device
 * (UUID) is not in @live: left by a start that never made its device. */
GPtrArray *vb_kernel_orphan_loops (const char *instance, GHashTable *live);
void vb_kernel_detach_all (GPtrArray *loops);

/* sysfs: @value written to @path (negative errno); @path's text,
 * stripped (NULL when unreadable). */
int vb_kernel_sys_write (const char *path, const char *value);
char *vb_kernel_sys_read (const char *path);
/* The size of block node @block_device in bytes (0: unknown). */
guint64 vb_kernel_node_size (const char *block_device);

/* VbBackend.format of both parts: superblocks for a new device with
 * metadata=vblk (raid0, raid1, raid10 on md, linear on dm), the engine's,
 * so that the device can move between backends. */
gboolean vb_kernel_format (const VbBackendRequest *request, GError **error);
/* Attribute engine=true asks for the engine: TRUE with @reason. */
gboolean vb_kernel_refuses_engine (GHashTable *attributes, char **reason);

G_END_DECLS
