/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The FUSE server: serves a VbBlockOps device as one regular file in a
 * private FUSE mount (for the kernel loop driver to sit on). */
#pragma once

#include <glib.h>

#include "engine-switch.h"

G_BEGIN_DECLS

typedef struct _VbFuseServer VbFuseServer;

/* The source of the vblk FUSE mount holding @path ("vblk:INSTANCE:UUID:engine"),
 * from mountinfo alone (nothing under the mount is touched); NULL when
 * @path is on no such mount. */
char *vb_fuse_source_of (const char *path);

/* Mounts a FUSE file system on @mountpoint (created if missing) holding
 * one file @file_name, its source (mountinfo) @fsname, whose bytes are the
 * device behind @sw; serves it on its own threads until freed. */
VbFuseServer *vb_fuse_server_new (const char *mountpoint, const char *file_name, const char *fsname,
                                  VbEngineSwitch *sw, GError **error);
const char *vb_fuse_server_path (VbFuseServer *server);
/* Unmounts and joins the serving threads. Nothing may hold the file open. */
void vb_fuse_server_free (VbFuseServer *server);

/* The device's size changed: the kernel's cached attributes of the file
 * are dropped and read again, so that its size is the new one (for
 * LOOP_SET_CAPACITY of a loop device on it). 0 or -errno. */
int vb_fuse_server_size_changed (VbFuseServer *server);

/* Ends the kernel's connection (fusectl's abort): whatever still waits
 * on the file gets an error instead of an answer. For a file that could
 * not be let go; FALSE when the connection cannot be reached. */
gboolean vb_fuse_server_abort (VbFuseServer *server);

/* Mount point of @server. */
const char *vb_fuse_server_mountpoint (VbFuseServer *server);

/* Lazily unmounts the FUSE mounts under @dir left by a vblkd that died,
 * all but those in @live (mount point set, may be NULL); returns how many. */
guint vb_fuse_cleanup_stale (const char *dir, GHashTable *live);

G_END_DECLS
