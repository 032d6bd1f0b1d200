/* The NBD transmission phase of one connection, after the handshake
 * (nbd-handshake.c): the connection's thread reads requests and a small
 * pool of workers runs them and replies out of order. Every length a client
 * sends is checked against a fixed bound before anything is read into
 * memory, and a connection holds at most VB_NBD_MAX_IN_FLIGHT requests and
 * VB_NBD_BUFFER_BUDGET bytes of buffers, so a hostile client costs a bounded
 * amount of memory. */
#include "config.h"

#include "nbd-conn.h"
#include "nbd-handshake.h"
#include "nbd-server.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* Wire constants, named and valued as in the NBD protocol (doc/proto.md of
 * NetworkBlockDevice/nbd). */
#define NBD_REQUEST_MAGIC 0x25609513u
#define NBD_SIMPLE_REPLY_MAGIC 0x67446698u
#define NBD_STRUCTURED_REPLY_MAGIC 0x668e33efu

#define NBD_CMD_READ 0u
#define NBD_CMD_WRITE 1u
#define NBD_CMD_DISC 2u
#define NBD_CMD_FLUSH 3u
#define NBD_CMD_TRIM 4u
#define NBD_CMD_WRITE_ZEROES 6u

#define NBD_CMD_FLAG_FUA (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE (1u << 1)

#define NBD_REPLY_FLAG_DONE (1u << 0)
#define NBD_REPLY_TYPE_NONE 0u
#define NBD_REPLY_TYPE_OFFSET_DATA 1u
#define NBD_REPLY_TYPE_ERROR ((1u << 15) + 1)

#define NBD_EPERM 1u
#define NBD_EIO 5u
#define NBD_ENOMEM 12u
#define NBD_EINVAL 22u
#define NBD_ENOSPC 28u
#define NBD_EOVERFLOW 75u
#define NBD_ESHUTDOWN 108u

/* Requests reach the device in pieces of at most this size. */
#define VB_NBD_IO_CHUNK (4u << 20)

/* Buffers come in power-of-two sizes from a page to VB_NBD_MAX_REQUEST. */
#define VB_NBD_MIN_BUFFER 4096u
#define VB_NBD_BUFFER_CLASSES 14u
/* What the reader takes from the socket at once: many request headers (and
 * small write payloads) per recv(2). At the in-flight limit the reader stops
 * calling recv(2), so this is all it holds beyond the limit. */
#define VB_NBD_RECV_BUFFER (64u << 10)

G_STATIC_ASSERT ((VB_NBD_MIN_BUFFER << (VB_NBD_BUFFER_CLASSES - 1)) == VB_NBD_MAX_REQUEST);
G_STATIC_ASSERT (VB_NBD_MAX_REQUEST <= VB_NBD_BUFFER_BUDGET);

typedef struct {
  guint16 flags;
  guint16 type;
  guint8 cookie[8]; /* "handle": echoed back untouched */
  guint64 offset;
  guint32 length;
} VbNbdRequest;

/* One request from its header to its reply. */
typedef struct {
  VbNbdRequest req;
  guint8 *buf; /* READ and WRITE: the data, in a buffer of buf_class */
  guint buf_class;
  GList queue_link; /* in queue while no worker has taken it */
  GList order_link; /* in in_flight until completed */
} VbNbdJob;

