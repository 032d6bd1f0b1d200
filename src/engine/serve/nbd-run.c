/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Running NBD requests on the export, asynchronously: through the
 * export's submit (the engine's path) into the connection's own ring, or,
 * for an export with only blocking calls (a test's memory disk, the file
 * server of the tests), on a few workers that post each result back to
 * that ring. Either way the result comes back on the connection's thread.
 * A flush waits for the requests received before it; write-zeroes that
 * the export cannot do is done by writing zeroes. */
#include "config.h"

#include "nbd-run.h"

/* A blocking export is called with at most this much at once. */
#define VB_NBD_IO_CHUNK (4u << 20)

/* What write-zeroes writes where the export has no way to zero. Never
 * written to, so it stays untouched zero pages in .bss. */
static guint8 zeroes[VB_NBD_IO_CHUNK] __attribute__ ((aligned (4096)));

/* The NBD error a request earns before touching the device (0: none). */
guint32
nbd_check_request (NbdConn *c, const VbNbdRequest *req, const char **why)
{
  const VbNbdExport *e = c->export;
  guint16 allowed = NBD_CMD_FLAG_FUA; /* valid on every command (spec) */
  gboolean writes = FALSE;

  switch (req->type)
    {
    case NBD_CMD_READ:
      break;
    case NBD_CMD_FLUSH:
      if (!(c->terms.tflags & NBD_FLAG_SEND_FLUSH))
        return *why = "flush is not supported", NBD_EINVAL;
      break;
    case NBD_CMD_TRIM:
      if (!(c->terms.tflags & NBD_FLAG_SEND_TRIM))
        return *why = "trim is not supported", NBD_EINVAL;
      writes = TRUE;
      break;
    case NBD_CMD_WRITE_ZEROES:
      /* NO_HOLE is accepted and ignored: it only asks that the range stay
       * provisioned, VbBlockOps cannot pass it on, and not honouring it
       * costs no data (the range reads back as zeroes either way). */
      allowed |= NBD_CMD_FLAG_NO_HOLE;
      writes = TRUE;
      break;
    case NBD_CMD_WRITE:
      writes = TRUE;
      break;
    case NBD_CMD_BLOCK_STATUS:
      if (!c->terms.allocation)
        return *why = "no metadata context was selected", NBD_EINVAL;
      if (req->length == 0)
        return *why = "block status of no bytes", NBD_EINVAL;
      allowed |= NBD_CMD_FLAG_REQ_ONE;
      break;
    default:
      return *why = "unknown command", NBD_EINVAL;
    }
  if (req->flags & ~allowed)
    return *why = "command flags not supported for this command", NBD_EINVAL;
  if (req->type == NBD_CMD_FLUSH)
    return 0; /* offset and length are reserved */
  if (writes && (c->terms.tflags & NBD_FLAG_READ_ONLY))
    return *why = "the export is read-only", NBD_EPERM;
  if (req->type == NBD_CMD_READ && req->length > VB_NBD_MAX_REQUEST)
    return *why = "read longer than the maximum block size", NBD_EINVAL;
  if (req->offset % e->block_size || req->length % e->block_size)
    return *why = "offset or length not a multiple of the minimum block size", NBD_EINVAL;
  guint64 size = c->live_size ? e->ops->size (e->handle) : c->terms.size;
  if (req->offset > size || req->length > size - req->offset)
    {
      *why = "request beyond the end of the export";
      /* The spec's choice: ENOSPC for writes, EINVAL for reads and trims. */
      return req->type == NBD_CMD_WRITE || req->type == NBD_CMD_WRITE_ZEROES ? NBD_ENOSPC
                                                                             : NBD_EINVAL;
    }
  return 0;
}

/* ---- a blocking export ---- */

static int
chunked (const VbNbdExport *e, VbEngineIo *io)
{
  for (guint64 done = 0; done < io->length;)
    {
      guint64 n = MIN (io->length - done, VB_NBD_IO_CHUNK);
      guint8 *p = (guint8 *) io->buf + done;
      int r = io->kind == VB_ENGINE_IO_READ
                  ? e->ops->pread (e->handle, p, n, io->offset + done)
                  : e->ops->pwrite (e->handle, p, n, io->offset + done, io->fua);
      if (r < 0)
        return r;
      done += n;
    }
  return 0;
}

