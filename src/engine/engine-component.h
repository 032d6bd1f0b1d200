/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine's bottom layer: one component — opened, read, written,
 * flushed, trimmed, let go of — and the moment it turns faulty. Calls
 * nothing above it: what a failure sets off goes up through
 * VbEngine.component_failed. */
#pragma once

#include "engine-report.h"
#include "engine-state.h"

/* Opens slot @c from @source (or takes the fd an engine being replaced
 * hands over); a missing one starts faulty. Raises *@align to what its
 * I/O needs. */
gboolean engine_component_open (Component *c, const VbEngineSource *source,
                                const VbComponentInfo *info, gboolean read_only, guint32 *align,
                                GError **error);
void engine_component_close (Component *c);

/* I/O on one component outside io_uring (metadata, sync jobs); 0 or -errno.
 * Buffers are aligned for O_DIRECT by the callers. */
int engine_component_pread (Component *c, void *buf, guint64 length, guint64 offset);
int engine_component_pwrite (Component *c, const void *buf, guint64 length, guint64 offset);
int engine_component_flush (Component *c);
/* Discard (advisory) or write zeroes (@zero: emulated where it cannot). */
int engine_component_trim (Component *c, guint64 length, guint64 offset, gboolean zero);
/* Of @len bytes of its data area from @at: TRUE and the length of the
 * hole there (reads give zeroes: a hole of a file opened O_DIRECT, or what
 * a device served in place says is one), or FALSE and a run of data, at
 * least the first block (a block device, a buffered file, an lseek that
 * failed: data is never wrong). */
gboolean engine_component_hole (Component *c, guint64 at, guint64 len, guint64 *run);
/* Points its fd at /dev/null: the number stays taken, the file is let go
 * (FALSE: /dev/null could not be opened, nothing changed). */
gboolean engine_component_let_go (Component *c);
/* Faulty component @i let go under the barrier (a disk going away): not
 * on an I/O thread. TRUE when it was let go by this call. */
gboolean engine_component_release (VbEngine *e, guint i, char **uuid);

/* An I/O on component @i failed with @err: counted, and a component of a
 * redundant device turns faulty (once; then VbEngine.component_failed). */
void engine_component_failed (VbEngine *e, guint i, int err);
/* Every slot healthy and in sync. */
gboolean engine_every_leg_readable (VbEngine *e);
