/* The NBD protocol for one connection: fixed-newstyle handshake, then
 * transmission, where the connection's thread reads requests and a small
 * pool of workers runs them and replies out of order. Every length a client
 * sends is checked against a fixed bound before anything is read into
 * memory, and a connection holds at most VB_NBD_MAX_IN_FLIGHT requests and
 * VB_NBD_BUFFER_BUDGET bytes of buffers, so a hostile client costs a bounded
 * amount of memory. */
#include "config.h"

#include "nbd-conn.h"
#include "nbd-server.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>

/* Wire constants, named and valued as in the NBD protocol (doc/proto.md of
 * NetworkBlockDevice/nbd). All integers on the wire are big-endian. */
#define NBD_MAGIC G_GUINT64_CONSTANT (0x4e42444d41474943)      /* "NBDMAGIC" */
#define NBD_OPTS_MAGIC G_GUINT64_CONSTANT (0x49484156454f5054) /* "IHAVEOPT" */
#define NBD_REP_MAGIC G_GUINT64_CONSTANT (0x0003e889045565a9)
#define NBD_REQUEST_MAGIC 0x25609513u
#define NBD_SIMPLE_REPLY_MAGIC 0x67446698u
#define NBD_STRUCTURED_REPLY_MAGIC 0x668e33efu

#define NBD_FLAG_FIXED_NEWSTYLE (1u << 0) /* handshake flags */
#define NBD_FLAG_NO_ZEROES (1u << 1)
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0) /* client flags */
#define NBD_FLAG_C_NO_ZEROES (1u << 1)

#define NBD_FLAG_HAS_FLAGS (1u << 0) /* transmission flags */
#define NBD_FLAG_READ_ONLY (1u << 1)
#define NBD_FLAG_SEND_FLUSH (1u << 2)
#define NBD_FLAG_SEND_FUA (1u << 3)
#define NBD_FLAG_SEND_TRIM (1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1u << 6)
#define NBD_FLAG_CAN_MULTI_CONN (1u << 8)

#define NBD_OPT_EXPORT_NAME 1u
#define NBD_OPT_ABORT 2u
#define NBD_OPT_LIST 3u
#define NBD_OPT_STARTTLS 5u
#define NBD_OPT_INFO 6u
#define NBD_OPT_GO 7u
#define NBD_OPT_STRUCTURED_REPLY 8u

#define NBD_REP_ACK 1u
#define NBD_REP_SERVER 2u
#define NBD_REP_INFO 3u
#define NBD_REP_ERR_UNSUP ((1u << 31) + 1)
#define NBD_REP_ERR_INVALID ((1u << 31) + 3)
#define NBD_REP_ERR_UNKNOWN ((1u << 31) + 6)

#define NBD_INFO_EXPORT 0u
#define NBD_INFO_NAME 1u
#define NBD_INFO_DESCRIPTION 2u
#define NBD_INFO_BLOCK_SIZE 3u

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

#define NBD_MAX_STRING 4096u /* export names, descriptions, messages */
#define NBD_ZEROES_LENGTH 124u

/* The longest well-formed option we parse: NBD_OPT_GO with a 4096-byte name
 * and every possible information request. Longer ones close the connection. */
#define VB_NBD_MAX_OPTION (4u + NBD_MAX_STRING + 2u + 2u * G_MAXUINT16)
/* Requests reach the device in pieces of at most this size. */
#define VB_NBD_IO_CHUNK (4u << 20)
#define VB_NBD_PREFERRED_BLOCK 4096u
/* A client that stalls in the handshake gives its slot back after this;
 * once in transmission, idling is legitimate (the kernel client does). */
#define VB_NBD_HANDSHAKE_TIMEOUT_S 30

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
  gboolean no_zeroes;
  gboolean structured;
  guint64 size;   /* as told to the client */
  guint16 tflags; /* transmission flags, as told to the client */

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

static void
put16 (guint8 *p, guint16 v)
{
  v = GUINT16_TO_BE (v);
  memcpy (p, &v, sizeof v);
}

static void
put32 (guint8 *p, guint32 v)
{
  v = GUINT32_TO_BE (v);
  memcpy (p, &v, sizeof v);
}

static void
put64 (guint8 *p, guint64 v)
{
  v = GUINT64_TO_BE (v);
  memcpy (p, &v, sizeof v);
}

static guint16
get16 (const guint8 *p)
{
  guint16 v;
  memcpy (&v, p, sizeof v);
  return GUINT16_FROM_BE (v);
}

