/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Opening a component's path: only a regular file or a block device is
 * ever opened for I/O, and its type is known first without blocking
 * (O_PATH and fstat: a FIFO, socket, directory or character device is
 * refused before an open that could wait on it or act on it). */
#pragma once

#include <glib.h>
#include <sys/stat.h>

G_BEGIN_DECLS

typedef enum {
  VB_OPEN_WRITE = 1 << 0,     /* O_RDWR (default O_RDONLY) */
  VB_OPEN_DIRECT = 1 << 1,    /* O_DIRECT where the file system allows it */
  VB_OPEN_EXCLUSIVE = 1 << 2, /* a block device O_EXCL: the kernel's claim */
} VbOpenFlags;

/* "a FIFO (named pipe)", "a directory", ... for @mode. */
const char *vb_file_type_name (mode_t mode);

/* The type of @path without opening it for I/O (never blocks on a FIFO
 * or a device's open): FALSE with errno set when it cannot be looked at,
 * and ENOTBLK when it is neither a regular file nor a block device. */
gboolean vb_stat_component (const char *path, struct stat *st);

/* Opens @path: a regular file or a block device only (ENOTBLK
 * otherwise), close-on-exec, never a controlling terminal. Returns the fd,
 * or -1 with errno set; *@direct (may be NULL) says whether O_DIRECT took. */
int vb_open_component (const char *path, VbOpenFlags flags, gboolean *direct);

/* Sets @error for a failed vb_stat_component or vb_open_component of
 * component @path (errno @errsv): VB_ERROR_NOT_FOUND, VB_ERROR_BUSY,
 * VB_ERROR_INVALID_ARGUMENT for the wrong type, else VB_ERROR_FAILED. */
void vb_component_open_error (GError **error, const char *path, int errsv);

G_END_DECLS
