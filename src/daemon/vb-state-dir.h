/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The state directory of a vblkd: the lock that keeps it to one vblkd, its
 * instance id (the tag of every block node it makes), and the desired
 * state checked as loaded. main.c's start-up uses these; --takeover opens
 * the lock's file before the vblkd it takes over from leaves and locks it
 * after. */
#pragma once

#include <glib.h>

#include "vb-state.h"

G_BEGIN_DECLS

/* Drivers and attributes of a loaded state checked as CreateDevice would
 * check them, and the attributes resolved in place. */
gboolean vb_state_dir_check (VbState *state, GError **error);
/* The file the state dir is locked by (STATE_DIR/.lock; the directory
 * itself when it is read-only): an fd, or -1 and errno. */
int vb_state_dir_open_lock (const char *dir);
/* flock of @fd (closed on failure; -1 fails with errno's message); @wait:
 * up to 15 s for a vblkd that leaves. The fd, or -1 and @error. */
int vb_state_dir_lock (const char *dir, int fd, gboolean wait, GError **error);
/* STATE_DIR/instance-id, made (random, durable) where there is none. */
char *vb_state_dir_instance_id (const char *dir, GError **error);

G_END_DECLS
