/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The engine's data path, asynchronous: a request is split along the
 * driver's placement into batches of pieces, each piece's copies go into
 * the submitting thread's ring, and the request goes on from the
 * completions. One redundancy rule for every driver: read one healthy copy
 * (another on error, the failed one marked faulty), write every healthy
 * copy, succeed while one copy of each piece landed. What may block — a
 * failure recorded in the superblocks, a new bitmap bit made durable, a
 * write held by a job's step, a trim — never holds the ring's thread: it
 * runs on the slow lane (a worker) or waits as a ring operation, and the
 * request goes on when it comes back. Nothing here allocates per request:
 * the state is the caller's, per tag. */
#include "config.h"

#include "engine-io.h"

#include "engine-meta.h"
#include "vb-report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void next_batch (EngineIoState *st);
static void finish (EngineIoState *st, int res);
static void flush_start (EngineIoState *st);

EngineIoState *
engine_io_state_new (void)
{
  return g_new0 (EngineIoState, 1);
}

void
engine_io_state_free (EngineIoState *st)
{
  if (st == NULL)
    return;
  free (st->bounce);
  g_free (st);
}

void
vb_engine_io_init (VbEngineIo *io)
{
  memset (io, 0, sizeof *io);
  io->state = engine_io_state_new ();
}

void
vb_engine_io_clear (VbEngineIo *io)
{
  g_clear_pointer (&io->state, engine_io_state_free);
}

/* --- the slow lane ------------------------------------------------------- */

static void
slow_run (gpointer data, gpointer user_data)
{
  EngineIoState *st = data;
  int r = st->slow (st);

  vb_ring_post (st->ring, &st->resume, r);
}

/* Workers for what may block. Unbounded: a worker waiting for a failure
 * to be recorded must never keep the worker that records it from running. */
static GThreadPool *
slow_lane (void)
{
  static GThreadPool *pool;
  static gsize once;

  if (g_once_init_enter (&once))
    {
      pool = g_thread_pool_new (slow_run, NULL, -1, FALSE, NULL);
      g_once_init_leave (&once, 1);
    }
  return pool;
}

static void
on_resume (VbRingOp *op, int res)
{
  EngineIoState *st = G_STRUCT_MEMBER_P (op, -G_STRUCT_OFFSET (EngineIoState, resume));

  st->then (st, res);
}

static void
go_slow (EngineIoState *st, EngineSlowFunc slow, EngineThenFunc then)
{
  st->slow = slow;
  st->then = then;
  st->resume.func = on_resume;
  g_thread_pool_push (slow_lane (), st, NULL);
}

/* --- pieces and component I/O -------------------------------------------- */

static int
check_range (VbEngine *e, guint64 length, guint64 offset)
{
  if (offset % e->block_size != 0 || length % e->block_size != 0)
    return -EINVAL;
  if (offset > e->layout.size || length > e->layout.size - offset)
    return -EINVAL;
  return 0;
}

/* The next batch's pieces from where the request got to. */
static void
map_batch (EngineIoState *st)
{
  VbEngine *e = st->e;
  guint64 offset = st->io->offset + st->done, length = st->io->length - st->done;
  guint64 covered = 0;
  guint n = 0;

  while (covered < length && n < IO_BATCH)
    {
      e->driver->map (&e->layout, offset + covered, length - covered, &st->pieces[n]);
      g_assert (st->pieces[n].length > 0 && st->pieces[n].offset == offset + covered);
      covered += st->pieces[n].length;
      n++;
    }
  st->n_pieces = n;
  st->covered = covered;
}

static Component *
sub_component (EngineIoState *st, const IoSub *s)
{
  return &st->e->components[st->pieces[s->piece].copies[s->copy].component];
}

static void round_done (EngineIoState *st);

static void
on_sub (VbRingOp *op, int res)
{
  IoSub *s = (IoSub *) op;
  EngineIoState *st = s->st;
  const VbMapping *p = &st->pieces[s->piece];

  /* a short transfer on a component of the right size is an error */
  s->res = res < 0 ? res : ((guint64) res == p->length ? 0 : -EIO);
  if (--st->pending == 0)
    round_done (st);
}

