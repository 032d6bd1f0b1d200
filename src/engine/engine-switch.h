/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine switch: what a server (FUSE, NBD, a device stacked on this
 * one) holds instead of an engine, so that the engine under a started
 * device can be replaced while the block node stays — DM's suspend / load
 * / resume at the engine boundary. Requests pass through it to the
 * current engine; a suspend holds new ones and waits for those in flight
 * to drain; the engine is then replaced (or kept, a swap rolled back) and
 * the held requests are released against whichever is current. */
#pragma once

#include <glib.h>

#include "block-ops.h"
#include "engine.h"

G_BEGIN_DECLS

typedef struct _VbEngineSwitch VbEngineSwitch;

VbEngineSwitch *vb_engine_switch_new (VbEngine *engine);
/* Frees the switch and its current engine (cleanly). */
void vb_engine_switch_free (VbEngineSwitch *sw);
/* The current engine. Only the thread that swaps engines may use it
 * without vb_engine_switch_lock: the others hold the lock around it. */
VbEngine *vb_engine_switch_engine (VbEngineSwitch *sw);
void vb_engine_switch_lock (VbEngineSwitch *sw);
void vb_engine_switch_unlock (VbEngineSwitch *sw);

/* Holds new requests and waits until none is in flight: 0, or -ETIMEDOUT
 * after @timeout_ms (the held requests are released again, nothing
 * changed). Then every write completed so far is flushed to the
 * components (a flush later only covers the new engine's writes): -errno
 * when that fails (released again). One suspend at a time. */
int vb_engine_switch_suspend (VbEngineSwitch *sw, guint timeout_ms);
/* While suspended: @engine becomes current; returns the previous one. */
VbEngine *vb_engine_switch_replace (VbEngineSwitch *sw, VbEngine *engine);
/* Releases the held requests; returns how long requests were held (µs). */
gint64 vb_engine_switch_resume (VbEngineSwitch *sw);

extern const VbBlockOps vb_engine_switch_ops;

/* The current engine's size, block size and read-only flag, without
 * entering: never held by a swap, so a serving thread may ask them. */
guint64 vb_engine_switch_size (VbEngineSwitch *sw);
guint32 vb_engine_switch_block_size (VbEngineSwitch *sw);
gboolean vb_engine_switch_read_only (VbEngineSwitch *sw);

/* The asynchronous path: @io enters (while a swap holds requests, it waits
 * as an operation of @ring), goes to the current engine, and leaves as it
 * completes, before its done function runs. */
void vb_engine_switch_submit (VbEngineSwitch *sw, VbRing *ring, VbEngineIo *io);

G_END_DECLS
