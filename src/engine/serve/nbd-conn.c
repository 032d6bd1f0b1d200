/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The NBD transmission phase of one connection, after the handshake
 * (nbd-handshake.c), on the serving model of every front end: the
 * connection's thread owns a ring, reads requests when the ring says the
 * socket has bytes, starts each on the export (nbd-run.c) and sends the
 * replies as they complete, out of order, several in one sendmsg(2).
 * Every length a client sends is checked against a fixed bound before
 * anything is read into memory, and a connection holds at most
 * VB_NBD_MAX_IN_FLIGHT requests and VB_NBD_BUFFER_BUDGET bytes of
 * buffers, so a hostile client costs a bounded amount of memory. */
#include "config.h"

#include "nbd-run.h"

#include <poll.h>
#include <stdlib.h>

/* What one recv(2) takes at most: many request headers (and small write
 * payloads). Short of a slot or a buffer nothing more is read, so this is
 * all a connection holds beyond its limits. A payload of at least half of
 * it goes straight from the socket to its buffer. */
#define VB_NBD_RECV_BUFFER (64u << 10)
/* Pieces of replies given to one sendmsg(2). */
#define VB_NBD_SEND_IOV 64u
#define RING_ENTRIES 256u

G_STATIC_ASSERT ((VB_NBD_MIN_BUFFER << (VB_NBD_BUFFER_CLASSES - 1)) == VB_NBD_MAX_REQUEST);
G_STATIC_ASSERT (VB_NBD_MAX_REQUEST <= VB_NBD_BUFFER_BUDGET);
G_STATIC_ASSERT (VB_NBD_SEND_IOV >= NBD_JOB_IOV);

static guint32
nbd_error_from_errno (int r)
{
  switch (-r)
    {
    case EPERM:
    case EROFS:
      return NBD_EPERM;
    case ENOMEM:
      return NBD_ENOMEM;
    case EINVAL:
      return NBD_EINVAL;
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return NBD_ENOSPC;
    case EOVERFLOW:
      return NBD_EOVERFLOW;
    case ESHUTDOWN:
      return NBD_ESHUTDOWN;
    default:
      return NBD_EIO;
    }
}

/* ---- buffers and request slots ---- */

static gsize
buffer_size (guint cls)
{
  return (gsize) VB_NBD_MIN_BUFFER << cls;
}

static guint
buffer_class (guint32 length)
{
  guint cls = 0;

  while (buffer_size (cls) < length)
    cls++;
  g_assert (cls < VB_NBD_BUFFER_CLASSES);
  return cls;
}

/* Free buffers of each size are linked through their first bytes, so the
 * steady state allocates nothing. */
static guint8 *
free_list_pop (NbdConn *c, guint cls)
{
  guint8 *buf = c->free_bufs[cls];

  if (buf)
    memcpy (&c->free_bufs[cls], buf, sizeof buf);
  return buf;
}

static void
free_list_push (NbdConn *c, guint cls, guint8 *buf)
{
  memcpy (buf, &c->free_bufs[cls], sizeof buf);
  c->free_bufs[cls] = buf;
}

/* A buffer of class @cls: a free one, else a new one within the budget,
 * made room for by freeing free buffers of other sizes. NULL when the
 * buffers in use leave no room. */
static guint8 *
buffer_take (NbdConn *c, guint cls)
{
  gsize need = buffer_size (cls);
  guint8 *buf = free_list_pop (c, cls);
  void *mem;

  if (buf)
    return buf;
  for (guint k = VB_NBD_BUFFER_CLASSES; k-- > 0 && c->buf_bytes + need > VB_NBD_BUFFER_BUDGET;)
    while (c->buf_bytes + need > VB_NBD_BUFFER_BUDGET && (buf = free_list_pop (c, k)) != NULL)
      {
        free (buf);
        c->buf_bytes -= buffer_size (k);
      }
  if (c->buf_bytes + need > VB_NBD_BUFFER_BUDGET)
    return NULL;
  /* page-aligned, so that the engine's O_DIRECT I/O takes it as it is */
  if (posix_memalign (&mem, VB_NBD_MIN_BUFFER, need) != 0)
    return NULL;
  c->buf_bytes += need;
  return mem;
}