/* Issues subs [0, n_subs); in-process components are called in place.
 * TRUE when some went into the ring (the round ends in on_sub). */
static gboolean
issue_subs (EngineIoState *st, gboolean write)
{
  VbEngine *e = st->e;

  st->pending = 0;
  for (guint i = 0; i < st->n_subs; i++)
    {
      IoSub *s = &st->subs[i];
      const VbMapping *p = &st->pieces[s->piece];
      Component *c = sub_component (st, s);
      guint64 coff = c->data_offset + p->copies[s->copy].offset;
      guint64 at = p->offset - st->io->offset;
      gboolean kbuf = st->io->kernel_buf;
      /* a kernel buffer's address in the ring is the offset in it */
      guint8 *data = kbuf ? (guint8 *) (guintptr) at : st->data + at;
      struct io_uring_sqe *sqe;
      int fixed;

      s->st = st;
      s->res = 0;
      s->refused = FALSE;
      if (!write && G_UNLIKELY (!engine_leg_readable (c)))
        {
          /* picked in sync, not any more: failed meanwhile (another
           * request's error), and another copy is read. A leg put behind
           * without failing first is a bug: loud, and fatal in tests,
           * but still never read */
          if (!engine_is_faulty (c))
            g_critical ("%s: a read went to component %s, which is not in sync; another copy "
                        "is read",
                        e->name, c->path);
          s->res = -EIO;
          s->refused = TRUE;
          continue;
        }
      if (c->fd < 0 && G_UNLIKELY (kbuf))
        {
          /* admit checked that none is in process: a component put in
           * since. A write's copy cannot be made, so the leg fails (never
           * silently left behind); a read goes to another copy */
          g_critical ("%s: component %s is served in process and cannot take a kernel buffer",
                      e->name, c->path);
          s->res = -EIO;
          s->refused = !write;
          continue;
        }
      if (c->fd < 0)
        {
          s->res = write ? c->ops->pwrite (c->handle, data, p->length, coff, st->io->fua)
                         : c->ops->pread (c->handle, data, p->length, coff);
          continue;
        }
      s->op.func = on_sub;
      sqe = vb_ring_sqe (st->ring, &s->op);
      /* the serving thread's registered buffer, when the data is in it */
      fixed = kbuf ? (int) st->io->kernel_buf_index
                   : vb_ring_buffer_index (st->ring, data, p->length);
      if (write && fixed >= 0)
        io_uring_prep_write_fixed (sqe, c->fd, data, p->length, coff, fixed);
      else if (write)
        io_uring_prep_write (sqe, c->fd, data, p->length, coff);
      else if (fixed >= 0)
        io_uring_prep_read_fixed (sqe, c->fd, data, p->length, coff, fixed);
      else
        io_uring_prep_read (sqe, c->fd, data, p->length, coff);
      if (write && st->io->fua)
        sqe->rw_flags = RWF_DSYNC;
      st->pending++;
    }
  return st->pending > 0;
}

/* Slow lane: every failed component I/O of the round is counted and its
 * component turns faulty (recorded in the superblocks before this returns). */
/* @i failed under this request: counted, faulty, and — when another
 * request's failure got there first — recorded before this returns all
 * the same (engine_component_failed returns at once for all but the
 * first). Slow lane only. */
static void
fail_and_wait (VbEngine *e, guint i, int err)
{
  engine_component_failed (e, i, err);
  if (e->meta)
    engine_meta_wait_recorded (e, i);
}

/* Slow lane: every failed component I/O of the round is counted and its
 * component turns faulty, recorded in the superblocks before this returns. */
static int
record_failures (EngineIoState *st)
{
  for (guint i = 0; i < st->n_subs; i++)
    {
      IoSub *s = &st->subs[i];
      if (s->res < 0 && !s->refused)
        fail_and_wait (st->e, st->pieces[s->piece].copies[s->copy].component, s->res);
    }
  return 0;
}

static gboolean
round_failed (EngineIoState *st)
{
  for (guint i = 0; i < st->n_subs; i++)
    if (st->subs[i].res < 0 && !st->subs[i].refused)
      return TRUE;
  return FALSE;
}

/* --- reads ---------------------------------------------------------------- */

