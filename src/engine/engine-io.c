/* The engine's data path: splits each request along the driver's
 * placement, issues the pieces to the components with io_uring from the
 * calling thread's own ring, and applies one redundancy rule for every
 * driver: read one healthy copy (retry another on error, marking the
 * failed one faulty), write every healthy copy, succeed while one copy of
 * each piece landed. Nothing on this path allocates per request beyond a
 * per-thread buffer that only grows. Servers (FUSE, NBD) reach it through
 * vb_engine_ops. */
#include "config.h"

#include "engine-meta.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>

/* Per thread: a ring, an aligned bounce buffer and the piece table. */
typedef struct {
  struct io_uring ring;
  gboolean ring_ok;
  void *bounce;
  gsize bounce_size;
  VbMapping pieces[MAX_PIECES];
} ThreadState;

/* A device stacked on a device of this process calls it in place, on the
 * same thread: each nesting level gets its own state. */
#define MAX_DEPTH 8

typedef struct {
  ThreadState *levels[MAX_DEPTH];
  guint depth;
} ThreadStates;

static void
thread_states_free (gpointer data)
{
  ThreadStates *all = data;

  for (guint i = 0; i < MAX_DEPTH; i++)
    if (all->levels[i])
      {
        if (all->levels[i]->ring_ok)
          io_uring_queue_exit (&all->levels[i]->ring);
        free (all->levels[i]->bounce);
        g_free (all->levels[i]);
      }
  g_free (all);
}

static GPrivate thread_states_key = G_PRIVATE_INIT (thread_states_free);

/* The state of this thread at the current nesting level; NULL when nested
 * too deep. Every acquire is paired with a release. */
static ThreadState *
thread_state_acquire (void)
{
  ThreadStates *all = g_private_get (&thread_states_key);
  ThreadState *ts;

  if (all == NULL)
    {
      all = g_new0 (ThreadStates, 1);
      g_private_set (&thread_states_key, all);
    }
  if (all->depth >= MAX_DEPTH)
    return NULL;
  ts = all->levels[all->depth];
  if (ts == NULL)
    {
      ts = g_new0 (ThreadState, 1);
      ts->ring_ok = io_uring_queue_init (RING_ENTRIES, &ts->ring, 0) == 0;
      all->levels[all->depth] = ts;
    }
  all->depth++;
  return ts;
}

static void
thread_state_release (void)
{
  ThreadStates *all = g_private_get (&thread_states_key);

  all->depth--;
}

static void *
bounce_buffer (ThreadState *ts, gsize size)
{
  if (ts->bounce_size < size)
    {
      free (ts->bounce);
      ts->bounce = NULL;
      ts->bounce_size = 0;
      if (posix_memalign (&ts->bounce, BUFFER_ALIGN, size) != 0)
        return NULL;
      ts->bounce_size = size;
    }
  return ts->bounce;
}

typedef struct {
  guint piece;
  guint copy; /* index into the piece's copies */
  int res;
  gboolean refused; /* a read not issued: the leg is not in sync any more */
} Sub;

static int
check_range (VbEngine *e, guint64 length, guint64 offset)
{
  if (offset % e->block_size != 0 || length % e->block_size != 0)
    return -EINVAL;
  if (offset > e->layout.size || length > e->layout.size - offset)
    return -EINVAL;
  return 0;
}

/* Fills ts->pieces for [offset, offset + length); returns how many and
 * sets *covered to the bytes they cover (the caller loops for the rest). */
static guint
map_pieces (VbEngine *e, ThreadState *ts, guint64 offset, guint64 length, guint64 *covered)
{
  guint n = 0;
  guint64 done = 0;

  while (done < length && n < MAX_PIECES)
    {
      e->driver->map (&e->layout, offset + done, length - done, &ts->pieces[n]);
      g_assert (ts->pieces[n].length > 0 && ts->pieces[n].offset == offset + done);
      done += ts->pieces[n].length;
      n++;
    }
  *covered = done;
  return n;
}

static void
reap (ThreadState *ts, Sub *subs, guint *inflight)
{
  if (*inflight == 0)
    return;
  io_uring_submit_and_wait (&ts->ring, *inflight);
  while (*inflight > 0)
    {
      struct io_uring_cqe *cqe;
      if (io_uring_wait_cqe (&ts->ring, &cqe) < 0)
        break;
      Sub *s = &subs[io_uring_cqe_get_data64 (cqe)];
      VbMapping *p = &ts->pieces[s->piece];
      /* a short transfer on a component of the right size is an error */
      s->res = cqe->res < 0 ? cqe->res : ((guint64) cqe->res == p->length ? 0 : -EIO);
      io_uring_cqe_seen (&ts->ring, cqe);
      (*inflight)--;
    }
}