static guint32
get32 (const guint8 *p)
{
  guint32 v;
  memcpy (&v, p, sizeof v);
  return GUINT32_FROM_BE (v);
}

static guint64
get64 (const guint8 *p)
{
  guint64 v;
  memcpy (&v, p, sizeof v);
  return GUINT64_FROM_BE (v);
}

static int
recv_all (int fd, void *buf, gsize len)
{
  guint8 *p = buf;

  while (len > 0)
    {
      ssize_t r = recv (fd, p, len, MSG_WAITALL);
      if (r == 0)
        return -ECONNRESET;
      if (r < 0)
        {
          if (errno == EINTR)
            continue;
          return -errno;
        }
      p += r;
      len -= r;
    }
  return 0;
}

static int
recv_discard (int fd, guint64 len)
{
  guint8 sink[4096];

  while (len > 0)
    {
      gsize n = MIN (len, sizeof sink);
      int r = recv_all (fd, sink, n);
      if (r < 0)
        return r;
      len -= n;
    }
  return 0;
}

/* MSG_NOSIGNAL: a client that went away must cost an EPIPE, not the
 * process (a library cannot know how SIGPIPE is handled). */
static int
send_iov (int fd, struct iovec *iov, int n)
{
  while (n > 0)
    {
      struct msghdr m = { .msg_iov = iov, .msg_iovlen = n };
      ssize_t r = sendmsg (fd, &m, MSG_NOSIGNAL);
      if (r < 0)
        {
          if (errno == EINTR)
            continue;
          return -errno;
        }
      while (n > 0 && (gsize) r >= iov->iov_len)
        {
          r -= iov->iov_len;
          iov++;
          n--;
        }
      if (n > 0)
        {
          iov->iov_base = (guint8 *) iov->iov_base + r;
          iov->iov_len -= r;
        }
    }
  return 0;
}

static int
send2 (int fd, const void *a, gsize alen, const void *b, gsize blen)
{
  struct iovec iov[2] = { { (void *) a, alen }, { (void *) b, blen } };
  return send_iov (fd, iov, 2);
}

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

/* ---- the export as this connection sees it ---- */

static gboolean
name_is_ours (const VbNbdExport *e, const guint8 *name, guint32 len)
{
  return len == 0 || (len == strlen (e->name) && memcmp (name, e->name, len) == 0);
}

/* Size and flags are read when the client asks, so a connection made after
 * a resize or a change to read-only sees the device as it is now. */
static void
conn_load_export (VbNbdConn *c)
{
  const VbNbdExport *e = c->export;
  const VbBlockOps *ops = e->ops;
  guint16 f = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FUA | NBD_FLAG_SEND_WRITE_ZEROES;

  c->size = ops->size (e->handle);
  if (ops->flush)
    f |= NBD_FLAG_SEND_FLUSH;
  if (ops->discard)
    f |= NBD_FLAG_SEND_TRIM;
  if (ops->can_multi_conn && ops->can_multi_conn (e->handle))
    f |= NBD_FLAG_CAN_MULTI_CONN;
  if (ops->pwrite == NULL || (ops->read_only && ops->read_only (e->handle)))
    f |= NBD_FLAG_READ_ONLY;
  c->tflags = f;
}

/* ---- handshake ---- */

static int
send_opt_reply (VbNbdConn *c, guint32 option, guint32 type, const void *data, guint32 len)
{
  guint8 h[20];

  put64 (h, NBD_REP_MAGIC);
  put32 (h + 8, option);
  put32 (h + 12, type);
  put32 (h + 16, len);
  return send2 (c->fd, h, sizeof h, data, len);
}

static int
send_opt_error (VbNbdConn *c, guint32 option, guint32 type, const char *message)
{
  return send_opt_reply (c, option, type, message, strlen (message));
}

static int
send_info (VbNbdConn *c, guint32 option, guint16 type, const void *data, gsize len)
{
  guint8 t[2];
  guint8 h[20];

  put16 (t, type);
  put64 (h, NBD_REP_MAGIC);
  put32 (h + 8, option);
  put32 (h + 12, NBD_REP_INFO);
  put32 (h + 16, 2 + len);
  struct iovec iov[3] = { { h, sizeof h }, { t, 2 }, { (void *) data, len } };
  return send_iov (c->fd, iov, 3);
}

