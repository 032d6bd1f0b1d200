/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine's state: the types every layer of the engine shares, and
 * nothing that calls. The layers, bottom up: reports and components
 * (engine-report.c, engine-component.c), metadata (engine-meta.c,
 * engine-assemble.c), jobs (engine-sync.c), spares and re-adds
 * (engine-spare.c), the data path (engine-io.c), the engine made, started
 * and freed (engine-lifecycle.c); engine.h is the contract they implement
 * together. A layer calls only the ones below it; what must go up (a
 * component failed) goes through a function the upper layer sets. */
#pragma once

#include "engine-barrier.h"
#include "engine.h"
#include "fault.h"

#include <glib.h>

#define BUFFER_ALIGN 4096
#define ZERO_CHUNK (1u << 20)

typedef struct {
  char *path;
  int fd;                /* -1 for an in-process component */
  const VbBlockOps *ops; /* in-process component */
  void *handle;
  gboolean is_block;
  guint64 size;        /* bytes of its data area, as probed at start */
  gboolean direct;     /* opened O_DIRECT */
  guint64 data_offset; /* where the data area starts */
  gint faulty;         /* atomic */
  guint64 errors;      /* atomic */
  /* with metadata */
  char *uuid;            /* component UUID */
  gint recorded;         /* atomic: its failure is in the survivors' superblocks */
  gint rebuilding;       /* atomic: written, never read (behind a rebuild or re-add) */
  gboolean missing;      /* not there at start (no fd, no ops) */
  gboolean released;     /* faulty, fd pointed at /dev/null */
  gboolean full_rebuild; /* new to its slot: every byte is copied, not just dirty chunks */
  guint64 rebuild_from;  /* full rebuild: below this device offset it already has the data
                            (a rebuild that was stopped), only dirty chunks are copied */
} Component;

typedef struct _VbEngineMeta VbEngineMeta;
typedef struct _EngineSync EngineSync;
typedef struct _EngineSweeper EngineSweeper;

/* Set by engine-lifecycle.c: what follows once a component has turned faulty (the
 * metadata records it, the owner hears of it, a spare takes the slot). */
typedef void (*EngineFailedFunc) (VbEngine *e, guint i, int err);

struct _VbEngine {
  char *name;
  const VbDriver *driver;
  VbLayout layout;
  guint32 block_size;
  gboolean read_only;
  gboolean redundant; /* every piece has more than one copy */
  guint n;
  Component *components;
  guint rr; /* atomic: read balancing */
  /* atomic (__atomic): below it the copies are known equal; a read at or
   * above it goes to the first readable copy, as md's does during a
   * resync, so that two reads of a block never give two answers while
   * copies an unclean stop left different wait for the resync.
   * G_MAXUINT64: every copy equal. */
  guint64 resync_frontier;
  EngineFailedFunc component_failed;
  VbEngineFailureFunc failure_func;
  gpointer failure_data;
  VbEngineJobFunc job_func;
  gpointer job_data;
  VbFault *fault;     /* driver "faulty": injected errors and latency */
  VbEngineMeta *meta; /* NULL without on-component metadata */
  /* Writes hold it shared; a resync, rebuild or check step holds it
   * exclusively while it copies, so no write lands between its read and
   * its write. */
  EngineBarrier barrier;
  gint lost;        /* atomic: some data has no healthy copy (failed) */
  guint64 io_count; /* atomic: requests served, so that jobs see a busy device */
  GMutex sync_lock; /* the job below */
  EngineSync *sync;
  EngineSweeper *sweeper; /* the bitmap's sweeper (metadata with a bitmap) */
  GThread *spare_thread;  /* spares taking failed slots (engine-spare.c) */
  guint64 spare_wanted;   /* slots asked for, one bit each; under spare_lock */
  gboolean spare_running; /* spare_thread is in its loop; under spare_lock */
  /* held from the check that a slot is faulty to its new component's
   * install: a spare taking it and a re-add of its old component never
   * both take one slot */
  GMutex slot_lock;
  gboolean need_rebuild;        /* metadata=none: a slot behind at start */
  GArray *kept_fds;             /* metadata=none: fds of replaced components, closed at the end */
  gint quiesced;                /* atomic: no spare is taken (a swap is under way) */
  guint64 speed_min, speed_max; /* atomic: sync_speed_min/max, bytes per second */
};

static inline gboolean
engine_is_faulty (Component *c)
{
  return g_atomic_int_get (&c->faulty) != 0;
}

/* Known to be in sync: neither faulty nor behind a rebuild or resync. The
 * one test that decides which copies may be read (DESIGN.md: a leg not
 * known to be in sync is never read); what puts a leg behind is the
 * assembly rule (assembly.h), at start and at a re-add. */
static inline gboolean
engine_leg_readable (Component *c)
{
  return !g_atomic_int_get (&c->faulty) && !g_atomic_int_get (&c->rebuilding);
}