/* Read balancing: the copy of @p to read, round robin from @start among
 * the legs known to be in sync only (a leg behind a rebuild or resync has
 * holes or stale chunks: never read); -1 when none is. issue_subs checks
 * it again as the read is issued. */
static gint
pick_in_sync (VbEngine *e, const VbMapping *p, guint start)
{
  for (guint k = 0; k < p->n_copies; k++)
    {
      guint copy = (start + k) % p->n_copies;

      if (engine_leg_readable (&e->components[p->copies[copy].component]))
        return copy;
    }
  return -1;
}

static void
read_round (EngineIoState *st)
{
  if (!issue_subs (st, FALSE))
    round_done (st);
}

static void
read_batch (EngineIoState *st)
{
  VbEngine *e = st->e;
  guint64 frontier = __atomic_load_n (&e->resync_frontier, __ATOMIC_ACQUIRE);
  guint start = g_atomic_int_add (&e->rr, 1);

  map_batch (st);
  for (guint i = 0; i < st->n_pieces; i++)
    {
      const VbMapping *p = &st->pieces[i];
      /* not made equal yet: the first copy, the one the job copies from */
      gint copy = pick_in_sync (e, p, p->offset + p->length > frontier ? 0 : start + i);
      if (copy < 0)
        {
          finish (st, -EIO);
          return;
        }
      st->tried[i] = 0;
      st->subs[i] = (IoSub){ .piece = i, .copy = copy };
    }
  st->n_subs = st->n_pieces;
  read_round (st);
}

/* After the failures of a round are recorded: the failed pieces from
 * another copy, or the batch is done. */
static void
read_retry (EngineIoState *st, int unused)
{
  guint again = 0;

  for (guint i = 0; i < st->n_subs; i++)
    {
      IoSub *s = &st->subs[i];
      const VbMapping *p = &st->pieces[s->piece];
      gint next;
      if (s->res == 0)
        continue;
      if (++st->tried[s->piece] >= p->n_copies || (next = pick_in_sync (st->e, p, s->copy + 1)) < 0)
        {
          finish (st, s->res < 0 ? s->res : -EIO);
          return;
        }
      st->subs[again++] = (IoSub){ .piece = s->piece, .copy = next };
    }
  st->n_subs = again;
  if (again > 0)
    {
      read_round (st);
      return;
    }
  st->done += st->covered;
  next_batch (st);
}

/* --- writes --------------------------------------------------------------- */

static int
wait_recorded (EngineIoState *st)
{
  for (guint i = 0; i < st->n_pieces; i++)
    for (guint k = 0; k < st->pieces[i].n_copies; k++)
      {
        guint ci = st->pieces[i].copies[k].component;
        if (engine_is_faulty (&st->e->components[ci]))
          engine_meta_wait_recorded (st->e, ci);
      }
  return 0;
}

/* The batch's writes, to every copy not faulty. Skipping a copy is only
 * safe once the metadata says it failed: checked copy by copy as they are
 * chosen, every time (a copy may fail while this request waits); one not
 * recorded yet sends the request to wait for it, nothing issued. */
static void
write_issue (EngineIoState *st, int unused)
{
  VbEngine *e = st->e;
  guint n = 0;

  for (guint i = 0; i < st->n_pieces; i++)
    {
      st->landed[i] = 0;
      for (guint k = 0; k < st->pieces[i].n_copies; k++)
        {
          Component *c = &e->components[st->pieces[i].copies[k].component];
          if (!engine_is_faulty (c))
            st->subs[n++] = (IoSub){ .piece = i, .copy = k };
          else if (e->meta && !g_atomic_int_get (&c->recorded))
            {
              go_slow (st, wait_recorded, write_issue);
              return;
            }
        }
    }
  st->n_subs = n;
  if (!issue_subs (st, TRUE))
    round_done (st);
}

static void
write_batch (EngineIoState *st)
{
  map_batch (st);
  write_issue (st, 0);
}

static void
write_tally (EngineIoState *st, int unused)
{
  int err = 0;

  for (guint i = 0; i < st->n_subs; i++)
    {
      IoSub *s = &st->subs[i];
      if (s->res == 0)
        {
          if (!g_atomic_int_get (&sub_component (st, s)->rebuilding))
            st->landed[s->piece]++;
        }
      else
        err = s->res;
    }
  for (guint i = 0; i < st->n_pieces; i++)
    if (st->landed[i] == 0)
      {
        finish (st, err < 0 ? err : -EIO);
        return;
      }
  st->done += st->covered;
  next_batch (st);
}

