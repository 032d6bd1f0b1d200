/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Wiping vblk's metadata off a disk (Manager.Wipe, vbmgr wipe): its
 * superblock and write-intent bitmap, and mdadm's 1.x superblock when
 * asked, so that blkid, udev and vbmgr examine see nothing there. */
#pragma once

#include "vb-state.h"

G_BEGIN_DECLS

/* Blocking (a worker thread). Refuses a component of a device in @state
 * that is started (its UUID in @started) always, one of a stopped device
 * unless @force — by path or by the superblock's device UUID; refuses a
 * block device in use (O_EXCL). Sets *@erased to what went ("vblk
 * superblock", "bitmap (N bytes)", "md superblock"). */
gboolean vb_wipe (const char *path, const VbState *state, GHashTable *started, gboolean force,
                  gboolean md, char ***erased, GError **error);

G_END_DECLS