typedef struct {
  const VbNbdExport *export;
  int fd;
  VbNbdTerms terms;
  /* no handshake: the peer (the kernel nbd client) is told of a new size
   * by its owner, so requests are checked against the size of now */
  gboolean live_size;

  /* Transmission. rbuf belongs to the reader (the connection's thread);
   * lock guards everything after send_lock, and send_lock keeps each
   * reply whole on the socket. */
  guint8 *rbuf; /* VB_NBD_RECV_BUFFER bytes, rpos to rlen not yet parsed */
  gsize rpos, rlen;
  GMutex send_lock;
  GMutex lock;
  GCond work_cond; /* a job was queued, or the workers must stop */
  GCond done_cond; /* a job completed */
  guint n_done_waiters;
  GQueue queue;     /* jobs no worker has taken yet, oldest first */
  GQueue in_flight; /* jobs not completed, in the order received */
  VbNbdJob jobs[VB_NBD_MAX_IN_FLIGHT];
  VbNbdJob *free_jobs[VB_NBD_MAX_IN_FLIGHT];
  guint n_free_jobs;
  /* Free buffers of each size, linked through their first bytes, so the
   * steady state allocates nothing. */
  guint8 *free_bufs[VB_NBD_BUFFER_CLASSES];
  gsize buf_bytes; /* allocated, in use or free: at most the budget */
  GThread *workers[VB_NBD_MAX_WORKERS];
  guint n_workers;
  guint n_idle; /* workers waiting on work_cond */
  gboolean stopping;
  gint broken; /* atomic: a reply could not be sent, so queued jobs are dropped */
} VbNbdConn;

/* ---- wire helpers ---- */

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

/* ---- transmission: replies ---- */

/* A reply that cannot be sent ends the connection: shutdown(2) wakes the
 * reader and any worker blocked on the socket, and jobs not yet started
 * are dropped. The fd itself stays open until vb_nbd_conn_run returns. */
static void
conn_break (VbNbdConn *c)
{
  g_atomic_int_set (&c->broken, 1);
  shutdown (c->fd, SHUT_RDWR);
}

/* Every reply of the transmission phase is sent whole under send_lock, so
 * the pieces of one reply (a structured read's chunk after its header)
 * never interleave with another's. Replies leave in any order: the client
 * matches them to requests by cookie. */
static int
send_reply (VbNbdConn *c, struct iovec *iov, int n)
{
  int r;

  g_mutex_lock (&c->send_lock);
  r = send_iov (c->fd, iov, n);
  g_mutex_unlock (&c->send_lock);
  if (r < 0)
    conn_break (c);
  return r;
}

static void
simple_header (guint8 h[16], const VbNbdRequest *req, guint32 error)
{
  put32 (h, NBD_SIMPLE_REPLY_MAGIC);
  put32 (h + 4, error);
  memcpy (h + 8, req->cookie, 8);
}

static void
chunk_header (guint8 h[20], const VbNbdRequest *req, guint16 flags, guint16 type, guint32 len)
{
  put32 (h, NBD_STRUCTURED_REPLY_MAGIC);
  put16 (h + 4, flags);
  put16 (h + 6, type);
  memcpy (h + 8, req->cookie, 8);
  put32 (h + 16, len);
}

/* The final reply of any command but a successful READ. */
static int
send_status (VbNbdConn *c, const VbNbdRequest *req, guint32 error, const char *why)
{
  guint8 h[20 + 6];
  struct iovec iov[2] = { { h, 20 }, { NULL, 0 } };

  if (!c->terms.structured)
    {
      simple_header (h, req, error);
      iov[0].iov_len = 16;
      return send_reply (c, iov, 1);
    }
  if (error == 0)
    {
      chunk_header (h, req, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_NONE, 0);
      return send_reply (c, iov, 1);
    }
  iov[1].iov_base = (void *) why;
  iov[1].iov_len = why ? strlen (why) : 0;
  chunk_header (h, req, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR, 6 + iov[1].iov_len);
  put32 (h + 20, error);
  put16 (h + 24, iov[1].iov_len);
  iov[0].iov_len = sizeof h;
  return send_reply (c, iov, 2);
}

/* A successful READ: all of its data, which is in the buffer by now, in
 * one reply (one chunk when structured). */
static int
send_read_data (VbNbdConn *c, const VbNbdRequest *req, const guint8 *data)
{
  guint8 h[20 + 8];
  struct iovec iov[2] = { { h, 16 }, { (void *) data, req->length } };

  if (c->terms.structured)
    {
      chunk_header (h, req, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_OFFSET_DATA, 8 + req->length);
      put64 (h + 20, req->offset);
      iov[0].iov_len = sizeof h;
    }
  else
    simple_header (h, req, 0);
  return send_reply (c, iov, 2);
}