static int
handle_list (VbNbdConn *c, guint32 len)
{
  const VbNbdExport *e = c->export;
  g_autofree guint8 *reply = NULL;
  gsize nlen = strlen (e->name);
  gsize dlen = e->description ? strlen (e->description) : 0;
  int r;

  if (len != 0)
    return send_opt_error (c, NBD_OPT_LIST, NBD_REP_ERR_INVALID, "NBD_OPT_LIST takes no data");
  /* Name, then the description as the free text the spec allows after it. */
  reply = g_malloc (4 + nlen + dlen);
  put32 (reply, nlen);
  memcpy (reply + 4, e->name, nlen);
  if (dlen)
    memcpy (reply + 4 + nlen, e->description, dlen);
  r = send_opt_reply (c, NBD_OPT_LIST, NBD_REP_SERVER, reply, 4 + nlen + dlen);
  if (r < 0)
    return r;
  return send_opt_reply (c, NBD_OPT_LIST, NBD_REP_ACK, NULL, 0);
}

/* NBD_OPT_INFO and NBD_OPT_GO; returns 1 when GO succeeded. */
static int
handle_info_go (VbNbdConn *c, guint32 option, const guint8 *data, guint32 len)
{
  const VbNbdExport *e = c->export;
  gboolean want_name = FALSE, want_description = FALSE;
  guint32 nlen;
  guint16 n_requests;
  guint8 export_info[10], sizes[12];
  int r;

  if (len < 6 || (nlen = get32 (data)) > len - 6)
    return send_opt_error (c, option, NBD_REP_ERR_INVALID, "malformed request");
  n_requests = get16 (data + 4 + nlen);
  if (6 + (guint64) nlen + 2 * (guint64) n_requests != len)
    return send_opt_error (c, option, NBD_REP_ERR_INVALID, "malformed information requests");
  if (nlen > NBD_MAX_STRING)
    return send_opt_error (c, option, NBD_REP_ERR_INVALID, "export name longer than 4096 bytes");
  if (!name_is_ours (e, data + 4, nlen))
    return send_opt_error (c, option, NBD_REP_ERR_UNKNOWN, "no such export");
  for (guint i = 0; i < n_requests; i++)
    {
      guint16 what = get16 (data + 6 + nlen + 2 * i);
      want_name |= what == NBD_INFO_NAME;
      want_description |= what == NBD_INFO_DESCRIPTION;
    }

  conn_load_export (c);
  put64 (export_info, c->size);
  put16 (export_info + 8, c->tflags);
  if ((r = send_info (c, option, NBD_INFO_EXPORT, export_info, sizeof export_info)) < 0)
    return r;
  if (want_name && (r = send_info (c, option, NBD_INFO_NAME, e->name, strlen (e->name))) < 0)
    return r;
  if (want_description && e->description
      && (r = send_info (c, option, NBD_INFO_DESCRIPTION, e->description, strlen (e->description)))
             < 0)
    return r;
  /* Sent even when not asked for: our minimum is not the default of 1, and
   * clients ignore information they did not request. */
  put32 (sizes, e->block_size);
  put32 (sizes + 4, MAX (VB_NBD_PREFERRED_BLOCK, e->block_size));
  put32 (sizes + 8, VB_NBD_MAX_REQUEST);
  if ((r = send_info (c, option, NBD_INFO_BLOCK_SIZE, sizes, sizeof sizes)) < 0)
    return r;
  if ((r = send_opt_reply (c, option, NBD_REP_ACK, NULL, 0)) < 0)
    return r;
  return option == NBD_OPT_GO ? 1 : 0;
}

/* NBD_OPT_EXPORT_NAME cannot carry an error: a wrong name closes (spec). */
static int
handle_export_name (VbNbdConn *c, const guint8 *name, guint32 len)
{
  guint8 reply[10 + NBD_ZEROES_LENGTH] = { 0 };

  if (len > NBD_MAX_STRING || !name_is_ours (c->export, name, len))
    return -ENOENT;
  conn_load_export (c);
  put64 (reply, c->size);
  put16 (reply + 8, c->tflags);
  return send2 (c->fd, reply, c->no_zeroes ? 10 : sizeof reply, NULL, 0) < 0 ? -EIO : 1;
}

/* Returns 1 to enter transmission, 0 when the client aborted, -errno to
 * close the connection. */
