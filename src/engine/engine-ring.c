/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* See engine-ring.h. A posted operation goes on a list under a mutex and
 * the ring's eventfd is written; a read of that eventfd stays armed in the
 * ring, so a thread blocked in vb_ring_run wakes for posts as for I/O. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "engine-ring.h"

#include "vb-error.h"

#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct _VbRing {
  struct io_uring ring;
  int event_fd;
  guint64 event_value;
  VbRingOp event_op; /* the armed read of event_fd */
  GMutex lock;
  VbRingOp *posted; /* newest first */
  /* completions taken off a full CQ to make room, not run yet (the ring's
   * thread only), oldest first */
  VbRingOp *deferred, *deferred_tail;
  /* the registered buffer (index 0), or NULL; I/Os through it */
  guint8 *fixed_base;
  gsize fixed_len;
  guint64 fixed_count;
};

static void
arm_event (VbRing *r)
{
  struct io_uring_sqe *sqe = vb_ring_sqe (r, &r->event_op);

  io_uring_prep_read (sqe, r->event_fd, &r->event_value, sizeof r->event_value, 0);
}

/* The posted operations run oldest first. */
static void
run_posted (VbRingOp *op, int res)
{
  VbRing *r = G_STRUCT_MEMBER_P (op, -G_STRUCT_OFFSET (VbRing, event_op));
  VbRingOp *list, *reversed = NULL;

  g_mutex_lock (&r->lock);
  list = r->posted;
  r->posted = NULL;
  g_mutex_unlock (&r->lock);
  while (list)
    {
      VbRingOp *next = list->next;
      list->next = reversed;
      reversed = list;
      list = next;
    }
  arm_event (r);
  while (reversed)
    {
      VbRingOp *next = reversed->next;
      reversed->next = NULL;
      reversed->func (reversed, reversed->posted_res);
      reversed = next;
    }
}

/* A completion queue far larger than the submission queue: an operation
 * in flight holds no submission entry, and many complete between two runs
 * of the ring (an overflowing CQ makes the next submission fail -EBUSY). */
static int
ring_init (VbRing *r, guint entries)
{
  struct io_uring_params p = { 0 };
  int e;

  p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_COOP_TASKRUN;
  p.cq_entries = MAX (entries * 16, 16384);
  e = io_uring_queue_init_params (entries, &r->ring, &p);
  if (e == -EINVAL)
    {
      /* a kernel before 5.19: no cooperative task running */
      p = (struct io_uring_params){ .flags = IORING_SETUP_CQSIZE,
                                    .cq_entries = MAX (entries * 16, 16384) };
      e = io_uring_queue_init_params (entries, &r->ring, &p);
    }
  return e;
}

VbRing *
vb_ring_new (guint entries, GError **error)
{
  VbRing *r = g_new0 (VbRing, 1);
  int e;

  e = ring_init (r, entries);
  if (e < 0)
    {
      g_free (r);
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("io_uring: %s"), g_strerror (-e));
      return NULL;
    }
  r->event_fd = eventfd (0, EFD_CLOEXEC);
  if (r->event_fd < 0)
    {
      e = errno;
      io_uring_queue_exit (&r->ring);
      g_free (r);
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("eventfd: %s"), g_strerror (e));
      return NULL;
    }
  g_mutex_init (&r->lock);
  r->event_op.func = run_posted;
  arm_event (r);
  return r;
}

void
vb_ring_free (VbRing *r)
{
  if (r == NULL)
    return;
  /* (the armed read goes with the ring, and what was posted to a ring no
   * one runs any more with it) */
  io_uring_queue_exit (&r->ring);
  close (r->event_fd);
  g_mutex_clear (&r->lock);
  g_free (r);
}

/* The kernel will not take more submissions until completions are
 * reaped: they are taken off the CQ now and run at the next vb_ring_run
 * (not here: a function run from here could re-enter its caller). */
