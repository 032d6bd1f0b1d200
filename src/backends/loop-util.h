/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Loop devices and udev, for the backends that make loop devices: loop
 * (a node per device) and kernel (loop devices under device-mapper for
 * regular-file components). */
#pragma once

#include <glib.h>
#include <libudev.h>
#include <linux/loop.h>
#include <sys/types.h>

G_BEGIN_DECLS

/* Tags (lo_file_name) are "vblk:INSTANCE:UUID" and a suffix: ":engine" for
 * a node the engine serves, ":dm" for a component of a device-mapper
 * device of backend kernel. */
#define VB_LOOP_TAG_PREFIX "vblk:"
#define VB_LOOP_TAG_KERNEL_SUFFIX ":dm"

/* Makes a loop device over @backing_fd with @config (its fd and name are
 * set here, the name to @tag), from the very ioctl that creates it, and
 * waits until udev has processed it. Direct I/O is dropped when the
 * backing file cannot do it. */
char *vb_loop_attach (int backing_fd, const struct loop_config *config, const char *tag,
                      const char *what, GError **error);
/* The name (tag) of an attached loop device; NULL when not attached. */
char *vb_loop_get_name (const char *block_device);

/* The device and inode of an attached loop device's backing file. */
gboolean vb_loop_get_backing (const char *block_device, guint64 *device, guint64 *inode);

gboolean vb_udevd_running (void);
/* udev's block disk events, watched from before a node is made until
 * udevd has processed it: vb_udev_watch_begin() before the kernel is
 * asked, vb_udev_watch_end() after. NULL (nothing to wait for) without
 * udevd. */
typedef struct _VbUdevWatch VbUdevWatch;
VbUdevWatch *vb_udev_watch_begin (void);
/* Blocks until udevd announced @action for @devnum (10 s at most; not at
 * all for devnum 0 or action NULL: the node was not made), then frees
 * @watch (may be NULL). */
void vb_udev_watch_end (VbUdevWatch *watch, dev_t devnum, const char *action);
/* The device number of block node @node, or 0. */
dev_t vb_devnum_of (const char *node);
/* "/dev/NAME" of block device @devnum, from sysfs (NULL: none). */
char *vb_node_of_devnum (dev_t devnum);

G_END_DECLS