/* A slot for @req, with a buffer of @buf_len bytes (0: none); NULL
 * (nothing taken) at the limits, and the reading waits for a slot to come
 * back: that is the backpressure on the client. */
static NbdJob *
job_take (NbdConn *c, const VbNbdRequest *req, guint32 buf_len)
{
  NbdJob *job = c->free_jobs;

  if (job == NULL)
    return NULL;
  if (buf_len > 0)
    {
      job->buf_class = buffer_class (buf_len);
      if ((job->buf = buffer_take (c, job->buf_class)) == NULL)
        return NULL;
    }
  c->free_jobs = job->next;
  c->n_used++;
  job->req = *req;
  job->next = NULL;
  job->n_iov = job->iov_at = 0;
  return job;
}

/* Gives back the slot (and buffer) of a request whose reply went out, or
 * never will; reading goes on if it stopped for want of one. */
static void
job_release (NbdConn *c, NbdJob *job)
{
  if (job->buf)
    free_list_push (c, job->buf_class, job->buf);
  job->buf = NULL;
  job->next = c->free_jobs;
  c->free_jobs = job;
  c->n_used--;
  c->starved = FALSE;
}

/* ---- replies ---- */

static void
simple_header (guint8 *h, const VbNbdRequest *req, guint32 error)
{
  put32 (h, NBD_SIMPLE_REPLY_MAGIC);
  put32 (h + 4, error);
  memcpy (h + 8, req->cookie, 8);
}

static void
chunk_header (guint8 *h, const VbNbdRequest *req, guint16 flags, guint16 type, guint32 len)
{
  put32 (h, NBD_STRUCTURED_REPLY_MAGIC);
  put16 (h + 4, flags);
  put16 (h + 6, type);
  memcpy (h + 8, req->cookie, 8);
  put32 (h + 16, len);
}

static void
add_iov (NbdJob *job, const void *base, gsize len)
{
  if (len == 0)
    return;
  job->iov[job->n_iov].iov_base = (void *) base;
  job->iov[job->n_iov].iov_len = len;
  job->n_iov++;
}

/* Queues @job's reply; it goes out, whole and in queue order, when the
 * connection's thread next sends. */
static void
reply_queue (NbdConn *c, NbdJob *job)
{
  if (c->broken)
    {
      job_release (c, job);
      return;
    }
  if (c->send_tail)
    c->send_tail->next = job;
  else
    c->send_head = job;
  c->send_tail = job;
}

static void
reply_status (NbdConn *c, NbdJob *job, guint32 error, const char *why)
{
  const VbNbdRequest *req = &job->req;
  gsize why_len = why ? strlen (why) : 0;

  if (!c->terms.structured)
    {
      simple_header (job->head, req, error);
      add_iov (job, job->head, 16);
    }
  else if (error == 0)
    {
      chunk_header (job->head, req, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_NONE, 0);
      add_iov (job, job->head, 20);
    }
  else
    {
      chunk_header (job->head, req, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR, 6 + why_len);
      put32 (job->head + 20, error);
      put16 (job->head + 24, why_len);
      add_iov (job, job->head, 26);
      add_iov (job, why, why_len);
    }
  reply_queue (c, job);
}

/* A successful READ: all of its data in one reply (one chunk when
 * structured). */
static void
reply_read_data (NbdConn *c, NbdJob *job)
{
  const VbNbdRequest *req = &job->req;

  if (c->terms.structured)
    {
      chunk_header (job->head, req, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_OFFSET_DATA,
                    8 + req->length);
      put64 (job->head + 20, req->offset);
      add_iov (job, job->head, 28);
    }
  else
    {
      simple_header (job->head, req, 0);
      add_iov (job, job->head, 16);
    }
  add_iov (job, job->buf, req->length);
  reply_queue (c, job);
}

/* A successful BLOCK_STATUS: one chunk for the one context, the context
 * ID and descriptors already in the buffer. */
static void
reply_block_status (NbdConn *c, NbdJob *job)
{
  guint32 len = 4 + 8 * job->n_extents;

  chunk_header (job->head, &job->req, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_BLOCK_STATUS, len);
  add_iov (job, job->head, 20);
  add_iov (job, job->buf, len);
  reply_queue (c, job);
}