/* Runs @n subs (read or write of their piece's copy) and stores each one's
 * result; in-process components are called in place. */
static void
run_subs (VbEngine *e, ThreadState *ts, Sub *subs, guint n, gboolean write, guint8 *buf,
          guint64 base, gboolean fua)
{
  guint inflight = 0;

  for (guint i = 0; i < n; i++)
    {
      Sub *s = &subs[i];
      VbMapping *p = &ts->pieces[s->piece];
      Component *c = &e->components[p->copies[s->copy].component];
      guint64 coff = c->data_offset + p->copies[s->copy].offset;
      guint8 *data = buf + (p->offset - base);
      struct io_uring_sqe *sqe;

      if (!write && G_UNLIKELY (!engine_leg_readable (c)))
        {
          /* picked in sync, not any more: failed meanwhile (another
           * request's error), and another copy is read. A leg put behind
           * without failing first is a bug (assembly puts legs behind
           * before anything is served, a re-add only faulty ones): loud,
           * and fatal in tests, but still never read */
          if (!engine_is_faulty (c))
            g_critical ("%s: a read went to component %s, which is not in sync; another copy "
                        "is read",
                        e->name, c->path);
          s->res = -EIO;
          s->refused = TRUE;
          continue;
        }
      if (c->fd < 0)
        {
          s->res = write ? c->ops->pwrite (c->handle, data, p->length, coff, fua)
                         : c->ops->pread (c->handle, data, p->length, coff);
          continue;
        }
      if ((sqe = io_uring_get_sqe (&ts->ring)) == NULL)
        {
          reap (ts, subs, &inflight);
          sqe = io_uring_get_sqe (&ts->ring);
        }
      if (write)
        io_uring_prep_write (sqe, c->fd, data, p->length, coff);
      else
        io_uring_prep_read (sqe, c->fd, data, p->length, coff);
      if (write && fua)
        sqe->rw_flags = RWF_DSYNC;
      io_uring_sqe_set_data64 (sqe, i);
      inflight++;
    }
  reap (ts, subs, &inflight);
}

/* Read balancing: the copy of @p to read, round robin from @start among
 * the legs known to be in sync only (a leg behind a rebuild or resync has
 * holes or stale chunks: never read); -1 when none is. run_subs checks it
 * again as the read is issued. */
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

static int
read_batch (VbEngine *e, ThreadState *ts, guint n, guint8 *buf, guint64 base)
{
  Sub subs[MAX_PIECES];
  guint tried[MAX_PIECES] = { 0 };
  guint pending = n;
  guint start = g_atomic_int_add (&e->rr, 1);
  guint64 frontier = __atomic_load_n (&e->resync_frontier, __ATOMIC_ACQUIRE);

  for (guint i = 0; i < n; i++)
    {
      const VbMapping *p = &ts->pieces[i];
      /* not made equal yet: the first copy, the one the job copies from */
      gint copy = pick_in_sync (e, p, p->offset + p->length > frontier ? 0 : start + i);
      if (copy < 0)
        return -EIO;
      subs[i] = (Sub){ i, copy, 0 };
    }
  while (pending > 0)
    {
      guint again = 0;
      run_subs (e, ts, subs, pending, FALSE, buf, base, FALSE);
      for (guint i = 0; i < pending; i++)
        {
          Sub *s = &subs[i];
          VbMapping *p = &ts->pieces[s->piece];
          gint next;
          if (s->res == 0)
            continue;
          if (!s->refused)
            engine_component_failed (e, p->copies[s->copy].component, s->res);
          if (++tried[s->piece] >= p->n_copies || (next = pick_in_sync (e, p, s->copy + 1)) < 0)
            return s->res < 0 ? s->res : -EIO;
          subs[again++] = (Sub){ s->piece, next, 0 };
        }
      pending = again;
    }
  return 0;
}