/* @io through the blocking calls, with the asynchronous path's meaning. */
static int
blocking_run (const VbNbdExport *e, VbEngineIo *io)
{
  int r;

  switch (io->kind)
    {
    case VB_ENGINE_IO_READ:
    case VB_ENGINE_IO_WRITE:
      return chunked (e, io);
    case VB_ENGINE_IO_FLUSH:
      return e->ops->flush ? e->ops->flush (e->handle) : -EOPNOTSUPP;
    case VB_ENGINE_IO_DISCARD:
      r = e->ops->discard ? e->ops->discard (e->handle, io->length, io->offset) : -EOPNOTSUPP;
      /* durable before done, as the engine's is */
      if (r == 0 && io->fua && e->ops->flush)
        r = e->ops->flush (e->handle);
      return r;
    case VB_ENGINE_IO_WRITE_ZEROES:
      return e->ops->write_zeroes
                 ? e->ops->write_zeroes (e->handle, io->length, io->offset, io->fua)
                 : -EOPNOTSUPP;
    }
  g_assert_not_reached ();
}

/* BLOCK_STATUS on a worker (the export's extents call blocks): the reply's
 * payload into job->buf, runs of one status merged, at most one
 * descriptor with REQ_ONE. A failure after the first descriptor ends the
 * reply short, which the spec allows; so does the bound on the export's
 * answers (a request of 4 GiB over 1 MiB pieces would otherwise ask
 * thousands of them on a shared worker). */
#define VB_NBD_MAX_EXTENT_CALLS 1024u

static int
block_status_run (const VbNbdExport *e, NbdJob *job)
{
  const VbNbdRequest *req = &job->req;
  guint max = req->flags & NBD_CMD_FLAG_REQ_ONE ? 1 : VB_NBD_MAX_EXTENTS;
  guint64 at = req->offset, end = req->offset + req->length;
  guint8 *d = job->buf + 4;
  guint n = 0;

  put32 (job->buf, VB_NBD_CONTEXT_ALLOCATION_ID);
  for (guint calls = 0; at < end && calls < VB_NBD_MAX_EXTENT_CALLS; calls++)
    {
      guint64 run = end - at;
      guint32 flags = 0;
      int r = e->ops->extents ? e->ops->extents (e->handle, at, end - at, &run, &flags) : 0;
      if (r < 0 && n == 0)
        return r;
      if (r < 0)
        break;
      run = CLAMP (run, 1, end - at);
      if (n > 0 && get32 (d + 8 * (n - 1) + 4) == flags)
        put32 (d + 8 * (n - 1), get32 (d + 8 * (n - 1)) + (guint32) run);
      else if (n < max)
        {
          put32 (d + 8 * n, (guint32) run);
          put32 (d + 8 * n + 4, flags);
          n++;
        }
      else
        break;
      at += run;
    }
  job->n_extents = n;
  return 0;
}

static void
worker_run (gpointer data, gpointer user_data)
{
  NbdJob *job = data;
  NbdConn *c = user_data;

  vb_ring_post (c->ring, &job->posted,
                job->req.type == NBD_CMD_BLOCK_STATUS ? block_status_run (c->export, job)
                                                      : blocking_run (c->export, &job->io));
}

static void
on_posted (VbRingOp *op, int res)
{
  NbdJob *job = G_STRUCT_MEMBER_P (op, -G_STRUCT_OFFSET (NbdJob, posted));

  job->io.done (&job->io, res);
}

/* ---- requests ---- */

static void on_io_done (VbEngineIo *io, int res);

static void
run_on_worker (NbdConn *c, NbdJob *job)
{
  /* (workers are shared threads of GLib's, at most this many at once for
   * one connection: the rest wait in the pool's queue) */
  if (c->workers == NULL)
    c->workers = g_thread_pool_new (worker_run, c, VB_NBD_MAX_WORKERS, FALSE, NULL);
  g_thread_pool_push (c->workers, job, NULL);
}