/* The NBD error a request earns before touching the device (0: none). */
static guint32
check_request (VbNbdConn *c, const VbNbdRequest *req, const char **why)
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

/* ---- transmission: request slots and buffers ---- */

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

static guint8 *
free_list_pop (VbNbdConn *c, guint cls)
{
  guint8 *buf = c->free_bufs[cls];

  if (buf)
    memcpy (&c->free_bufs[cls], buf, sizeof buf);
  return buf;
}

static void
free_list_push (VbNbdConn *c, guint cls, guint8 *buf)
{
  memcpy (buf, &c->free_bufs[cls], sizeof buf);
  c->free_bufs[cls] = buf;
}

/* A buffer of class @cls: a free one, else a new one within the budget,
 * made room for by freeing free buffers of other sizes. NULL when the
 * buffers in use leave no room. Under c->lock. */
static guint8 *
buffer_take_locked (VbNbdConn *c, guint cls)
{
  gsize need = buffer_size (cls);
  guint8 *buf = free_list_pop (c, cls);

  if (buf)
    return buf;
  for (guint k = VB_NBD_BUFFER_CLASSES; k-- > 0 && c->buf_bytes + need > VB_NBD_BUFFER_BUDGET;)
    while (c->buf_bytes + need > VB_NBD_BUFFER_BUDGET && (buf = free_list_pop (c, k)) != NULL)
      {
        g_aligned_free (buf);
        c->buf_bytes -= buffer_size (k);
      }
  if (c->buf_bytes + need > VB_NBD_BUFFER_BUDGET)
    return NULL;
  c->buf_bytes += need;
  /* Page-aligned so that an engine using O_DIRECT can take it as is. */
  return g_aligned_alloc (need, 1, VB_NBD_MIN_BUFFER);
}

static void
done_wait_locked (VbNbdConn *c)
{
  c->n_done_waiters++;
  g_cond_wait (&c->done_cond, &c->lock);
  c->n_done_waiters--;
}

/* A request slot, and a buffer when @req carries data. At the limits this
 * waits for a job to complete, and meanwhile nothing more is read from the
 * socket: that is the backpressure on the client. */
static VbNbdJob *
job_new (VbNbdConn *c, const VbNbdRequest *req)
{
  gboolean data = req->type == NBD_CMD_READ || req->type == NBD_CMD_WRITE;
  guint cls = data ? buffer_class (req->length) : 0;
  guint8 *buf = NULL;
  VbNbdJob *job;

  g_mutex_lock (&c->lock);
  while (c->n_free_jobs == 0 || (data && (buf = buffer_take_locked (c, cls)) == NULL))
    {
      /* With nothing in flight every slot is free and the whole budget
       * can be had: waiting would be for ever. */
      g_assert (c->in_flight.length > 0);
      done_wait_locked (c);
    }
  job = c->free_jobs[--c->n_free_jobs];
  job->req = *req;
  job->buf = buf;
  job->buf_class = cls;
  /* in_flight is in the order requests were received (see run_command). */
  g_queue_push_tail_link (&c->in_flight, &job->order_link);
  g_mutex_unlock (&c->lock);
  return job;
}

/* Gives back the slot and buffer of a job whose reply went out (or never
 * will). Under c->lock. */
static void
job_complete_locked (VbNbdConn *c, VbNbdJob *job)
{
  g_queue_unlink (&c->in_flight, &job->order_link);
  if (job->buf)
    free_list_push (c, job->buf_class, job->buf);
  job->buf = NULL;
  c->free_jobs[c->n_free_jobs++] = job;
  /* Only when someone waits: GCond makes a system call even when not. */
  if (c->n_done_waiters > 0)
    g_cond_broadcast (&c->done_cond);
}