static int
write_batch (VbEngine *e, ThreadState *ts, guint n, guint8 *buf, guint64 base, gboolean fua)
{
  Sub subs[MAX_PIECES * VB_MAX_COPIES / 4];
  guint landed[MAX_PIECES] = { 0 };
  guint nsubs = 0, first_piece = 0;
  int err = 0;

  for (guint i = 0; i <= n; i++)
    {
      /* run when the sub table is full or every piece is queued */
      if (i == n || nsubs + ts->pieces[i].n_copies > G_N_ELEMENTS (subs))
        {
          run_subs (e, ts, subs, nsubs, TRUE, buf, base, fua);
          for (guint k = 0; k < nsubs; k++)
            if (subs[k].res == 0)
              {
                Component *c
                    = &e->components[ts->pieces[subs[k].piece].copies[subs[k].copy].component];
                if (!g_atomic_int_get (&c->rebuilding))
                  landed[subs[k].piece]++;
              }
            else
              {
                err = subs[k].res;
                engine_component_failed (
                    e, ts->pieces[subs[k].piece].copies[subs[k].copy].component, subs[k].res);
              }
          for (guint p = first_piece; p < i; p++)
            if (landed[p] == 0)
              return err < 0 ? err : -EIO;
          first_piece = i;
          nsubs = 0;
          if (i == n)
            break;
        }
      for (guint k = 0; k < ts->pieces[i].n_copies; k++)
        {
          guint ci = ts->pieces[i].copies[k].component;
          if (!engine_is_faulty (&e->components[ci]))
            subs[nsubs++] = (Sub){ i, k, 0 };
          else if (e->meta)
            /* skipping a copy is only safe once the metadata says it failed */
            engine_meta_wait_recorded (e, ci);
        }
    }
  return 0;
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

static int
engine_rw_in (VbEngine *e, ThreadState *ts, gboolean write, guint8 *buf, guint64 length,
              guint64 offset, gboolean fua)
{
  guint8 *io = buf;
  int r;

  if ((r = check_range (e, length, offset)) < 0)
    return r;
  if (write && e->read_only)
    return -EPERM;
  if (!ts->ring_ok)
    return -ENOMEM;
  if (needs_bounce (e, buf))
    {
      io = bounce_buffer (ts, length);
      if (io == NULL)
        return -ENOMEM;
      if (write)
        memcpy (io, buf, length);
    }
  for (guint64 done = 0; done < length;)
    {
      guint64 covered;
      guint n = map_pieces (e, ts, offset + done, length - done, &covered);
      r = write ? write_batch (e, ts, n, io + done, offset + done, fua)
                : read_batch (e, ts, n, io + done, offset + done);
      if (r < 0)
        return r;
      done += covered;
    }
  if (!write && io != buf)
    memcpy (buf, io, length);
  return 0;
}

static int
engine_rw (VbEngine *e, gboolean write, guint8 *buf, guint64 length, guint64 offset, gboolean fua)
{
  ThreadState *ts = thread_state_acquire ();
  int r;

  if (ts == NULL)
    return -ELOOP;
  __atomic_add_fetch (&e->io_count, 1, __ATOMIC_RELAXED);
  if (e->fault && (r = vb_fault_check (e->fault, write, offset, length)) < 0)
    {
      thread_state_release ();
      return r;
    }
  if (write && e->meta && g_atomic_int_get (&e->lost))
    {
      /* the device failed: a write would land on no complete copy */
      thread_state_release ();
      return -EIO;
    }
  /* every write of a redundant device holds the barrier, with metadata or
   * without: a rebuild's copy of a unit must not race with it */
  if (write && (e->meta || e->redundant))
    {
      g_rw_lock_reader_lock (&e->barrier);
      if (e->meta == NULL || (r = engine_meta_write_begin (e, offset, length)) == 0)
        {
          r = engine_rw_in (e, ts, write, buf, length, offset, fua);
          if (e->meta)
            engine_meta_write_end (e, offset, length);
        }
      g_rw_lock_reader_unlock (&e->barrier);
    }
  else
    r = engine_rw_in (e, ts, write, buf, length, offset, fua);
  thread_state_release ();
  return r;
}

static int
engine_pread (void *handle, void *buf, guint64 length, guint64 offset)
{
  return engine_rw (handle, FALSE, buf, length, offset, FALSE);
}

static int
engine_pwrite (void *handle, const void *buf, guint64 length, guint64 offset, gboolean fua)
{
  return engine_rw (handle, TRUE, (guint8 *) buf, length, offset, fua);
}

/* Flush reaches every healthy component; a copy that cannot be made
 * durable is no copy. */
static int
engine_flush (void *handle)
{
  VbEngine *e = handle;
  ThreadState *ts = thread_state_acquire ();
  int results[e->n];
  guint queued = 0;
  int err = 0;
  gboolean any = FALSE;

  if (ts == NULL)
    return -ELOOP;
  if (!ts->ring_ok)
    {
      thread_state_release ();
      return -ENOMEM;
    }
  if (e->fault)
    {
      int f = vb_fault_check (e->fault, TRUE, 0, 0);
      if (f < 0)
        {
          thread_state_release ();
          return f;
        }
    }
  for (guint i = 0; i < e->n; i++)
    {
      Component *c = &e->components[i];
      results[i] = 0;
      if (engine_is_faulty (c))
        continue;
      if (c->fd < 0)
        {
          results[i] = c->ops->flush (c->handle);
          continue;
        }
      struct io_uring_sqe *sqe = io_uring_get_sqe (&ts->ring);
      io_uring_prep_fsync (sqe, c->fd, IORING_FSYNC_DATASYNC);
      io_uring_sqe_set_data64 (sqe, i);
      queued++;
    }
  if (queued)
    io_uring_submit_and_wait (&ts->ring, queued);
  while (queued > 0)
    {
      struct io_uring_cqe *cqe;
      if (io_uring_wait_cqe (&ts->ring, &cqe) < 0)
        break;
      results[io_uring_cqe_get_data64 (cqe)] = cqe->res < 0 ? cqe->res : 0;
      io_uring_cqe_seen (&ts->ring, cqe);
      queued--;
    }
  thread_state_release ();
  for (guint i = 0; i < e->n; i++)
    {
      if (engine_is_faulty (&e->components[i]))
        continue;
      if (results[i] < 0)
        {
          err = results[i];
          engine_component_failed (e, i, results[i]);
        }
      else
        any = TRUE;
    }
  /* without redundancy any failed flush fails; with it, a surviving copy
   * of everything must remain (the failed ones were just dropped) */
  if (!e->redundant)
    return err;
  return any ? 0 : (err < 0 ? err : -EIO);
}

static int
engine_trim_in (VbEngine *e, ThreadState *ts, guint64 length, guint64 offset, gboolean zero)
{
  int r;

  if ((r = check_range (e, length, offset)) < 0)
    return r;
  if (e->read_only)
    return -EPERM;
  for (guint64 done = 0; done < length;)
    {
      guint64 covered;
      guint n = map_pieces (e, ts, offset + done, length - done, &covered);
      for (guint i = 0; i < n; i++)
        {
          VbMapping *p = &ts->pieces[i];
          guint landed = 0;
          int err = 0;
          for (guint k = 0; k < p->n_copies; k++)
            {
              Component *c = &e->components[p->copies[k].component];
              if (engine_is_faulty (c))
                continue;
              int res = engine_component_trim (c, p->length, c->data_offset + p->copies[k].offset,
                                               zero);
              if (res == 0)
                landed++;
              else
                {
                  err = res;
                  engine_component_failed (e, p->copies[k].component, res);
                }
            }
          if (landed == 0)
            return err < 0 ? err : -EIO;
        }
      done += covered;
    }
  return 0;
}

static int
engine_trim (VbEngine *e, guint64 length, guint64 offset, gboolean zero, gboolean fua)
{
  ThreadState *ts = thread_state_acquire ();
  int r;

  if (ts == NULL)
    return -ELOOP;
  if (e->fault && (r = vb_fault_check (e->fault, TRUE, offset, length)) < 0)
    {
      thread_state_release ();
      return r;
    }
  if (e->meta || e->redundant)
    {
      g_rw_lock_reader_lock (&e->barrier);
      if (e->meta == NULL || (r = engine_meta_write_begin (e, offset, length)) == 0)
        {
          r = engine_trim_in (e, ts, length, offset, zero);
          if (e->meta)
            engine_meta_write_end (e, offset, length);
        }
      g_rw_lock_reader_unlock (&e->barrier);
    }
  else
    r = engine_trim_in (e, ts, length, offset, zero);
  thread_state_release ();
  return r == 0 && fua ? engine_flush (e) : r;
}

static int
engine_discard (void *handle, guint64 length, guint64 offset)
{
  return engine_trim (handle, length, offset, FALSE, FALSE);
}

static int
engine_write_zeroes (void *handle, guint64 length, guint64 offset, gboolean fua)
{
  return engine_trim (handle, length, offset, TRUE, fua);
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
};
