/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* org.vblk.VBlk1.Policy: the policy rules of vblkd on D-Bus (Rules,
 * Directory, Reload, Evaluate), and their loading at start and on SIGHUP. */
#pragma once

#include "vb-bus.h"
#include "vb-policy.h"

G_BEGIN_DECLS

/* Start-up, before the main loop: loads daemon->policy_dir into
 * daemon->policy. A broken directory is logged and vblkd runs with no
 * rules; daemon->policy is never NULL afterwards. */
void vb_policy_dbus_init (VbDaemon *daemon);

/* Exports /org/vblk/VBlk1/Policy on daemon->object_manager. */
void vb_policy_dbus_export (VbDaemon *daemon);

/* Reads daemon->policy_dir again (the SIGHUP path): loaded on a worker
 * thread, swapped in on the main thread. Returns at once; on an error the
 * rules in force stay and the error (FILE:LINE) is logged. Main thread. */
void vb_policy_dbus_reload_sync (VbDaemon *daemon);

/* The rules in force (borrowed; never NULL after vb_policy_dbus_init). A
 * reload replaces it: vb_policy_ref() it to keep it across main loop
 * iterations. Main thread. */
VbPolicy *vb_daemon_policy (VbDaemon *daemon);

/* Drops the exported object (at exit, before the object manager). */
void vb_policy_dbus_shutdown (VbDaemon *daemon);

G_END_DECLS
