/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* See engine-switch.h. A request enters (counted in flight unless held),
 * calls the engine it found current, and leaves; the swapping thread
 * waits for the count to reach zero. One mutex per request: the FUSE or
 * NBD round trip around it costs far more. */
#include "config.h"

#include "engine-switch.h"

#include <errno.h>

struct _VbEngineSwitch {
  GMutex lock;
  GCond drained; /* in_flight reached 0 while held */
  GCond released;
  VbEngine *engine;
  guint in_flight;
  gboolean held;
  gint64 held_since;
  GRWLock engine_lock; /* readers: status calls; writer: the replacement */
  VbEngineIo *waiting; /* asynchronous requests held, newest first */
  /* the current engine's, set with it (atomic) */
  guint64 size;
  guint32 block_size;
  gint read_only;
};

static void
note_engine (VbEngineSwitch *sw, VbEngine *e)
{
  __atomic_store_n (&sw->size, vb_engine_ops.size (e), __ATOMIC_RELEASE);
  __atomic_store_n (&sw->block_size, vb_engine_ops.block_size (e), __ATOMIC_RELEASE);
  g_atomic_int_set (&sw->read_only, vb_engine_ops.read_only (e));
}

guint64
vb_engine_switch_size (VbEngineSwitch *sw)
{
  return __atomic_load_n (&sw->size, __ATOMIC_ACQUIRE);
}

guint32
vb_engine_switch_block_size (VbEngineSwitch *sw)
{
  return __atomic_load_n (&sw->block_size, __ATOMIC_ACQUIRE);
}

gboolean
vb_engine_switch_read_only (VbEngineSwitch *sw)
{
  return g_atomic_int_get (&sw->read_only);
}

VbEngineSwitch *
vb_engine_switch_new (VbEngine *engine)
{
  VbEngineSwitch *sw = g_new0 (VbEngineSwitch, 1);

  g_mutex_init (&sw->lock);
  g_cond_init (&sw->drained);
  g_cond_init (&sw->released);
  g_rw_lock_init (&sw->engine_lock);
  sw->engine = engine;
  note_engine (sw, engine);
  return sw;
}

void
vb_engine_switch_free (VbEngineSwitch *sw)
{
  if (sw == NULL)
    return;
  vb_engine_free (sw->engine);
  g_mutex_clear (&sw->lock);
  g_cond_clear (&sw->drained);
  g_cond_clear (&sw->released);
  g_rw_lock_clear (&sw->engine_lock);
  g_free (sw);
}

VbEngine *
vb_engine_switch_engine (VbEngineSwitch *sw)
{
  return sw->engine;
}

void
vb_engine_switch_lock (VbEngineSwitch *sw)
{
  g_rw_lock_reader_lock (&sw->engine_lock);
}

void
vb_engine_switch_unlock (VbEngineSwitch *sw)
{
  g_rw_lock_reader_unlock (&sw->engine_lock);
}

static VbEngine *
enter (VbEngineSwitch *sw)
{
  VbEngine *e;

  g_mutex_lock (&sw->lock);
  while (sw->held)
    g_cond_wait (&sw->released, &sw->lock);
  sw->in_flight++;
  e = sw->engine;
  g_mutex_unlock (&sw->lock);
  return e;
}

static void
leave (VbEngineSwitch *sw)
{
  g_mutex_lock (&sw->lock);
  if (--sw->in_flight == 0 && sw->held)
    g_cond_signal (&sw->drained);
  g_mutex_unlock (&sw->lock);
}

/* Lock held: the hold ends; returns the asynchronous requests it held. */
static VbEngineIo *
release_locked (VbEngineSwitch *sw)
{
  VbEngineIo *waiting = sw->waiting;

  sw->held = FALSE;
  sw->waiting = NULL;
  g_cond_broadcast (&sw->released);
  return waiting;
}

/* Each held request enters again, on its own ring's thread. */
static void
post_released (VbEngineIo *io)
{
  while (io)
    {
      VbEngineIo *next = io->held_next;
      io->held_next = NULL;
      vb_ring_post (io->ring, &io->held, 0);
      io = next;
    }
}

int
vb_engine_switch_suspend (VbEngineSwitch *sw, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  int r;

  g_mutex_lock (&sw->lock);
  g_return_val_if_fail (!sw->held, -EBUSY);
  sw->held = TRUE;
  sw->held_since = g_get_monotonic_time ();
  while (sw->in_flight > 0)
    if (!g_cond_wait_until (&sw->drained, &sw->lock, deadline) && sw->in_flight > 0)
      {
        VbEngineIo *waiting = release_locked (sw);
        g_mutex_unlock (&sw->lock);
        post_released (waiting);
        return -ETIMEDOUT;
      }
  g_mutex_unlock (&sw->lock);
  /* what was acknowledged before the swap is durable before anything
   * after it: a flush after the swap reaches only the new engine */
  r = vb_engine_ops.flush (sw->engine);
  if (r < 0)
    vb_engine_switch_resume (sw);
  return r;
}

