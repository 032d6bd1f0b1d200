/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine's data path inside the engine: the request state a
 * VbEngineIo carries (engine-io.c) and what the blocking entry points
 * (engine-io-sync.c) need of it. */
#pragma once

#include "engine-barrier.h"
#include "engine-state.h"

#define IO_BATCH 16 /* pieces of a request in flight at once; a longer one goes in batches */
#define IO_SUBS (IO_BATCH * VB_MAX_COPIES)

typedef struct _EngineIoState EngineIoState;

/* One component I/O of a batch: a piece's copy read or written. */
typedef struct {
  VbRingOp op;
  EngineIoState *st;
  guint8 piece;
  guint8 copy;
  gboolean refused; /* a read not issued: the leg is not in sync any more */
  int res;
} IoSub;

typedef int (*EngineSlowFunc) (EngineIoState *st);
typedef void (*EngineThenFunc) (EngineIoState *st, int res);

struct _EngineIoState {
  VbEngineIo *io;
  VbEngine *e;
  VbRing *ring;
  guint8 *data; /* the caller's buffer, or the bounce buffer */
  void *bounce;
  gsize bounce_size;
  guint64 done; /* bytes of the request done */
  guint64 covered;
  guint n_pieces;
  VbMapping pieces[IO_BATCH];
  guint tried[IO_BATCH];
  guint landed[IO_BATCH];
  IoSub subs[IO_SUBS];
  guint n_subs;
  guint pending; /* subs issued and not completed */
  gboolean in_barrier;
  gboolean in_meta;
  EngineBarrierWaiter waiter;
  /* the slow lane: @slow runs on a worker, then @then on the ring */
  EngineSlowFunc slow;
  EngineThenFunc then;
  VbRingOp resume;
  struct __kernel_timespec delay; /* the fault injector's, as a ring timeout */
  int flush_res[VB_MAX_COMPONENTS];
};

EngineIoState *engine_io_state_new (void);
void engine_io_state_free (EngineIoState *st);