static void
defer_completions (VbRing *r)
{
  struct io_uring_cqe *cqe;

  while (io_uring_peek_cqe (&r->ring, &cqe) == 0)
    {
      VbRingOp *op = io_uring_cqe_get_data (cqe);
      op->posted_res = cqe->res;
      op->next = NULL;
      if (r->deferred_tail)
        r->deferred_tail->next = op;
      else
        r->deferred = op;
      r->deferred_tail = op;
      io_uring_cqe_seen (&r->ring, cqe);
    }
}

struct io_uring_sqe *
vb_ring_sqe (VbRing *r, VbRingOp *op)
{
  struct io_uring_sqe *sqe = io_uring_get_sqe (&r->ring);

  while (sqe == NULL)
    {
      /* full: what is queued goes to the kernel */
      int e = io_uring_submit (&r->ring);
      if (e < 0 && e != -EINTR)
        {
          /* -EBUSY, -EAGAIN: the CQ is full (IORING_FEAT_NODROP keeps
           * the overflow) and wants reaping before it takes more */
          defer_completions (r);
          if (e != -EBUSY && e != -EAGAIN)
            g_usleep (1000);
        }
      sqe = io_uring_get_sqe (&r->ring);
    }
  io_uring_sqe_set_data (sqe, op);
  return sqe;
}

void
vb_ring_post (VbRing *r, VbRingOp *op, int res)
{
  guint64 one = 1;
  gboolean wake;

  op->posted_res = res;
  g_mutex_lock (&r->lock);
  wake = r->posted == NULL;
  op->next = r->posted;
  r->posted = op;
  g_mutex_unlock (&r->lock);
  /* one write wakes the ring for the whole list */
  if (wake && write (r->event_fd, &one, sizeof one) < 0)
    g_critical ("vb_ring_post: eventfd: %s", g_strerror (errno));
}

int
vb_ring_run (VbRing *r, gboolean wait)
{
  struct io_uring_cqe *cqe;
  int ran = 0, e;

  while (r->deferred)
    {
      VbRingOp *op = r->deferred;
      r->deferred = op->next;
      if (r->deferred == NULL)
        r->deferred_tail = NULL;
      op->next = NULL;
      op->func (op, op->posted_res);
      ran++;
      wait = FALSE;
    }
  e = wait ? io_uring_submit_and_wait (&r->ring, 1) : io_uring_submit (&r->ring);
  /* -EBUSY, -EAGAIN: completions to reap first; -EBADR: the kernel lost
   * an overflowed one (no memory) — nothing to do but go on */
  if (e < 0 && e != -EINTR && e != -EBUSY && e != -EAGAIN && e != -EBADR)
    return e;
  /* one completion at a time: a function may queue more (and even wait
   * on a deeper ring), so the CQ head moves before it runs */
  while (io_uring_peek_cqe (&r->ring, &cqe) == 0)
    {
      VbRingOp *op = io_uring_cqe_get_data (cqe);
      int res = cqe->res;

      io_uring_cqe_seen (&r->ring, cqe);
      op->func (op, res);
      ran++;
    }
  return ran;
}

struct io_uring *
vb_ring_uring (VbRing *r)
{
  return &r->ring;
}

int
vb_ring_register_buffer (VbRing *r, void *base, gsize len)
{
  struct iovec iov = { .iov_base = base, .iov_len = len };
  int e;

  g_return_val_if_fail (r->fixed_base == NULL, -EEXIST);
  e = io_uring_register_buffers (&r->ring, &iov, 1);
  if (e < 0)
    return e;
  r->fixed_base = base;
  r->fixed_len = len;
  return 0;
}

int
vb_ring_buffer_index (VbRing *r, const void *data, gsize len)
{
  const guint8 *d = data;

  if (r->fixed_base == NULL || d < r->fixed_base || len > r->fixed_len
      || (gsize) (d - r->fixed_base) > r->fixed_len - len)
    return -1;
  r->fixed_count++;
  return 0;
}

guint64
vb_ring_fixed_count (VbRing *r)
{
  return r->fixed_count;
}
