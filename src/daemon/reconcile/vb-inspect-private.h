/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What vb-inspect.c and vb-inspect-identities.c share: the marks of
 * paths that stopped answering, and the looks' time limit. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Whether a look at @path was given up on and has not ended since
 * (*@since: when it was given up on, monotonic µs). */
gboolean vb_inspect_stalled_since (const char *path, gint64 *since);
/* Marks @path as given up on (@on), or as answering again. */
void vb_inspect_stalled_set (const char *path, gboolean on);
/* @timeout_ms, or the tests' VBLK_TEST_INSPECT_TIMEOUT_MS. */
guint vb_inspect_look_timeout (guint timeout_ms);

G_END_DECLS