static void
job_complete (VbNbdConn *c, VbNbdJob *job)
{
  g_mutex_lock (&c->lock);
  job_complete_locked (c, job);
  g_mutex_unlock (&c->lock);
}

/* ---- transmission: running requests ---- */

/* Write-zeroes without a device callback writes from here. Never written
 * to, so it stays untouched zero pages in .bss. */
static guint8 zeroes[VB_NBD_IO_CHUNK] __attribute__ ((aligned (VB_NBD_MIN_BUFFER)));

static int
zeroes_by_writing (const VbNbdExport *e, guint64 offset, guint64 length, gboolean fua)
{
  while (length > 0)
    {
      gsize n = MIN (length, sizeof zeroes);
      int r = e->ops->pwrite (e->handle, zeroes, n, offset, fua);
      if (r < 0)
        return r;
      offset += n;
      length -= n;
    }
  return 0;
}

static void
run_read (VbNbdConn *c, VbNbdJob *job)
{
  const VbNbdExport *e = c->export;
  const VbNbdRequest *req = &job->req;

  for (guint32 done = 0; done < req->length;)
    {
      guint32 n = MIN (req->length - done, VB_NBD_IO_CHUNK);
      int r = e->ops->pread (e->handle, job->buf + done, n, req->offset + done);
      if (r < 0)
        {
          send_status (c, req, nbd_error_from_errno (r), "read error");
          return;
        }
      done += n;
    }
  send_read_data (c, req, job->buf);
}

static void
run_write (VbNbdConn *c, VbNbdJob *job)
{
  const VbNbdExport *e = c->export;
  const VbNbdRequest *req = &job->req;
  gboolean fua = (req->flags & NBD_CMD_FLAG_FUA) != 0;
  int r = 0;

  for (guint32 done = 0; r == 0 && done < req->length;)
    {
      guint32 n = MIN (req->length - done, VB_NBD_IO_CHUNK);
      r = e->ops->pwrite (e->handle, job->buf + done, n, req->offset + done, fua);
      done += n;
    }
  send_status (c, req, r < 0 ? nbd_error_from_errno (r) : 0, "write error");
}

/* The spec asks a flush to cover only the writes completed (replied to)
 * before it was received. We go further, to be safe with clients that send
 * a write and a flush without waiting in between: a flush waits until every
 * request received before it on this connection has completed. The queue
 * is FIFO, so those all left it before this one and run on other workers:
 * this never waits for a free worker. */
static void
wait_for_earlier (VbNbdConn *c, VbNbdJob *job)
{
  g_mutex_lock (&c->lock);
  while (c->in_flight.head != &job->order_link)
    done_wait_locked (c);
  g_mutex_unlock (&c->lock);
}

static void
run_command (VbNbdConn *c, VbNbdJob *job)
{
  const VbNbdExport *e = c->export;
  const VbNbdRequest *req = &job->req;
  gboolean fua = (req->flags & NBD_CMD_FLAG_FUA) != 0;
  int r = 0;

  switch (req->type)
    {
    case NBD_CMD_FLUSH:
      wait_for_earlier (c, job);
      r = e->ops->flush (e->handle);
      break;
    case NBD_CMD_TRIM:
      if (req->length == 0)
        break;
      r = e->ops->discard (e->handle, req->length, req->offset);
      if (r == -EOPNOTSUPP)
        r = 0; /* a trim is a hint */
      if (r == 0 && fua && e->ops->flush)
        r = e->ops->flush (e->handle);
      break;
    case NBD_CMD_WRITE_ZEROES:
      if (req->length == 0)
        break;
      r = e->ops->write_zeroes ? e->ops->write_zeroes (e->handle, req->length, req->offset, fua)
                               : -EOPNOTSUPP;
      if (r == -EOPNOTSUPP)
        r = zeroes_by_writing (e, req->offset, req->length, fua);
      break;
    default:
      g_assert_not_reached ();
    }
  send_status (c, req, r < 0 ? nbd_error_from_errno (r) : 0, "I/O error");
}