/* A round of a read or write batch has ended. */
static void
round_done (EngineIoState *st)
{
  gboolean write = st->io->kind == VB_ENGINE_IO_WRITE;

  if (round_failed (st))
    go_slow (st, record_failures, write ? write_tally : read_retry);
  else if (write)
    write_tally (st, 0);
  else
    read_retry (st, 0);
}

static void
next_batch (EngineIoState *st)
{
  if (st->done >= st->io->length)
    finish (st, 0);
  else if (st->io->kind == VB_ENGINE_IO_WRITE)
    write_batch (st);
  else
    read_batch (st);
}

/* --- flush ---------------------------------------------------------------- */

static void complete (EngineIoState *st, int res);

static int
record_flush_failures (EngineIoState *st)
{
  for (guint i = 0; i < st->e->n; i++)
    if (st->flush_res[i] < 0 && !engine_is_faulty (&st->e->components[i]))
      fail_and_wait (st->e, i, st->flush_res[i]);
  return 0;
}

/* Flush reaches every healthy component; a copy that cannot be made
 * durable is no copy: without redundancy any failed flush fails, with it
 * a surviving copy of everything must remain. */
static void
flush_tally (EngineIoState *st, int unused)
{
  VbEngine *e = st->e;
  gboolean any = FALSE;
  int err = 0;

  for (guint i = 0; i < e->n; i++)
    {
      if (st->flush_res[i] < 0)
        err = st->flush_res[i];
      else if (!engine_is_faulty (&e->components[i]))
        any = TRUE;
    }
  if (!e->redundant)
    complete (st, err);
  else
    complete (st, any ? 0 : (err < 0 ? err : -EIO));
}

static void
flush_done (EngineIoState *st)
{
  for (guint i = 0; i < st->e->n; i++)
    if (st->flush_res[i] < 0)
      {
        go_slow (st, record_flush_failures, flush_tally);
        return;
      }
  flush_tally (st, 0);
}

static void
on_flush (VbRingOp *op, int res)
{
  IoSub *s = (IoSub *) op;
  EngineIoState *st = s->st;

  st->flush_res[s->piece] = res < 0 ? res : 0;
  if (--st->pending == 0)
    flush_done (st);
}

static void
flush_start (EngineIoState *st)
{
  VbEngine *e = st->e;

  st->pending = 0;
  for (guint i = 0; i < e->n; i++)
    {
      Component *c = &e->components[i];
      IoSub *s = &st->subs[i];
      struct io_uring_sqe *sqe;

      st->flush_res[i] = 0;
      if (engine_is_faulty (c))
        continue;
      if (c->fd < 0)
        {
          st->flush_res[i] = c->ops->flush (c->handle);
          continue;
        }
      *s = (IoSub){ .op.func = on_flush, .st = st, .piece = i };
      sqe = vb_ring_sqe (st->ring, &s->op);
      io_uring_prep_fsync (sqe, c->fd, IORING_FSYNC_DATASYNC);
      st->pending++;
    }
  if (st->pending == 0)
    flush_done (st);
}

/* --- trims ---------------------------------------------------------------- */

/* Slow lane: discard or write zeroes on every healthy copy (ioctls and
 * fallocate, which io_uring of the kernels vblk runs on lacks for block
 * devices). */
static int
trim_slow (EngineIoState *st)
{
  VbEngine *e = st->e;
  gboolean zero = st->io->kind == VB_ENGINE_IO_WRITE_ZEROES;

  while (st->done < st->io->length)
    {
      map_batch (st);
      for (guint i = 0; i < st->n_pieces; i++)
        {
          const VbMapping *p = &st->pieces[i];
          guint landed = 0;
          int err = 0;
          for (guint k = 0; k < p->n_copies; k++)
            {
              Component *c = &e->components[p->copies[k].component];
              int res;
              if (engine_is_faulty (c))
                {
                  /* (skipped once its failure is recorded, as a write's) */
                  if (e->meta)
                    engine_meta_wait_recorded (e, p->copies[k].component);
                  continue;
                }
              res = engine_component_trim (c, p->length, c->data_offset + p->copies[k].offset,
                                           zero);
              if (res == 0)
                landed++;
              else
                {
                  err = res;
                  fail_and_wait (e, p->copies[k].component, res);
                }
            }
          if (landed == 0)
            return err < 0 ? err : -EIO;
        }
      st->done += st->covered;
    }
  return 0;
}

