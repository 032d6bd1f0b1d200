/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine's blocking entry points (vb_engine_ops: jobs' callers,
 * servers not yet on a ring of their own, a device stacked on this one and
 * called in place, tests): each is an asynchronous request on the calling
 * thread's own ring, run until it is done. A call made while that thread
 * is already inside one (a stacked device's) takes a ring of the next
 * level. */
#include "config.h"

#include "engine-io.h"

#include <errno.h>

#define MAX_DEPTH 8
#define RING_ENTRIES 256

/* Per thread: a ring and a request state for each nesting level, made on
 * first use, freed with the thread. */
typedef struct {
  VbRing *rings[MAX_DEPTH];
  EngineIoState *states[MAX_DEPTH];
  guint depth;
} SyncThread;

static void
sync_thread_free (gpointer data)
{
  SyncThread *t = data;

  for (guint i = 0; i < MAX_DEPTH; i++)
    {
      engine_io_state_free (t->states[i]);
      vb_ring_free (t->rings[i]);
    }
  g_free (t);
}

static GPrivate sync_thread_key = G_PRIVATE_INIT (sync_thread_free);

typedef struct {
  VbEngineIo io;
  gboolean finished;
  int res;
} SyncCall;

static void
sync_done (VbEngineIo *io, int res)
{
  SyncCall *call = (SyncCall *) io;

  call->res = res;
  call->finished = TRUE;
}

static int
run_sync (VbEngine *e, VbEngineIoKind kind, void *buf, guint64 length, guint64 offset, gboolean fua)
{
  SyncThread *t = g_private_get (&sync_thread_key);
  SyncCall call = { .io = { .kind = kind,
                            .buf = buf,
                            .offset = offset,
                            .length = length,
                            .fua = fua,
                            .done = sync_done } };
  VbRing *ring;

  if (t == NULL)
    {
      t = g_new0 (SyncThread, 1);
      g_private_set (&sync_thread_key, t);
    }
  if (t->depth >= MAX_DEPTH)
    return -ELOOP;
  if (t->rings[t->depth] == NULL)
    t->rings[t->depth] = vb_ring_new (RING_ENTRIES, NULL);
  if ((ring = t->rings[t->depth]) == NULL)
    return -ENOMEM;
  if (t->states[t->depth] == NULL)
    t->states[t->depth] = engine_io_state_new ();
  call.io.state = t->states[t->depth];
  t->depth++;
  vb_engine_submit (e, ring, &call.io);
  while (!call.finished)
    {
      int r = vb_ring_run (ring, TRUE);
      if (G_UNLIKELY (r < 0))
        g_critical ("%s: io_uring: %s", vb_engine_name (e), g_strerror (-r));
    }
  t->depth--;
  return call.res;
}

static int
engine_pread (void *handle, void *buf, guint64 length, guint64 offset)
{
  return run_sync (handle, VB_ENGINE_IO_READ, buf, length, offset, FALSE);
}

static int
engine_pwrite (void *handle, const void *buf, guint64 length, guint64 offset, gboolean fua)
{
  return run_sync (handle, VB_ENGINE_IO_WRITE, (void *) buf, length, offset, fua);
}

static int
engine_flush (void *handle)
{
  return run_sync (handle, VB_ENGINE_IO_FLUSH, NULL, 0, 0, FALSE);
}

static int
engine_discard (void *handle, guint64 length, guint64 offset)
{
  return run_sync (handle, VB_ENGINE_IO_DISCARD, NULL, length, offset, FALSE);
}

static int
engine_write_zeroes (void *handle, guint64 length, guint64 offset, gboolean fua)
{
  return run_sync (handle, VB_ENGINE_IO_WRITE_ZEROES, NULL, length, offset, fua);
}

static guint64
engine_size (void *handle)
{
  return ((VbEngine *) handle)->layout.size;
}

static guint32
engine_block_size (void *handle)
{
  return ((VbEngine *) handle)->block_size;
}

static gboolean
engine_read_only (void *handle)
{
  return ((VbEngine *) handle)->read_only;
}

static gboolean
engine_can_multi_conn (void *handle)
{
  /* a flush flushes every component, whichever connection wrote */
  return TRUE;
}

static int
engine_extents (void *handle, guint64 offset, guint64 length, guint64 *run, guint32 *flags)
{
  return vb_engine_extents (handle, offset, length, run, flags);
}

static void
engine_submit (void *handle, VbRing *ring, VbEngineIo *io)
{
  vb_engine_submit (handle, ring, io);
}

const VbBlockOps vb_engine_ops = {
  .size = engine_size,
  .block_size = engine_block_size,
  .read_only = engine_read_only,
  .can_multi_conn = engine_can_multi_conn,
  .pread = engine_pread,
  .pwrite = engine_pwrite,
  .flush = engine_flush,
  .discard = engine_discard,
  .write_zeroes = engine_write_zeroes,
  .extents = engine_extents,
  .submit = engine_submit,
};
