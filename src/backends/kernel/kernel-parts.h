/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Backend "kernel" is two backends behind one name (kept for state.json
 * and the D-Bus API): md (backend-kernel-md.c and md-*.c) for raid0,
 * raid1 and raid10, and device-mapper (backend-kernel-dm.c) for window
 * and linear. backend-kernel.c sends each call to its part. */
#pragma once

#include "backend.h"

G_BEGIN_DECLS

extern const VbBackend vb_kernel_md_backend;
extern const VbBackend vb_kernel_dm_backend;
/* What a running md array offers (vb_kernel_md_backend.engine). */
extern const VbEngineDeviceOps vb_kernel_md_ops;

/* The drivers each part runs. */
gboolean vb_kernel_md_runs (const VbDriver *driver);
gboolean vb_kernel_dm_runs (const VbDriver *driver);
/* Block nodes of md arrays are "/dev/md_vb…"; every other node of the
 * kernel backend is device-mapper's. */
gboolean vb_kernel_md_is_node (const char *block_device);

G_END_DECLS