void
nbd_job_done (NbdJob *job, int res)
{
  NbdConn *c = job->conn;

  if (res == 0 && job->req.type == NBD_CMD_READ)
    reply_read_data (c, job);
  else if (res == 0 && job->req.type == NBD_CMD_BLOCK_STATUS)
    reply_block_status (c, job);
  else
    reply_status (c, job, res < 0 ? nbd_error_from_errno (res) : 0,
                  res == 0                         ? NULL
                  : job->req.type == NBD_CMD_READ  ? "read error"
                  : job->req.type == NBD_CMD_WRITE ? "write error"
                                                   : "I/O error");
}

/* A reply that cannot be sent, or a client that broke the protocol, ends
 * the connection: shutdown(2) ends the reading, replies not sent are
 * dropped, and what runs on the device still finishes (its buffers are
 * the connection's). */
static void rx_drop_payload (NbdConn *c);

static void
conn_break (NbdConn *c)
{
  c->broken = TRUE;
  c->rx_stopped = TRUE;
  rx_drop_payload (c);
  shutdown (c->fd, SHUT_RDWR);
  while (c->send_head)
    {
      NbdJob *job = c->send_head;
      c->send_head = job->next;
      job_release (c, job);
    }
  c->send_tail = NULL;
}

static void
arm_poll (NbdConn *c, VbRingOp *op, gboolean *armed, short events)
{
  if (*armed)
    return;
  io_uring_prep_poll_add (vb_ring_sqe (c->ring, op), c->fd, events);
  *armed = TRUE;
}

/* Takes @n sent bytes off the front of the queue. */
static void
sent (NbdConn *c, gsize n)
{
  while (c->send_head)
    {
      NbdJob *job = c->send_head;
      struct iovec *v = &job->iov[job->iov_at];

      if (job->iov_at < job->n_iov && n < v->iov_len)
        {
          v->iov_base = (guint8 *) v->iov_base + n;
          v->iov_len -= n;
          return;
        }
      if (job->iov_at < job->n_iov)
        {
          n -= v->iov_len;
          job->iov_at++;
          continue;
        }
      c->send_head = job->next;
      if (c->send_head == NULL)
        c->send_tail = NULL;
      job_release (c, job);
    }
}

/* Sends what is queued, the replies of many requests in one call, until
 * the socket takes no more (then the ring says when it does). */
static void
send_queued (NbdConn *c)
{
  while (c->send_head && !c->out_polling)
    {
      struct iovec v[VB_NBD_SEND_IOV];
      struct msghdr m = { .msg_iov = v };
      ssize_t r;

      for (NbdJob *job = c->send_head; job && m.msg_iovlen + NBD_JOB_IOV <= G_N_ELEMENTS (v);
           job = job->next)
        for (guint k = job->iov_at; k < job->n_iov; k++)
          v[m.msg_iovlen++] = job->iov[k];
      r = sendmsg (c->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0 && errno == EAGAIN)
        arm_poll (c, &c->out_op, &c->out_polling, POLLOUT);
      else if (r < 0)
        {
          if (c->result == 0)
            c->result = -errno;
          conn_break (c);
        }
      else
        sent (c, r);
    }
}

static void
on_out (VbRingOp *op, int res)
{
  NbdConn *c = G_STRUCT_MEMBER_P (op, -G_STRUCT_OFFSET (NbdConn, out_op));

  c->out_polling = FALSE;
}

/* ---- reading requests ---- */

static void
on_in (VbRingOp *op, int res)
{
  NbdConn *c = G_STRUCT_MEMBER_P (op, -G_STRUCT_OFFSET (NbdConn, in_op));

  c->in_polling = FALSE;
}

/* A WRITE whose payload will never all come: its slot goes back (it never
 * started, so nothing else holds it). */
static void
rx_drop_payload (NbdConn *c)
{
  if (c->rx_job)
    job_release (c, g_steal_pointer (&c->rx_job));
  c->rx_need = 0;
}