VbEngine *
vb_engine_switch_replace (VbEngineSwitch *sw, VbEngine *engine)
{
  VbEngine *old;

  g_rw_lock_writer_lock (&sw->engine_lock);
  g_mutex_lock (&sw->lock);
  g_warn_if_fail (sw->held && sw->in_flight == 0);
  old = sw->engine;
  sw->engine = engine;
  note_engine (sw, engine);
  g_mutex_unlock (&sw->lock);
  g_rw_lock_writer_unlock (&sw->engine_lock);
  return old;
}

gint64
vb_engine_switch_resume (VbEngineSwitch *sw)
{
  gint64 held;

  VbEngineIo *waiting;

  g_mutex_lock (&sw->lock);
  held = sw->held ? g_get_monotonic_time () - sw->held_since : 0;
  waiting = release_locked (sw);
  g_mutex_unlock (&sw->lock);
  post_released (waiting);
  return held;
}

/* the block ops: each request against the engine current when it enters */

/* (what a serving thread asks of every request: never waits out a swap,
 * which would keep that thread from completing the requests the swap
 * waits for) */
static guint64
sw_size (void *handle)
{
  return vb_engine_switch_size (handle);
}

static guint32
sw_block_size (void *handle)
{
  return vb_engine_switch_block_size (handle);
}

static gboolean
sw_read_only (void *handle)
{
  return vb_engine_switch_read_only (handle);
}

static gboolean
sw_can_multi_conn (void *handle)
{
  VbEngineSwitch *sw = handle;
  VbEngine *e = enter (sw);
  gboolean r = vb_engine_ops.can_multi_conn (e);

  leave (sw);
  return r;
}

static int
sw_pread (void *handle, void *buf, guint64 length, guint64 offset)
{
  VbEngineSwitch *sw = handle;
  VbEngine *e = enter (sw);
  int r = vb_engine_ops.pread (e, buf, length, offset);

  leave (sw);
  return r;
}

static int
sw_pwrite (void *handle, const void *buf, guint64 length, guint64 offset, gboolean fua)
{
  VbEngineSwitch *sw = handle;
  VbEngine *e = enter (sw);
  int r = vb_engine_ops.pwrite (e, buf, length, offset, fua);

  leave (sw);
  return r;
}

static int
sw_flush (void *handle)
{
  VbEngineSwitch *sw = handle;
  VbEngine *e = enter (sw);
  int r = vb_engine_ops.flush (e);

  leave (sw);
  return r;
}

static int
sw_discard (void *handle, guint64 length, guint64 offset)
{
  VbEngineSwitch *sw = handle;
  VbEngine *e = enter (sw);
  int r = vb_engine_ops.discard (e, length, offset);

  leave (sw);
  return r;
}

static int
sw_write_zeroes (void *handle, guint64 length, guint64 offset, gboolean fua)
{
  VbEngineSwitch *sw = handle;
  VbEngine *e = enter (sw);
  int r = vb_engine_ops.write_zeroes (e, length, offset, fua);

  leave (sw);
  return r;
}

static int
sw_extents (void *handle, guint64 offset, guint64 length, guint64 *run, guint32 *flags)
{
  VbEngineSwitch *sw = handle;
  VbEngine *e = enter (sw);
  int r = vb_engine_extents (e, offset, length, run, flags);

  leave (sw);
  return r;
}

static void
sw_submit (void *handle, VbRing *ring, VbEngineIo *io)
{
  vb_engine_switch_submit (handle, ring, io);
}

const VbBlockOps vb_engine_switch_ops = {
  .size = sw_size,
  .block_size = sw_block_size,
  .read_only = sw_read_only,
  .can_multi_conn = sw_can_multi_conn,
  .pread = sw_pread,
  .pwrite = sw_pwrite,
  .flush = sw_flush,
  .discard = sw_discard,
  .write_zeroes = sw_write_zeroes,
  .extents = sw_extents,
  .submit = sw_submit,
};

/* the asynchronous path */

static void
switch_io_done (VbEngineIo *io, int res)
{
  VbEngineSwitch *sw = io->switch_;

  io->done = io->caller_done;
  leave (sw);
  io->done (io, res);
}

static void
on_released (VbRingOp *op, int res)
{
  VbEngineIo *io = G_STRUCT_MEMBER_P (op, -G_STRUCT_OFFSET (VbEngineIo, held));

  vb_engine_switch_submit (io->switch_, io->ring, io);
}

void
vb_engine_switch_submit (VbEngineSwitch *sw, VbRing *ring, VbEngineIo *io)
{
  VbEngine *e;

  io->switch_ = sw;
  io->ring = ring;
  g_mutex_lock (&sw->lock);
  if (sw->held)
    {
      io->held.func = on_released;
      io->held_next = sw->waiting;
      sw->waiting = io;
      g_mutex_unlock (&sw->lock);
      return;
    }
  sw->in_flight++;
  e = sw->engine;
  g_mutex_unlock (&sw->lock);
  io->caller_done = io->done;
  io->done = switch_io_done;
  vb_engine_submit (e, ring, io);
}
