/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What vblkd does around boot: the initramfs's vblkd, which starts only the
 * devices the root file system needs, and the takeover by the vblkd of the
 * real root (mdmon --takeover's part for vblk). */
#pragma once

#include "vb-state.h"

G_BEGIN_DECLS

/* RUN_DIR/vblkd.pid: this vblkd's, for the next one's takeover. */
gboolean vb_boot_write_pid (const char *run_dir, GError **error);
/* Removes it when it still names this process. */
void vb_boot_remove_pid (const char *run_dir);

/* Another vblkd serving @run_dir (the initramfs's, its /run moved into the
 * real root) is asked to leave (SIGUSR1: it leaves the devices the kernel
 * or a survivable backend runs, as at any stop, but does not stay for the
 * ones in use as a SIGTERM's stop does) and waited for, at most
 * @timeout_ms. TRUE when there was none or it left; FALSE (error set)
 * when it is still there. */
gboolean vb_boot_takeover (const char *run_dir, guint timeout_ms, GError **error);

/* The initramfs: only the devices named in @names (comma separated) and
 * the devices they are built on are to start; every other device of
 * @state is marked stopped (in the initramfs's own copy of the state).
 * FALSE when a name is no device of @state. */
gboolean vb_boot_keep_only (VbState *state, const char *names, GError **error);

/* argv[0] starts with '@': systemd's final killing spree spares a root
 * storage daemon so marked (as it spares mdmon). */
void vb_boot_mark_root_storage (char **argv);

G_END_DECLS