static void
rx_end (NbdConn *c, int r)
{
  c->rx_stopped = TRUE;
  rx_drop_payload (c);
  if (c->result == 0)
    c->result = r;
  /* A broken protocol ends it now; after a DISC (the spec: finish what is
   * outstanding, then close) or a client gone, what was received still
   * runs and its replies are sent, or fail at once. */
  if (r < 0 && r != -ECONNRESET)
    conn_break (c);
}

/* Receives into @dst (at most @len bytes) what the socket has: how many,
 * or 0 when it has nothing now (the ring watches it) or the reading
 * ended. */
static gsize
rx_recv (NbdConn *c, void *dst, gsize len)
{
  for (;;)
    {
      ssize_t r = recv (c->fd, dst, len, MSG_DONTWAIT);
      if (r > 0)
        return r;
      if (r == 0)
        rx_end (c, -ECONNRESET);
      else if (errno == EINTR)
        continue;
      else if (errno == EAGAIN)
        arm_poll (c, &c->in_op, &c->in_polling, POLLIN);
      else
        rx_end (c, -errno);
      return 0;
    }
}

/* At least one more byte in rbuf (FALSE: none now). */
static gboolean
rx_fill (NbdConn *c)
{
  gsize n;

  if (c->rpos > 0)
    {
      memmove (c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
      c->rlen -= c->rpos;
      c->rpos = 0;
    }
  n = rx_recv (c, c->rbuf + c->rlen, VB_NBD_RECV_BUFFER - c->rlen);
  c->rlen += n;
  return n > 0;
}

/* Takes the rest of a WRITE's payload (or of a refused one's, into
 * nothing): TRUE when it is all in. */
static gboolean
rx_payload (NbdConn *c)
{
  while (c->rx_need > 0)
    {
      gsize have = MIN (c->rlen - c->rpos, c->rx_need), n;
      guint8 *dst = c->rx_job ? c->rx_job->buf + c->rx_job->req.length - c->rx_need : NULL;

      if (have > 0)
        {
          if (dst)
            memcpy (dst, c->rbuf + c->rpos, have);
          c->rpos += have;
          c->rx_need -= have;
          continue;
        }
      if (dst && c->rx_need >= VB_NBD_RECV_BUFFER / 2)
        {
          n = rx_recv (c, dst, c->rx_need);
          c->rx_need -= n;
        }
      else
        n = rx_fill (c);
      if (n == 0)
        return FALSE;
    }
  return TRUE;
}

/* Handles the request whose header is at rpos: FALSE (nothing consumed)
 * when no slot or buffer is free for it, or the reading ended. */
static gboolean
rx_request (NbdConn *c)
{
  const guint8 *h = c->rbuf + c->rpos;
  VbNbdRequest req;
  const char *why = NULL;
  guint32 error;
  NbdJob *job;

  if (get32 (h) != NBD_REQUEST_MAGIC)
    {
      rx_end (c, -EPROTO); /* lost framing: nothing after this can be trusted */
      return FALSE;
    }
  req.flags = get16 (h + 4);
  req.type = get16 (h + 6);
  memcpy (req.cookie, h + 8, 8);
  req.offset = get64 (h + 16);
  req.length = get32 (h + 24);
  if (req.type == NBD_CMD_DISC)
    {
      c->rpos += NBD_REQUEST_BYTES;
      rx_end (c, 0);
      return FALSE;
    }
  /* Closing rather than swallowing up to 4 GiB: the spec lets a server
   * treat a payload above the advertised maximum as an attack. */
  if (req.type == NBD_CMD_WRITE && req.length > VB_NBD_MAX_REQUEST)
    {
      rx_end (c, -EMSGSIZE);
      return FALSE;
    }
  error = nbd_check_request (c, &req, &why);
  job = job_take (c, &req,
                  error != 0                                              ? 0
                  : req.type == NBD_CMD_READ || req.type == NBD_CMD_WRITE ? req.length
                  : req.type == NBD_CMD_BLOCK_STATUS                      ? VB_NBD_STATUS_BYTES
                                                                          : 0);
  if (job == NULL && c->n_used == 0)
    {
      /* every slot is free and the whole budget can be had: only memory
       * itself is lacking, and waiting would be for ever */
      rx_end (c, -ENOMEM);
      return FALSE;
    }
  if (job == NULL)
    {
      c->starved = TRUE;
      return FALSE;
    }
  c->rpos += NBD_REQUEST_BYTES;
  if (error != 0 || ((req.type == NBD_CMD_READ || req.type == NBD_CMD_WRITE) && req.length == 0))
    {
      reply_status (c, job, error, why);
      /* a refused write's payload is read all the same, or the next
       * request header would be taken from the middle of it */
      if (req.type == NBD_CMD_WRITE)
        c->rx_need = req.length;
      return TRUE;
    }
  if (req.type == NBD_CMD_WRITE)
    {
      c->rx_job = job;
      c->rx_need = req.length;
      return TRUE;
    }
  nbd_job_start (c, job);
  return TRUE;
}

/* Reads and starts requests until the socket has no more now, a slot or
 * a buffer is lacking, or the reading ends. */
static void
rx_run (NbdConn *c)
{
  while (!c->rx_stopped && !c->starved && !c->in_polling)
    {
      if (c->rx_need > 0)
        {
          if (!rx_payload (c))
            return;
          if (c->rx_job)
            nbd_job_start (c, g_steal_pointer (&c->rx_job));
          continue;
        }
      if (c->rlen - c->rpos < NBD_REQUEST_BYTES)
        {
          if (!rx_fill (c))
            return;
          continue;
        }
      if (!rx_request (c))
        return;
    }
}

/* ---- the connection's thread ---- */

static int
transmission (NbdConn *c)
{
  NbdJob *jobs = g_new0 (NbdJob, VB_NBD_MAX_IN_FLIGHT);
  g_autoptr (GError) error = NULL;
  guint8 *buf;

  c->ring = vb_ring_new (RING_ENTRIES, &error);
  if (c->ring == NULL)
    {
      g_debug ("nbd: %s: %s", c->export->name, error->message);
      g_free (jobs);
      return -ENOMEM;
    }
  c->rbuf = g_malloc (VB_NBD_RECV_BUFFER);
  c->in_op.func = on_in;
  c->out_op.func = on_out;
  g_queue_init (&c->order);
  for (guint i = VB_NBD_MAX_IN_FLIGHT; i-- > 0;)
    {
      nbd_job_init (c, &jobs[i]);
      jobs[i].next = c->free_jobs;
      c->free_jobs = &jobs[i];
    }

  for (;;)
    {
      int r;

      rx_run (c);
      send_queued (c);
      if (c->rx_stopped && c->n_used == 0)
        break;
      /* a reply sent gave back the slot the reading stopped for: it goes
       * on before anything is waited for (nothing may be left to wake) */
      if (!c->rx_stopped && !c->starved && !c->in_polling)
        continue;
      r = vb_ring_run (c->ring, TRUE);
      if (r < 0 && r != -EINTR)
        g_critical ("nbd: %s: io_uring: %s", c->export->name, g_strerror (-r));
    }

  nbd_run_stop (c);
  /* (the polls the ring still holds end with it) */
  g_clear_pointer (&c->ring, vb_ring_free);
  for (guint i = 0; i < VB_NBD_MAX_IN_FLIGHT; i++)
    nbd_job_clear (&jobs[i]);
  g_free (jobs);
  for (guint k = 0; k < VB_NBD_BUFFER_CLASSES; k++)
    while ((buf = free_list_pop (c, k)) != NULL)
      free (buf);
  g_free (c->rbuf);
  return c->result;
}

int
vb_nbd_conn_run (const VbNbdExport *export, const VbNbdTls *tls, int fd, gboolean handshake)
{
  NbdConn c = { .export = export, .fd = fd };
  VbNbdTlsLink *link = NULL;
  int r = 1;

  g_return_val_if_fail (export != NULL && fd >= 0, -EINVAL);

  if (!handshake)
    {
      vb_nbd_terms_load (export, &c.terms);
      c.live_size = TRUE;
    }
  else
    r = vb_nbd_handshake (export, tls, fd, &c.terms, &link, &c.fd);
  if (r == 1)
    r = transmission (&c);
  vb_nbd_tls_link_finish (link);
  return r;
}