static void
job_run (VbNbdConn *c, VbNbdJob *job)
{
  if (g_atomic_int_get (&c->broken))
    return; /* nobody would hear the reply */
  if (job->req.type == NBD_CMD_READ)
    run_read (c, job);
  else if (job->req.type == NBD_CMD_WRITE)
    run_write (c, job);
  else
    run_command (c, job);
}

static gpointer
worker_main (gpointer data)
{
  VbNbdConn *c = data;

  g_mutex_lock (&c->lock);
  for (;;)
    {
      GList *l = g_queue_pop_head_link (&c->queue);

      if (l == NULL && c->stopping)
        break;
      if (l == NULL)
        {
          c->n_idle++;
          g_cond_wait (&c->work_cond, &c->lock);
          c->n_idle--;
          continue;
        }
      g_mutex_unlock (&c->lock);
      job_run (c, l->data);
      g_mutex_lock (&c->lock);
      job_complete_locked (c, l->data);
    }
  g_mutex_unlock (&c->lock);
  return NULL;
}

/* Hands @job to the workers: wakes an idle one, else starts one while
 * fewer than VB_NBD_MAX_WORKERS run (a busy one takes it otherwise). With
 * no worker at all and none to be had, the reader runs it itself. */
static void
job_queue (VbNbdConn *c, VbNbdJob *job)
{
  gboolean run_here = FALSE;

  g_mutex_lock (&c->lock);
  g_queue_push_tail_link (&c->queue, &job->queue_link);
  /* More queued jobs than idle workers: each idle one has been woken for
   * an earlier job already. */
  if (c->queue.length <= c->n_idle)
    g_cond_signal (&c->work_cond);
  else if (c->n_workers < VB_NBD_MAX_WORKERS)
    {
      GThread *t = g_thread_try_new ("vb-nbd-worker", worker_main, c, NULL);
      if (t)
        c->workers[c->n_workers++] = t;
      else if (c->n_workers == 0)
        {
          g_queue_unlink (&c->queue, &job->queue_link);
          run_here = TRUE;
        }
    }
  g_mutex_unlock (&c->lock);
  if (run_here)
    {
      job_run (c, job);
      job_complete (c, job);
    }
}

/* ---- transmission: the reader ---- */

/* The next @len bytes of the stream, through rbuf, which is refilled with
 * as much as the socket holds: one recv(2) takes many request headers. */
static int
conn_recv (VbNbdConn *c, void *dst, gsize len)
{
  guint8 *p = dst;
  gsize have = c->rlen - c->rpos;

  if (have >= len)
    {
      memcpy (p, c->rbuf + c->rpos, len);
      c->rpos += len;
      return 0;
    }
  memcpy (p, c->rbuf + c->rpos, have);
  p += have;
  len -= have;
  c->rpos = c->rlen = 0;
  if (len >= VB_NBD_RECV_BUFFER / 2)
    return recv_all (c->fd, p, len); /* a large payload: straight to its buffer */
  while (c->rlen < len)
    {
      ssize_t r = recv (c->fd, c->rbuf + c->rlen, VB_NBD_RECV_BUFFER - c->rlen, 0);
      if (r == 0)
        return -ECONNRESET;
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0)
        return -errno;
      c->rlen += r;
    }
  memcpy (p, c->rbuf, len);
  c->rpos = len;
  return 0;
}

static int
conn_skip (VbNbdConn *c, guint64 len)
{
  gsize have = MIN (c->rlen - c->rpos, len);

  c->rpos += have;
  return recv_discard (c->fd, len - have);
}

/* Reads requests until NBD_CMD_DISC (returns 0) or the end of the
 * connection (-errno). What needs no device is answered here; the rest
 * goes to the workers, a WRITE with its payload read. */
