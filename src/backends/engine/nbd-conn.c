/* The NBD protocol for one connection: fixed-newstyle handshake, then
 * requests served one at a time through VbBlockOps. Every length a client
 * sends is checked against a fixed bound before anything is read into
 * memory, so a hostile client costs at most one bounded buffer. */
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
/* Payloads move through the device in pieces of this size, so a
 * connection's buffer never exceeds it whatever the request length. */
#define VB_NBD_IO_CHUNK (4u << 20)
#define VB_NBD_PREFERRED_BLOCK 4096u
/* A client that stalls in the handshake gives its slot back after this;
 * once in transmission, idling is legitimate (the kernel client does). */
#define VB_NBD_HANDSHAKE_TIMEOUT_S 30

typedef struct {
  const VbNbdExport *export;
  int fd;
  gboolean no_zeroes;
  gboolean structured;
  guint64 size;   /* as told to the client */
  guint16 tflags; /* transmission flags, as told to the client */
  guint8 *buf;    /* data buffer, at most VB_NBD_IO_CHUNK */
  gsize buf_size;
} VbNbdConn;

typedef struct {
  guint16 flags;
  guint16 type;
  guint8 cookie[8]; /* "handle": echoed back untouched */
  guint64 offset;
  guint32 length;
} VbNbdRequest;

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

static guint8 *
conn_buffer (VbNbdConn *c, gsize need)
{
  g_assert (need <= VB_NBD_IO_CHUNK);
  if (need > c->buf_size)
    {
      /* Page-aligned so that an engine using O_DIRECT can take it as is. */
      gsize size = MAX (need, 64u << 10);
      g_aligned_free (c->buf);
      c->buf = g_aligned_alloc (size, 1, 4096);
      c->buf_size = size;
    }
  return c->buf;
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

/* ---- transmission ---- */

static int
send_simple (VbNbdConn *c, const VbNbdRequest *req, guint32 error, const void *data, gsize len)
{
  guint8 h[16];

  put32 (h, NBD_SIMPLE_REPLY_MAGIC);
  put32 (h + 4, error);
  memcpy (h + 8, req->cookie, 8);
  return send2 (c->fd, h, sizeof h, data, len);
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
  gsize wlen;

  if (!c->structured)
    return send_simple (c, req, error, NULL, 0);
  if (error == 0)
    {
      chunk_header (h, req, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_NONE, 0);
      return send2 (c->fd, h, 20, NULL, 0);
    }
  wlen = why ? strlen (why) : 0;
  chunk_header (h, req, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR, 6 + wlen);
  put32 (h + 20, error);
  put16 (h + 24, wlen);
  return send2 (c->fd, h, sizeof h, why, wlen);
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

static int
do_read (VbNbdConn *c, const VbNbdRequest *req)
{
  const VbNbdExport *e = c->export;
  guint32 done = 0;
  int r;

  if (req->length == 0)
    return send_status (c, req, 0, NULL);
  while (done < req->length)
    {
      guint32 n = MIN (req->length - done, VB_NBD_IO_CHUNK);
      guint64 offset = req->offset + done;
      guint8 *buf = conn_buffer (c, n);
      gboolean last = done + n == req->length;

      r = e->ops->pread (e->handle, buf, n, offset);
      if (r < 0 && (c->structured || done == 0))
        return send_status (c, req, nbd_error_from_errno (r), "read error");
      if (r < 0)
        return r; /* simple reply already promised data: only closing is left */
      if (c->structured)
        {
          guint8 h[28];
          chunk_header (h, req, last ? NBD_REPLY_FLAG_DONE : 0, NBD_REPLY_TYPE_OFFSET_DATA, 8 + n);
          put64 (h + 20, offset);
          r = send2 (c->fd, h, sizeof h, buf, n);
        }
      else if (done == 0)
        r = send_simple (c, req, 0, buf, n);
      else
        r = send2 (c->fd, buf, n, NULL, 0);
      if (r < 0)
        return r;
      done += n;
    }
  return 0;
}

static int
do_write (VbNbdConn *c, const VbNbdRequest *req, guint32 error, const char *why)
{
  const VbNbdExport *e = c->export;
  gboolean fua = (req->flags & NBD_CMD_FLAG_FUA) != 0;
  guint32 done = 0;

  /* The payload is read even when the request is refused, or the next
   * request header would be taken from the middle of it. */
  while (done < req->length)
    {
      guint32 n = MIN (req->length - done, VB_NBD_IO_CHUNK);
      guint8 *buf = conn_buffer (c, n);
      int r = recv_all (c->fd, buf, n);

      if (r < 0)
        return r;
      if (error == 0 && (r = e->ops->pwrite (e->handle, buf, n, req->offset + done, fua)) < 0)
        {
          error = nbd_error_from_errno (r);
          why = "write error";
        }
      done += n;
    }
  return send_status (c, req, error, why);
}

static int
zeroes_by_writing (VbNbdConn *c, guint64 offset, guint64 length, gboolean fua)
{
  const VbNbdExport *e = c->export;
  gsize n = MIN (length, VB_NBD_IO_CHUNK);
  guint8 *buf = conn_buffer (c, n);

  memset (buf, 0, n);
  while (length > 0)
    {
      int r = e->ops->pwrite (e->handle, buf, n, offset, fua);
      if (r < 0)
        return r;
      offset += n;
      length -= n;
      n = MIN (length, VB_NBD_IO_CHUNK);
    }
  return 0;
}

static int
do_command (VbNbdConn *c, const VbNbdRequest *req)
{
  const VbNbdExport *e = c->export;
  gboolean fua = (req->flags & NBD_CMD_FLAG_FUA) != 0;
  int r = 0;

  switch (req->type)
    {
    case NBD_CMD_FLUSH:
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
        r = zeroes_by_writing (c, req->offset, req->length, fua);
      break;
    default:
      g_assert_not_reached ();
    }
  return send_status (c, req, r < 0 ? nbd_error_from_errno (r) : 0, "I/O error");
}

/* Returns 0 on NBD_CMD_DISC, -errno when the connection must close. */
static int
transmission (VbNbdConn *c)
{
  for (;;)
    {
      guint8 h[28];
      VbNbdRequest req;
      const char *why = NULL;
      guint32 error;
      int r;

      if ((r = recv_all (c->fd, h, sizeof h)) < 0)
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
      if (req.type == NBD_CMD_WRITE)
        r = do_write (c, &req, error, why);
      else if (error != 0)
        r = send_status (c, &req, error, why);
      else if (req.type == NBD_CMD_READ)
        r = do_read (c, &req);
      else
        r = do_command (c, &req);
      if (r < 0)
        return r;
    }
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
  g_aligned_free (c.buf);
  return r;
}
