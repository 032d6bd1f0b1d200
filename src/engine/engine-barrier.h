/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The write barrier: writes hold it shared from their start to their end;
 * a job's step (copying one unit of a resync or rebuild), a spare's install
 * and a component's release close it, wait for the writes in flight, and
 * hold new ones until it opens. A write on a serving thread never blocks
 * on it: it waits as a ring operation, run again when the barrier opens.
 * (Not a GRWLock: an asynchronous write enters on one thread and may leave
 * on another, and a waiting one must not hold its thread.) */
#pragma once

#include "engine-ring.h"

#include <glib.h>

typedef struct _EngineBarrierWaiter EngineBarrierWaiter;

struct _EngineBarrierWaiter {
  VbRingOp op; /* run on @ring when the barrier opens, entered */
  VbRing *ring;
  EngineBarrierWaiter *next;
};

typedef struct {
  GMutex lock;
  GCond cond;
  guint writers;
  gboolean closed;
  EngineBarrierWaiter *waiting;
} EngineBarrier;

void engine_barrier_init (EngineBarrier *b);
void engine_barrier_clear (EngineBarrier *b);

/* TRUE: entered. FALSE: closed; @w's operation runs on its ring once it
 * opens, entered on its behalf by then (a job closing it again at once
 * cannot keep a waiting write out for ever). */
gboolean engine_barrier_try_enter (EngineBarrier *b, EngineBarrierWaiter *w);
void engine_barrier_leave (EngineBarrier *b);

/* Closes it (after any other closer opened it again) and waits until no
 * write is in flight; never on a serving thread. */
void engine_barrier_close (EngineBarrier *b);
void engine_barrier_open (EngineBarrier *b);