static void
run_io (NbdConn *c, NbdJob *job, VbEngineIoKind kind, void *buf, guint64 offset, guint64 length)
{
  const VbNbdExport *e = c->export;
  VbEngineIo *io = &job->io;

  io->kind = kind;
  io->buf = buf;
  io->offset = offset;
  io->length = length;
  io->fua = (job->req.flags & NBD_CMD_FLAG_FUA) != 0;
  io->done = on_io_done;
  io->user_data = job;
  if (e->ops->submit)
    {
      e->ops->submit (e->handle, c->ring, io);
      return;
    }
  run_on_worker (c, job);
}

/* The spec asks a flush to cover only the writes completed (replied to)
 * before it was received. We go further, to be safe with clients that send
 * a write and a flush without waiting in between: a flush starts once
 * every request received before it on this connection is done. */
static void
flush_start (NbdConn *c, NbdJob *job)
{
  job->started = TRUE;
  run_io (c, job, VB_ENGINE_IO_FLUSH, NULL, 0, 0);
}

static void
finished (NbdConn *c, NbdJob *job, int res)
{
  GList *head;

  g_queue_unlink (&c->order, &job->order_link);
  head = c->order.head;
  if (head && ((NbdJob *) head->data)->req.type == NBD_CMD_FLUSH
      && !((NbdJob *) head->data)->started)
    flush_start (c, head->data);
  nbd_job_done (job, res);
}

static void
on_io_done (VbEngineIo *io, int res)
{
  NbdJob *job = io->user_data;
  NbdConn *c = job->conn;
  const VbNbdRequest *req = &job->req;

  if (req->type == NBD_CMD_TRIM && res == -EOPNOTSUPP)
    res = 0; /* a trim is a hint */
  if (req->type == NBD_CMD_WRITE_ZEROES && res == -EOPNOTSUPP && !job->zeroing)
    {
      job->zeroing = TRUE;
      res = 0;
    }
  if (job->zeroing && res == 0 && job->zeroed < req->length)
    {
      guint64 n = MIN (req->length - job->zeroed, sizeof zeroes);
      guint64 at = req->offset + job->zeroed;
      job->zeroed += n;
      run_io (c, job, VB_ENGINE_IO_WRITE, zeroes, at, n);
      return;
    }
  finished (c, job, res);
}

void
nbd_job_start (NbdConn *c, NbdJob *job)
{
  const VbNbdRequest *req = &job->req;

  g_queue_push_tail_link (&c->order, &job->order_link);
  job->started = job->zeroing = FALSE;
  job->zeroed = 0;
  switch (req->type)
    {
    case NBD_CMD_READ:
      run_io (c, job, VB_ENGINE_IO_READ, job->buf, req->offset, req->length);
      break;
    case NBD_CMD_WRITE:
      run_io (c, job, VB_ENGINE_IO_WRITE, job->buf, req->offset, req->length);
      break;
    case NBD_CMD_FLUSH:
      if (c->order.head == &job->order_link)
        flush_start (c, job);
      break;
    case NBD_CMD_BLOCK_STATUS:
      job->io.done = on_io_done;
      job->io.user_data = job;
      run_on_worker (c, job);
      break;
    case NBD_CMD_TRIM:
    case NBD_CMD_WRITE_ZEROES:
      if (req->length == 0)
        finished (c, job, 0);
      else
        run_io (c, job,
                req->type == NBD_CMD_TRIM ? VB_ENGINE_IO_DISCARD : VB_ENGINE_IO_WRITE_ZEROES, NULL,
                req->offset, req->length);
      break;
    default:
      g_assert_not_reached ();
    }
}

void
nbd_job_init (NbdConn *c, NbdJob *job)
{
  job->conn = c;
  job->order_link.data = job;
  job->posted.func = on_posted;
  if (c->export->ops->submit)
    vb_engine_io_init (&job->io);
}

void
nbd_job_clear (NbdJob *job)
{
  if (job->io.state)
    vb_engine_io_clear (&job->io);
}

void
nbd_run_stop (NbdConn *c)
{
  if (c->workers)
    g_thread_pool_free (g_steal_pointer (&c->workers), FALSE, TRUE);
}