static int
run_handshake (VbNbdConn *c)
{
  guint8 greeting[18], flags[4];
  guint32 client_flags;
  gboolean fixed;
  int r;

  put64 (greeting, NBD_MAGIC);
  put64 (greeting + 8, NBD_OPTS_MAGIC);
  put16 (greeting + 16, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
  if ((r = send2 (c->fd, greeting, sizeof greeting, NULL, 0)) < 0
      || (r = recv_all (c->fd, flags, sizeof flags)) < 0)
    return r;
  client_flags = get32 (flags);
  if (client_flags & ~(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES))
    return -EPROTO; /* the spec: unknown client flags drop the connection */
  fixed = (client_flags & NBD_FLAG_C_FIXED_NEWSTYLE) != 0;
  c->no_zeroes = (client_flags & NBD_FLAG_C_NO_ZEROES) != 0;

  for (;;)
    {
      guint8 h[16];
      g_autofree guint8 *data = NULL;
      guint32 option, len;

      if ((r = recv_all (c->fd, h, sizeof h)) < 0)
        return r;
      if (get64 (h) != NBD_OPTS_MAGIC)
        return -EPROTO;
      option = get32 (h + 8);
      len = get32 (h + 12);
      if (len > VB_NBD_MAX_OPTION)
        return -EMSGSIZE; /* nothing we know is this long: not worth reading */
      /* Plain (non-fixed) newstyle knows no other option, and cannot be
       * told about an error other than by closing. */
      if (!fixed && option != NBD_OPT_EXPORT_NAME)
        return -EPROTO;

      switch (option)
        {
        case NBD_OPT_EXPORT_NAME:
        case NBD_OPT_INFO:
        case NBD_OPT_GO:
          data = g_malloc (MAX (len, 1));
          if ((r = recv_all (c->fd, data, len)) < 0)
            return r;
          r = option == NBD_OPT_EXPORT_NAME ? handle_export_name (c, data, len)
                                            : handle_info_go (c, option, data, len);
          break;
        default:
          /* Nothing else needs its data: drop it without storing it. */
          if ((r = recv_discard (c->fd, len)) < 0)
            return r;
          switch (option)
            {
            case NBD_OPT_ABORT:
              send_opt_reply (c, option, NBD_REP_ACK, NULL, 0);
              return 0;
            case NBD_OPT_LIST:
              r = handle_list (c, len);
              break;
            case NBD_OPT_STARTTLS:
              r = send_opt_error (c, option, NBD_REP_ERR_UNSUP, "TLS is not supported");
              break;
            case NBD_OPT_STRUCTURED_REPLY:
              if (len != 0)
                {
                  r = send_opt_error (c, option, NBD_REP_ERR_INVALID, "takes no data");
                  break;
                }
              c->structured = TRUE;
              r = send_opt_reply (c, option, NBD_REP_ACK, NULL, 0);
              break;
            default:
              r = send_opt_error (c, option, NBD_REP_ERR_UNSUP, "unknown option");
              break;
            }
        }
      if (r != 0)
        return r;
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

  if (!c->structured)
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

  if (c->structured)
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
      if (!(c->tflags & NBD_FLAG_SEND_FLUSH))
        return *why = "flush is not supported", NBD_EINVAL;
      break;
    case NBD_CMD_TRIM:
      if (!(c->tflags & NBD_FLAG_SEND_TRIM))
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
  if (writes && (c->tflags & NBD_FLAG_READ_ONLY))
    return *why = "the export is read-only", NBD_EPERM;
  if (req->type == NBD_CMD_READ && req->length > VB_NBD_MAX_REQUEST)
    return *why = "read longer than the maximum block size", NBD_EINVAL;
  if (req->offset % e->block_size || req->length % e->block_size)
    return *why = "offset or length not a multiple of the minimum block size", NBD_EINVAL;
  if (req->offset > c->size || req->length > c->size - req->offset)
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

static void
set_socket_timeout (int fd, int seconds)
{
  struct timeval tv = { .tv_sec = seconds };

  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

int
vb_nbd_conn_run (const VbNbdExport *export, int fd, gboolean handshake)
{
  VbNbdConn c = { .export = export, .fd = fd };
  int r = 1;

  g_return_val_if_fail (export != NULL && fd >= 0, -EINVAL);

  if (!handshake)
    conn_load_export (&c);
  else
    {
      set_socket_timeout (fd, VB_NBD_HANDSHAKE_TIMEOUT_S);
      r = run_handshake (&c);
      set_socket_timeout (fd, 0);
    }
  if (r == 1)
    r = transmission (&c);
  return r;
}