static void
trim_then (EngineIoState *st, int res)
{
  finish (st, res);
}

/* --- a request's start and end -------------------------------------------- */

static void
release_holds (EngineIoState *st)
{
  if (st->in_meta)
    {
      engine_meta_write_end (st->e, st->io->offset, st->io->length);
      st->in_meta = FALSE;
    }
  if (st->in_barrier)
    {
      engine_barrier_leave (&st->e->barrier);
      st->in_barrier = FALSE;
    }
}

static void
complete (EngineIoState *st, int res)
{
  VbEngineIo *io = st->io;

  io->done (io, res);
}

static void
finish (EngineIoState *st, int res)
{
  VbEngineIo *io = st->io;

  release_holds (st);
  if (res == 0 && io->kind == VB_ENGINE_IO_READ && !io->kernel_buf && st->data != io->buf)
    memcpy (io->buf, st->data, io->length);
  /* a trim with FUA: durable before done, as a write is */
  if (res == 0 && io->fua
      && (io->kind == VB_ENGINE_IO_DISCARD || io->kind == VB_ENGINE_IO_WRITE_ZEROES))
    {
      flush_start (st);
      return;
    }
  complete (st, res);
}

static void
start_data (EngineIoState *st)
{
  switch (st->io->kind)
    {
    case VB_ENGINE_IO_WRITE:
      write_batch (st);
      break;
    case VB_ENGINE_IO_DISCARD:
    case VB_ENGINE_IO_WRITE_ZEROES:
      go_slow (st, trim_slow, trim_then);
      break;
    default:
      g_assert_not_reached ();
    }
}

static int
meta_begin_slow (EngineIoState *st)
{
  return engine_meta_write_begin (st->e, st->io->offset, st->io->length);
}

static void
meta_begun (EngineIoState *st, int res)
{
  if (res < 0)
    {
      finish (st, res);
      return;
    }
  st->in_meta = TRUE;
  start_data (st);
}

/* In the barrier: the bits of the range durable (or the superblocks
 * saying "not clean") before the data goes out. */
static void
meta_begin (EngineIoState *st)
{
  int r;

  if (st->e->meta == NULL)
    {
      start_data (st);
      return;
    }
  r = engine_meta_try_write_begin (st->e, st->io->offset, st->io->length);
  if (r == -EAGAIN)
    go_slow (st, meta_begin_slow, meta_begun);
  else
    meta_begun (st, r);
}

/* The barrier opened, and entered for this request. */
static void
on_barrier_open (VbRingOp *op, int res)
{
  EngineIoState *st = G_STRUCT_MEMBER_P (op, -G_STRUCT_OFFSET (EngineIoState, waiter));

  st->in_barrier = TRUE;
  meta_begin (st);
}

/* Every write of a redundant device (or one with metadata) holds the
 * barrier: a job's copy of a unit must not race with it. */
static void
enter_barrier (EngineIoState *st)
{
  st->waiter.op.func = on_barrier_open;
  st->waiter.ring = st->ring;
  if (!engine_barrier_try_enter (&st->e->barrier, &st->waiter))
    return;
  st->in_barrier = TRUE;
  meta_begin (st);
}

static gboolean
needs_bounce (VbEngine *e, const void *buf)
{
  if (((guintptr) buf & (BUFFER_ALIGN - 1)) == 0)
    return FALSE;
  for (guint i = 0; i < e->n; i++)
    if (e->components[i].direct)
      return TRUE;
  return FALSE;
}

/* Where the data goes: the caller's buffer, or an aligned one of the
 * request's own (grown once, kept). */