static int
read_requests (VbNbdConn *c)
{
  for (;;)
    {
      guint8 h[28];
      VbNbdRequest req;
      const char *why = NULL;
      guint32 error;
      VbNbdJob *job;
      int r;

      if ((r = conn_recv (c, h, sizeof h)) < 0)
        return r;
      if (get32 (h) != NBD_REQUEST_MAGIC)
        return -EPROTO; /* lost framing: nothing after this can be trusted */
      req.flags = get16 (h + 4);
      req.type = get16 (h + 6);
      memcpy (req.cookie, h + 8, 8);
      req.offset = get64 (h + 16);
      req.length = get32 (h + 24);

      if (req.type == NBD_CMD_DISC)
        return 0;
      /* Closing rather than swallowing up to 4 GiB: the spec lets a server
       * treat a payload above the advertised maximum as an attack. */
      if (req.type == NBD_CMD_WRITE && req.length > VB_NBD_MAX_REQUEST)
        return -EMSGSIZE;

      error = check_request (c, &req, &why);
      /* A refused write's payload is read all the same, or the next
       * request header would be taken from the middle of it. */
      if (error != 0 && req.type == NBD_CMD_WRITE && (r = conn_skip (c, req.length)) < 0)
        return r;
      if (error != 0
          || ((req.type == NBD_CMD_READ || req.type == NBD_CMD_WRITE) && req.length == 0))
        {
          if ((r = send_status (c, &req, error, why)) < 0)
            return r;
          continue;
        }
      job = job_new (c, &req);
      if (req.type == NBD_CMD_WRITE && (r = conn_recv (c, job->buf, req.length)) < 0)
        {
          job_complete (c, job);
          return r;
        }
      job_queue (c, job);
    }
}

static int
transmission (VbNbdConn *c)
{
  guint8 *buf;
  int r;

  c->rbuf = g_malloc (VB_NBD_RECV_BUFFER);
  g_mutex_init (&c->send_lock);
  g_mutex_init (&c->lock);
  g_cond_init (&c->work_cond);
  g_cond_init (&c->done_cond);
  g_queue_init (&c->queue);
  g_queue_init (&c->in_flight);
  for (guint i = 0; i < VB_NBD_MAX_IN_FLIGHT; i++)
    {
      c->jobs[i].queue_link.data = c->jobs[i].order_link.data = &c->jobs[i];
      c->free_jobs[c->n_free_jobs++] = &c->jobs[i];
    }

  r = read_requests (c);

  /* After a DISC (the spec: finish what is outstanding, then close) or
   * when the client went away, the requests received still complete and
   * their replies are sent, or fail at once. A broken protocol ends it
   * now: replies are dropped and shutdown wakes workers blocked sending. */
  if (r < 0 && r != -ECONNRESET)
    conn_break (c);
  g_mutex_lock (&c->lock);
  while (c->in_flight.length > 0)
    done_wait_locked (c);
  c->stopping = TRUE;
  g_cond_broadcast (&c->work_cond);
  g_mutex_unlock (&c->lock);
  for (guint i = 0; i < c->n_workers; i++)
    g_thread_join (c->workers[i]);

  for (guint k = 0; k < VB_NBD_BUFFER_CLASSES; k++)
    while ((buf = free_list_pop (c, k)) != NULL)
      g_aligned_free (buf);
  g_cond_clear (&c->done_cond);
  g_cond_clear (&c->work_cond);
  g_mutex_clear (&c->lock);
  g_mutex_clear (&c->send_lock);
  g_free (c->rbuf);
  return r;
}

int
vb_nbd_conn_run (const VbNbdExport *export, int fd, gboolean handshake)
{
  VbNbdConn c = { .export = export, .fd = fd };
  int r = 1;

  g_return_val_if_fail (export != NULL && fd >= 0, -EINVAL);

  if (!handshake)
    {
      vb_nbd_terms_load (export, &c.terms);
      c.live_size = TRUE;
    }
  else
    r = vb_nbd_handshake (export, fd, &c.terms);
  if (r == 1)
    r = transmission (&c);
  return r;
}
