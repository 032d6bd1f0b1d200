/* Backend "kernel": what its device-mapper part (backend-kernel.c) and its
 * md part (backend-kernel-md.c) share. */
#pragma once

#include "backend.h"
#include "superblock.h"

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
void vb_kernel_detach_all (GPtrArray *loops);

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

/* An md array node "/dev/md_vbINSTANCE_HEX16" vblk made. */
gboolean vb_kernel_md_node_owner (const char *node, VbNodeOwner *owner);

/* The md part. Block nodes are "/dev/md_vb…". */
gboolean vb_kernel_md_available (char **reason);
gboolean vb_kernel_md_is_node (const char *block_device);
char *vb_kernel_md_start (const VbBackendRequest *request, GError **error);
gboolean vb_kernel_md_stop (const char *block_device, const char *instance, const char *uuid,
                            GError **error);
gboolean vb_kernel_md_update (const char *block_device, const VbBackendRequest *request,
                              GError **error);
/* Arrays of @instance running in the kernel (VbBackendInstance*, appended
 * to @found); each gets its monitor again. */
void vb_kernel_md_scan (const char *instance, GPtrArray *found);
/* The engine-device calls of backend.h, for md arrays; any other node
 * (device-mapper) finds no array: FALSE, -ENOTSUP, -ESRCH or nothing. */
gboolean vb_kernel_md_component_status (const char *block_device, guint component, gboolean *faulty,
                                        gboolean *rebuilding, guint64 *errors);
gboolean vb_kernel_md_component_missing (const char *block_device, guint component);
gboolean vb_kernel_md_lost_data (const char *block_device);
gboolean vb_kernel_md_set_faulty (const char *block_device, guint component, GError **error);
void vb_kernel_md_release (const char *block_device, guint component);
gboolean vb_kernel_md_check (const char *block_device, gboolean repair, guint64 *job,
                             GError **error);
gboolean vb_kernel_md_cancel_job (const char *block_device, guint64 job, GError **error);
gboolean vb_kernel_md_readd (const char *block_device, guint slot, const char *path,
                             const char *uuid, GError **error);
void vb_kernel_md_set_spares (const char *block_device, guint n, const char *const *paths,
                              const char *const *uuids);
extern const VbEngineDeviceOps vb_kernel_md_ops;

G_END_DECLS