static int
choose_buffer (EngineIoState *st)
{
  VbEngineIo *io = st->io;

  st->data = io->buf;
  if (!needs_bounce (st->e, io->buf))
    return 0;
  if (st->bounce_size < io->length)
    {
      free (st->bounce);
      st->bounce = NULL;
      st->bounce_size = 0;
      if (posix_memalign (&st->bounce, BUFFER_ALIGN, io->length) != 0)
        return -ENOMEM;
      st->bounce_size = io->length;
    }
  st->data = st->bounce;
  if (io->kind == VB_ENGINE_IO_WRITE)
    memcpy (st->data, io->buf, io->length);
  return 0;
}

/* The checks a request passes before anything is issued: 0 or -errno. */
static int
admit (EngineIoState *st)
{
  VbEngine *e = st->e;
  VbEngineIo *io = st->io;
  gboolean write = io->kind != VB_ENGINE_IO_READ;
  int r;

  if (io->kind == VB_ENGINE_IO_FLUSH)
    return e->fault ? vb_fault_check (e->fault, TRUE, 0, 0) : 0;
  if ((r = check_range (e, io->length, io->offset)) < 0)
    return r;
  if (write && e->read_only)
    return -EPERM;
  if (io->kind == VB_ENGINE_IO_READ || io->kind == VB_ENGINE_IO_WRITE)
    __atomic_add_fetch (&e->io_count, 1, __ATOMIC_RELAXED);
  if (e->fault && (r = vb_fault_check (e->fault, write, io->offset, io->length)) < 0)
    return r;
  /* the device failed: a write would land on no complete copy */
  if (io->kind == VB_ENGINE_IO_WRITE && e->meta && g_atomic_int_get (&e->lost))
    return -EIO;
  if ((io->kind == VB_ENGINE_IO_READ || io->kind == VB_ENGINE_IO_WRITE) && io->kernel_buf)
    {
      st->data = NULL;
      if (!vb_engine_zero_copy_ok (e))
        {
          vb_report (e->name, VB_REPORT_WARNING,
                     "a request in a kernel buffer (zero copy), and a component that needs the "
                     "data in memory: refused");
          return -EIO;
        }
      return 0;
    }
  if (io->kind == VB_ENGINE_IO_READ || io->kind == VB_ENGINE_IO_WRITE)
    return choose_buffer (st);
  return 0;
}

gboolean
vb_engine_zero_copy_ok (VbEngine *e)
{
  /* (an injected fault decides failures and delays, never data) */
  for (guint i = 0; i < e->n; i++)
    if (e->components[i].fd < 0 && !e->components[i].missing)
      return FALSE;
  return TRUE;
}

static void
start (EngineIoState *st)
{
  VbEngine *e = st->e;
  VbEngineIo *io = st->io;
  int r;

  if ((r = admit (st)) < 0)
    {
      complete (st, r);
      return;
    }
  if (io->kind == VB_ENGINE_IO_FLUSH)
    flush_start (st);
  else if (io->length == 0)
    complete (st, 0);
  else if (io->kind == VB_ENGINE_IO_READ)
    read_batch (st);
  else if (e->meta || e->redundant)
    enter_barrier (st);
  else
    start_data (st);
}

static void
on_delayed (VbRingOp *op, int res)
{
  start (G_STRUCT_MEMBER_P (op, -G_STRUCT_OFFSET (EngineIoState, resume)));
}

void
vb_engine_submit (VbEngine *e, VbRing *ring, VbEngineIo *io)
{
  EngineIoState *st = io->state;
  guint64 delay;

  g_return_if_fail (st != NULL && io->done != NULL);
  st->io = io;
  st->e = e;
  st->ring = ring;
  st->done = 0;
  st->in_barrier = st->in_meta = FALSE;
  /* an injected delay waits in the ring, as a slow disk would */
  if (e->fault && (delay = vb_fault_delay_us (e->fault)) > 0)
    {
      st->delay.tv_sec = (gint64) (delay / G_USEC_PER_SEC);
      st->delay.tv_nsec = (gint64) (delay % G_USEC_PER_SEC) * 1000;
      st->resume.func = on_delayed;
      io_uring_prep_timeout (vb_ring_sqe (ring, &st->resume), &st->delay, 0, 0);
      return;
    }
  start (st);
}
