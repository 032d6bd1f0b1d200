/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fuzz target for the NBD server's reading of what a client sends: each
 * input is the byte stream of one client, served by vb_nbd_conn_run on
 * one end of a socketpair over an export in memory (asynchronous path,
 * no workers), while a thread writes the input to the other end, shuts
 * it for writing and reads every reply. It runs three times: from the
 * handshake, from it where TLS is required (PSK; the TLS handshake itself
 * is GnuTLS's), and straight in transmission (as for the kernel's client).
 * Every connection must end; the export is only asked for aligned ranges
 * inside it, and never to write when read-only. The handshake's replies
 * must answer each option in order, as the protocol (doc/proto.md of
 * NetworkBlockDevice/nbd) lays them out; in transmission every request
 * gets one reply with its handle, an error exactly when the request is
 * invalid, reads the data the export holds, and the end of the stream
 * (disconnect, end of file, broken framing) the result it calls for.
 * Built for libFuzzer (clang) and for the standalone driver of
 * fuzz-main.c. */
#include "config.h"

#include "fuzz.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nbd-run.h"


#define EXPORT_NAME "fuzz"
#define EXPORT_SIZE (32u << 10)
#define EXPORT_BLOCK 512u
/* replies kept for checking; past this (many reads) they are only drained */
#define MAX_OUTPUT (16u << 20)

/* The handshake's wire constants, named and valued as in the protocol. */
#define NBD_MAGIC G_GUINT64_CONSTANT (0x4e42444d41474943)      /* "NBDMAGIC" */
#define NBD_OPTS_MAGIC G_GUINT64_CONSTANT (0x49484156454f5054) /* "IHAVEOPT" */
#define NBD_REP_MAGIC G_GUINT64_CONSTANT (0x0003e889045565a9)
#define NBD_FLAG_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_NO_ZEROES (1u << 1)
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_C_NO_ZEROES (1u << 1)
#define NBD_OPT_EXPORT_NAME 1u
#define NBD_OPT_ABORT 2u
#define NBD_OPT_LIST 3u
#define NBD_OPT_STARTTLS 5u
#define NBD_OPT_INFO 6u
#define NBD_OPT_GO 7u
#define NBD_OPT_STRUCTURED_REPLY 8u
#define NBD_OPT_LIST_META_CONTEXT 9u
#define NBD_OPT_SET_META_CONTEXT 10u
#define NBD_REP_ACK 1u
#define NBD_REP_SERVER 2u
#define NBD_REP_INFO 3u
#define NBD_REP_META_CONTEXT 4u
#define NBD_REP_FLAG_ERROR (1u << 31)
#define NBD_REP_ERR_INVALID (NBD_REP_FLAG_ERROR + 3)
#define NBD_REP_ERR_TLS_REQD (NBD_REP_FLAG_ERROR + 5)
#define NBD_INFO_EXPORT 0u
#define NBD_INFO_NAME 1u
#define NBD_INFO_BLOCK_SIZE 3u
#define NBD_ZEROES_LENGTH 124u
/* what the server takes at most in one option (nbd-handshake.c) */
#define MAX_OPTION (4u + 4096u + 2u + 2u * G_MAXUINT16)

/* ---- the export: memory, completed through the connection's ring ---- */

typedef struct {
  guint8 data[EXPORT_SIZE];
  gboolean read_only;
} MemExport;

static guint8
pattern (guint64 i)
{
  return (guint8) (i * 31 + (i >> 8) + 1);
}

static void
mem_reset (MemExport *m, gboolean read_only)
{
  for (guint i = 0; i < EXPORT_SIZE; i++)
    m->data[i] = pattern (i);
  m->read_only = read_only;
}

/* Every request the server passes on has been checked against the
 * export it told the client about. */
static void
check_range (guint64 offset, guint64 length)
{
  FUZZ_CHECK (offset <= EXPORT_SIZE && length <= EXPORT_SIZE - offset);
  FUZZ_CHECK (offset % EXPORT_BLOCK == 0 && length % EXPORT_BLOCK == 0);
}

static guint64
mem_size (void *handle)
{
  return EXPORT_SIZE;
}

static guint32
mem_block_size (void *handle)
{
  return EXPORT_BLOCK;
}

static gboolean
mem_read_only (void *handle)
{
  return ((MemExport *) handle)->read_only;
}

static int
mem_pread (void *handle, void *buf, guint64 length, guint64 offset)
{
  check_range (offset, length);
  memcpy (buf, ((MemExport *) handle)->data + offset, length);
  return 0;
}

static int
mem_pwrite (void *handle, const void *buf, guint64 length, guint64 offset, gboolean fua)
{
  MemExport *m = handle;

  check_range (offset, length);
  FUZZ_CHECK (!m->read_only);
  memcpy (m->data + offset, buf, length);
  return 0;
}

static int
mem_flush (void *handle)
{
  return 0;
}

static int
mem_discard (void *handle, guint64 length, guint64 offset)
{
  MemExport *m = handle;

  check_range (offset, length);
  FUZZ_CHECK (!m->read_only);
  memset (m->data + offset, 0, length);
  return 0;
}

/* The request's "held" op, the engine switch's and unused here, carries
 * the completion back through the ring, as the engine's do. */
static void
mem_complete (VbRingOp *op, int res)
{
  VbEngineIo *io = G_STRUCT_MEMBER_P (op, -G_STRUCT_OFFSET (VbEngineIo, held));

  io->done (io, res);
}

static void
mem_submit (void *handle, VbRing *ring, VbEngineIo *io)
{
  MemExport *m = handle;
  int r = 0;

  FUZZ_CHECK (!io->kernel_buf);
  io->held.func = mem_complete;
  switch (io->kind)
    {
    case VB_ENGINE_IO_READ:
      r = mem_pread (m, io->buf, io->length, io->offset);
      break;
    case VB_ENGINE_IO_WRITE:
      r = mem_pwrite (m, io->buf, io->length, io->offset, io->fua);
      break;
    case VB_ENGINE_IO_FLUSH:
      r = mem_flush (m);
      break;
    case VB_ENGINE_IO_DISCARD:
      r = mem_discard (m, io->length, io->offset);
      break;
    case VB_ENGINE_IO_WRITE_ZEROES:
      check_range (io->offset, io->length);
      FUZZ_CHECK (!m->read_only);
      r = -EOPNOTSUPP; /* the server writes zeroes itself */
      break;
    }
  vb_ring_post (ring, &io->held, r);
}

static const VbBlockOps mem_ops = {
  .size = mem_size,
  .block_size = mem_block_size,
  .read_only = mem_read_only,
  .pread = mem_pread,
  .pwrite = mem_pwrite,
  .flush = mem_flush,
  .discard = mem_discard,
  .submit = mem_submit,
};

/* ---- the client: a thread that sends the input and reads every reply ---- */

typedef struct {
  int fd;
  const guint8 *in;
  gsize in_len;
  GByteArray *out;
  gboolean overflow; /* more replies than MAX_OUTPUT */
} Client;

static gpointer
client_run (gpointer data)
{
  Client *cl = data;
  gsize pos = 0;
  gboolean writing = TRUE;
  guint8 buf[64 << 10];

  if (cl->in_len == 0)
    {
      shutdown (cl->fd, SHUT_WR);
      writing = FALSE;
    }
  for (;;)
    {
      struct pollfd p = { .fd = cl->fd, .events = POLLIN | (writing ? POLLOUT : 0) };
      ssize_t n;

      if (poll (&p, 1, -1) < 0)
        {
          FUZZ_CHECK (errno == EINTR);
          continue;
        }
      if (writing && (p.revents & (POLLOUT | POLLERR | POLLHUP)))
        {
          n = send (cl->fd, cl->in + pos, cl->in_len - pos, MSG_DONTWAIT | MSG_NOSIGNAL);
          if (n > 0)
            pos += n;
          else if (n < 0 && errno != EAGAIN && errno != EINTR)
            pos = cl->in_len; /* the server stopped reading: the rest is never read */
          if (pos == cl->in_len)
            {
              shutdown (cl->fd, SHUT_WR);
              writing = FALSE;
            }
        }
      if (p.revents & (POLLIN | POLLERR | POLLHUP))
        {
          n = recv (cl->fd, buf, sizeof buf, MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            break; /* the server's end was shut down: it returned */
          if (n > 0 && cl->out->len + n <= MAX_OUTPUT)
            g_byte_array_append (cl->out, buf, n);
          else if (n > 0)
            cl->overflow = TRUE;
        }
    }
  return NULL;
}

/* Serves @in to its end as one client; the replies in @out (NULL: too
 * many to keep). Returns the connection's result. */
static int
serve (MemExport *m, const guint8 *in, gsize in_len, gboolean handshake, const VbNbdTls *tls,
       GByteArray **out)
{
  const VbNbdExport export = {
    .name = EXPORT_NAME,
    .description = "memory of fuzz-nbd",
    .ops = &mem_ops,
    .handle = m,
    .block_size = EXPORT_BLOCK,
  };
  Client cl = { .in = in, .in_len = in_len, .out = g_byte_array_new () };
  GThread *thread;
  int sv[2], r;

  FUZZ_CHECK (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  cl.fd = sv[0];
  thread = g_thread_new ("fuzz-nbd-client", client_run, &cl);
  r = vb_nbd_conn_run (&export, tls, sv[1], handshake);
  /* its end of the stream: the client reads to it and returns */
  shutdown (sv[1], SHUT_RDWR);
  g_thread_join (thread);
  close (sv[0]);
  close (sv[1]);
  if (cl.overflow)
    g_clear_pointer (&cl.out, g_byte_array_unref);
  *out = cl.out;
  return r;
}

/* ---- the handshake ---- */

static gboolean
name_is_ours (const guint8 *name, guint32 len)
{
  return len == 0 || (len == strlen (EXPORT_NAME) && memcmp (name, EXPORT_NAME, len) == 0);
}

static void
check_export_info (const guint8 *p, gboolean read_only)
{
  guint16 tflags = get16 (p + 8);

  FUZZ_CHECK (get64 (p) == EXPORT_SIZE);
  FUZZ_CHECK ((tflags & NBD_FLAG_HAS_FLAGS) && !(tflags & NBD_FLAG_READ_ONLY) == !read_only);
}

/* The replies to one option (@option, its data in @data) from @out at
 * *@pos: informational ones, then one final; returns the final's type. */
static guint32
check_option_replies (guint32 option, const guint8 *out, gsize out_len, gsize *pos,
                      gboolean read_only)
{
  gboolean told_export = FALSE;

  for (;;)
    {
      const guint8 *r = out + *pos;
      guint32 type, len;

      FUZZ_CHECK (out_len - *pos >= 20);
      FUZZ_CHECK (get64 (r) == NBD_REP_MAGIC && get32 (r + 8) == option);
      type = get32 (r + 12);
      len = get32 (r + 16);
      FUZZ_CHECK (out_len - *pos - 20 >= len);
      *pos += 20 + len;
      r += 20;
      if (type == NBD_REP_INFO)
        {
          FUZZ_CHECK (option == NBD_OPT_INFO || option == NBD_OPT_GO);
          FUZZ_CHECK (len >= 2);
          if (get16 (r) == NBD_INFO_EXPORT)
            {
              FUZZ_CHECK (len == 12);
              check_export_info (r + 2, read_only);
              told_export = TRUE;
            }
          else if (get16 (r) == NBD_INFO_NAME)
            FUZZ_CHECK (len - 2 == strlen (EXPORT_NAME)
                        && memcmp (r + 2, EXPORT_NAME, len - 2) == 0);
          else if (get16 (r) == NBD_INFO_BLOCK_SIZE)
            {
              guint32 min = get32 (r + 2), preferred = get32 (r + 6), max = get32 (r + 10);

              FUZZ_CHECK (len == 14);
              FUZZ_CHECK (min == EXPORT_BLOCK && min <= preferred && preferred <= max);
              FUZZ_CHECK ((preferred & (preferred - 1)) == 0 && (max & (max - 1)) == 0);
            }
          continue;
        }
      if (type == NBD_REP_SERVER)
        {
          FUZZ_CHECK (option == NBD_OPT_LIST && len >= 4 && get32 (r) <= len - 4);
          continue;
        }
      /* the one context; its ID is reserved (0) in a list */
      if (type == NBD_REP_META_CONTEXT)
        {
          FUZZ_CHECK (option == NBD_OPT_LIST_META_CONTEXT || option == NBD_OPT_SET_META_CONTEXT);
          FUZZ_CHECK (len == 4 + strlen ("base:allocation"));
          FUZZ_CHECK (memcmp (r + 4, "base:allocation", len - 4) == 0);
          FUZZ_CHECK (get32 (r) == (option == NBD_OPT_SET_META_CONTEXT ? 1u : 0u));
          continue;
        }
      FUZZ_CHECK (type == NBD_REP_ACK || (type & NBD_REP_FLAG_ERROR));
      /* an export described successfully is described in full */
      if (type == NBD_REP_ACK && (option == NBD_OPT_INFO || option == NBD_OPT_GO))
        FUZZ_CHECK (told_export);
      return type;
    }
}

/* Walks the client's options in @in and the server's replies in @out
 * side by side, up to transmission or the end of the connection. */
static void
check_handshake (const guint8 *in, gsize in_len, const guint8 *out, gsize out_len, int r,
                 gboolean read_only, gboolean require_tls)
{
  gsize in_pos = 4, out_pos = 18;
  guint32 flags;

  FUZZ_CHECK (out_len >= 18 && get64 (out) == NBD_MAGIC && get64 (out + 8) == NBD_OPTS_MAGIC);
  FUZZ_CHECK (get16 (out + 16) == (NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES));
  if (in_len < 4)
    {
      FUZZ_CHECK (r == -ECONNRESET && out_len == 18);
      return;
    }
  /* unknown client flags drop the connection */
  flags = get32 (in);
  if (flags & ~(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES))
    {
      FUZZ_CHECK (r == -EPROTO && out_len == 18);
      return;
    }
  for (;;)
    {
      const guint8 *h = in + in_pos, *data;
      guint32 option, len, type;
      int ends = 0;

      if (in_len - in_pos < 16)
        ends = -ECONNRESET;
      else if (get64 (h) != NBD_OPTS_MAGIC)
        ends = -EPROTO;
      else if (get32 (h + 12) > MAX_OPTION)
        ends = -EMSGSIZE;
      else if (!(flags & NBD_FLAG_C_FIXED_NEWSTYLE) && get32 (h + 8) != NBD_OPT_EXPORT_NAME)
        ends = -EPROTO; /* plain newstyle knows no other option */
      /* before TLS, where it is required: EXPORT_NAME can only be closed on */
      else if (require_tls && get32 (h + 8) == NBD_OPT_EXPORT_NAME)
        ends = -EACCES;
      else if (in_len - in_pos - 16 < get32 (h + 12))
        ends = -ECONNRESET;
      if (ends != 0)
        {
          FUZZ_CHECK (r == ends && out_pos == out_len);
          return;
        }
      option = get32 (h + 8);
      len = get32 (h + 12);
      data = h + 16;
      in_pos += 16 + len;

      if (option == NBD_OPT_EXPORT_NAME)
        {
          gsize n = (flags & NBD_FLAG_C_NO_ZEROES) ? 10 : 10 + NBD_ZEROES_LENGTH;

          /* no way to say "no such export" but to close */
          if (!name_is_ours (data, len))
            {
              FUZZ_CHECK (r == -ENOENT && out_pos == out_len);
              return;
            }
          FUZZ_CHECK (out_len - out_pos >= n);
          check_export_info (out + out_pos, read_only);
          for (gsize i = 10; i < n; i++)
            FUZZ_CHECK (out[out_pos + i] == 0);
          return; /* transmission follows */
        }
      type = check_option_replies (option, out, out_len, &out_pos, read_only);
      if (require_tls && option == NBD_OPT_STARTTLS)
        {
          FUZZ_CHECK (type == (len == 0 ? NBD_REP_ACK : NBD_REP_ERR_INVALID));
          /* the rest is a TLS handshake nobody can finish without the key */
          if (type == NBD_REP_ACK)
            {
              FUZZ_CHECK (r < 0);
              return;
            }
          continue;
        }
      if (require_tls && option != NBD_OPT_ABORT)
        {
          FUZZ_CHECK (type == NBD_REP_ERR_TLS_REQD);
          continue;
        }
      if (option == NBD_OPT_ABORT)
        {
          FUZZ_CHECK (type == NBD_REP_ACK && r == 0 && out_pos == out_len);
          return;
        }
      if (option == NBD_OPT_GO && type == NBD_REP_ACK)
        return; /* transmission follows */
    }
}

/* ---- transmission, from the start ---- */

typedef struct {
  guint16 flags, type;
  guint64 offset;
  guint32 length;
  gboolean valid;
  gboolean cut;      /* a write whose payload never all came */
  gboolean answered; /* a reply with its handle came */
} Request;

typedef struct {
  GArray *requests; /* Request, in the order sent */
  int result;       /* what the stream's end calls for */
  gboolean broken;  /* framing lost: replies not sent yet may be dropped */
  /* per byte of the export: how many valid requests change it (2: more
   * than one, or a trim, after which its content is not defined), and
   * what the only one writes */
  guint8 changes[EXPORT_SIZE];
  guint8 written[EXPORT_SIZE];
} Stream;

/* What the protocol asks of a request, given what the server said it
 * supports (flush, trim, write-zeroes, FUA; write-zeroes' NO_HOLE). */
static gboolean
request_valid (const Request *q, gboolean read_only)
{
  guint16 allowed = NBD_CMD_FLAG_FUA;
  gboolean writes = FALSE;

  switch (q->type)
    {
    case NBD_CMD_READ:
      break;
    case NBD_CMD_FLUSH:
      return (q->flags & ~allowed) == 0;
    case NBD_CMD_WRITE_ZEROES:
      allowed |= NBD_CMD_FLAG_NO_HOLE;
      writes = TRUE;
      break;
    case NBD_CMD_WRITE:
    case NBD_CMD_TRIM:
      writes = TRUE;
      break;
    default:
      return FALSE;
    }
  if ((q->flags & ~allowed) || (writes && read_only))
    return FALSE;
  if (q->offset % EXPORT_BLOCK || q->length % EXPORT_BLOCK)
    return FALSE;
  return q->offset <= EXPORT_SIZE && q->length <= EXPORT_SIZE - q->offset;
}

static void
note_change (Stream *s, const Request *q, const guint8 *payload)
{
  for (guint64 i = q->offset; i < q->offset + q->length; i++)
    {
      s->changes[i] = q->type == NBD_CMD_TRIM ? 2 : MIN (s->changes[i] + 1, 2);
      s->written[i] = payload ? payload[i - q->offset] : 0;
    }
}

/* Frames the requests of @in as the protocol lays them out, gives each a
 * handle of its own (its number, from 1: handles mean nothing to the
 * server) and notes what the stream's end calls for. */
static void
frame_requests (Stream *s, guint8 *in, gsize len, gboolean read_only)
{
  gsize pos = 0;

  s->requests = g_array_new (FALSE, TRUE, sizeof (Request));
  for (;;)
    {
      Request q = { 0 };
      guint8 *h;

      if (len - pos < NBD_REQUEST_BYTES)
        {
          s->result = -ECONNRESET;
          return;
        }
      h = in + pos;
      if (get32 (h) != NBD_REQUEST_MAGIC)
        {
          s->result = -EPROTO;
          s->broken = TRUE;
          return;
        }
      q.flags = get16 (h + 4);
      q.type = get16 (h + 6);
      q.offset = get64 (h + 16);
      q.length = get32 (h + 24);
      if (q.type == NBD_CMD_DISC)
        {
          s->result = 0;
          return;
        }
      /* the server's limit, which it advertised as the maximum block size */
      if (q.type == NBD_CMD_WRITE && q.length > VB_NBD_MAX_REQUEST)
        {
          s->result = -EMSGSIZE;
          s->broken = TRUE;
          return;
        }
      q.valid = request_valid (&q, read_only);
      put64 (h + 8, s->requests->len + 1);
      pos += NBD_REQUEST_BYTES;
      if (q.type == NBD_CMD_WRITE && len - pos < q.length)
        {
          q.cut = TRUE;
          g_array_append_val (s->requests, q);
          s->result = -ECONNRESET;
          return;
        }
      if (q.valid && q.type != NBD_CMD_READ && q.type != NBD_CMD_FLUSH)
        note_change (s, &q, q.type == NBD_CMD_WRITE ? in + pos : NULL);
      if (q.type == NBD_CMD_WRITE)
        pos += q.length;
      g_array_append_val (s->requests, q);
    }
}

/* Data no request of the stream changes reads as the export had it. */
static void
check_read_data (const Stream *s, const Request *q, const guint8 *data)
{
  for (guint32 i = 0; i < q->length; i++)
    if (s->changes[q->offset + i] == 0)
      FUZZ_CHECK (data[i] == pattern (q->offset + i));
}

static void
check_replies (Stream *s, const guint8 *out, gsize out_len)
{
  gsize pos = 0;

  while (pos < out_len)
    {
      const guint8 *h = out + pos;
      guint64 handle;
      guint32 error;
      Request *q;

      if (out_len - pos < 16)
        {
          FUZZ_CHECK (s->broken); /* a reply cut short by the break */
          return;
        }
      FUZZ_CHECK (get32 (h) == NBD_SIMPLE_REPLY_MAGIC);
      error = get32 (h + 4);
      handle = get64 (h + 8);
      FUZZ_CHECK (handle >= 1 && handle <= s->requests->len);
      q = &g_array_index (s->requests, Request, handle - 1);
      FUZZ_CHECK (!q->answered);
      q->answered = TRUE;
      /* the export never fails: an error says the request was wrong */
      FUZZ_CHECK ((error == 0) == q->valid);
      FUZZ_CHECK (error == 0 || error == NBD_EPERM || error == NBD_EINVAL || error == NBD_ENOSPC);
      pos += 16;
      if (q->type == NBD_CMD_READ && error == 0)
        {
          if (out_len - pos < q->length)
            {
              FUZZ_CHECK (s->broken);
              return;
            }
          check_read_data (s, q, out + pos);
          pos += q->length;
        }
    }
  if (!s->broken)
    for (guint i = 0; i < s->requests->len; i++)
      {
        const Request *q = &g_array_index (s->requests, Request, i);

        FUZZ_CHECK (q->answered || q->cut);
      }
}

/* After a disconnect every request has run: what one request alone
 * changed, the export holds. */
static void
check_export (const Stream *s, const MemExport *m)
{
  for (guint i = 0; i < EXPORT_SIZE; i++)
    if (s->changes[i] == 0)
      FUZZ_CHECK (m->data[i] == pattern (i));
    else if (s->changes[i] == 1)
      FUZZ_CHECK (m->data[i] == s->written[i]);
}

/* PSK credentials, required: a keys file made once, read, removed. */
static const VbNbdTls *
require_tls (void)
{
  static VbNbdTls *tls;
  g_autoptr (GError) error = NULL;
  g_autofree char *path = NULL;
  int fd;

  if (tls)
    return tls;
  fd = g_file_open_tmp ("fuzz-nbd-XXXXXX.psk", &path, &error);
  FUZZ_CHECK (fd >= 0);
  close (fd);
  FUZZ_CHECK (g_file_set_contents_full (path, "fuzz:000102030405060708090a0b0c0d0e0f\n", -1,
                                        G_FILE_SET_CONTENTS_NONE, 0600, &error));
  tls = vb_nbd_tls_new_psk (VB_NBD_TLS_REQUIRE, path, &error);
  unlink (path);
  FUZZ_CHECK (tls != NULL);
  return tls;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static MemExport m;

  /* From the greeting: a writable export. */
  {
    g_autoptr (GByteArray) out = NULL;
    int r;

    mem_reset (&m, FALSE);
    r = serve (&m, data, size, TRUE, NULL, &out);
    FUZZ_CHECK (r <= 0);
    if (out)
      check_handshake (data, size, out->data, out->len, r, FALSE, FALSE);
  }
  /* From the greeting, on an address that requires TLS: nothing but
   * STARTTLS and ABORT is answered before it. */
  {
    g_autoptr (GByteArray) out = NULL;
    int r;

    mem_reset (&m, FALSE);
    r = serve (&m, data, size, TRUE, require_tls (), &out);
    FUZZ_CHECK (r <= 0);
    if (out)
      check_handshake (data, size, out->data, out->len, r, FALSE, TRUE);
  }
  /* In transmission from the first byte; the lowest bit of the first
   * request's handle says whether the export is read-only. */
  {
    g_autofree guint8 *in = g_memdup2 (data, size);
    g_autofree Stream *s = g_new0 (Stream, 1);
    g_autoptr (GByteArray) out = NULL;
    gboolean read_only = size >= NBD_REQUEST_BYTES && (data[15] & 1);
    int r;

    frame_requests (s, in, size, read_only);
    mem_reset (&m, read_only);
    r = serve (&m, in, size, FALSE, NULL, &out);
    FUZZ_CHECK (r == s->result);
    if (out)
      check_replies (s, out->data, out->len);
    if (s->result == 0)
      check_export (s, &m);
    g_array_unref (s->requests);
  }
  return 0;
}

/* ---- seeds: a few clients, from the greeting and in transmission ---- */

static void
add_option (GByteArray *b, guint32 option, const void *data, guint32 len)
{
  guint8 h[16];

  put64 (h, NBD_OPTS_MAGIC);
  put32 (h + 8, option);
  put32 (h + 12, len);
  g_byte_array_append (b, h, sizeof h);
  if (len)
    g_byte_array_append (b, data, len);
}

/* A request and the first @payload bytes of a write's data. */
static void
add_request_cut (GByteArray *b, guint16 flags, guint16 type, guint64 handle, guint64 offset,
                 guint32 length, guint32 payload)
{
  guint8 h[NBD_REQUEST_BYTES];

  put32 (h, NBD_REQUEST_MAGIC);
  put16 (h + 4, flags);
  put16 (h + 6, type);
  put64 (h + 8, handle);
  put64 (h + 16, offset);
  put32 (h + 24, length);
  g_byte_array_append (b, h, sizeof h);
  for (guint32 i = 0; i < payload; i++)
    {
      guint8 c = (guint8) (i * 7 + handle);

      g_byte_array_append (b, &c, 1);
    }
}

static void
add_request (GByteArray *b, guint16 flags, guint16 type, guint64 handle, guint64 offset,
             guint32 length)
{
  add_request_cut (b, flags, type, handle, offset, length, type == NBD_CMD_WRITE ? length : 0);
}

static void
add_flags (GByteArray *b, guint32 flags)
{
  guint8 f[4];

  put32 (f, flags);
  g_byte_array_append (b, f, sizeof f);
}

/* A bit of everything a client does in transmission, a few refused. */
static void
add_requests (GByteArray *b, guint64 first_handle)
{
  guint64 h = first_handle;

  add_request (b, 0, NBD_CMD_WRITE, h++, 0, 1024);
  add_request (b, NBD_CMD_FLAG_FUA, NBD_CMD_WRITE, h++, 4096, 512);
  add_request (b, 0, NBD_CMD_READ, h++, 0, 4096);
  add_request (b, 0, NBD_CMD_FLUSH, h++, 0, 0);
  add_request (b, 0, NBD_CMD_TRIM, h++, 8192, 1024);
  add_request (b, NBD_CMD_FLAG_NO_HOLE, NBD_CMD_WRITE_ZEROES, h++, 16384, 2048);
  add_request (b, 0, NBD_CMD_READ, h++, EXPORT_SIZE - 512, 1024); /* past the end */
  add_request (b, 0, NBD_CMD_READ, h++, 100, 512);                /* misaligned */
  add_request (b, 0, NBD_CMD_WRITE, h++, EXPORT_SIZE, 512);       /* past the end */
  add_request (b, 0, 9, h++, 0, 512);                             /* unknown */
  add_request (b, 0, NBD_CMD_READ, h++, 16384, 0);
  add_request (b, 0, NBD_CMD_DISC, h++, 0, 0);
}

static gboolean
write_seed (const char *dir, const char *name, GByteArray *b)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autoptr (GError) error = NULL;
  gboolean ok = g_file_set_contents (path, (const char *) b->data, b->len, &error);

  if (!ok)
    fprintf (stderr, "%s\n", error->message);
  g_byte_array_unref (b);
  return ok;
}

int
vb_fuzz_write_seeds (const char *dir)
{
  static const guint8 info[] = { 0, 0, 0, 4, 'f', 'u', 'z', 'z', 0, 2, 0, NBD_INFO_NAME, 0, 2 };
  static const guint8 go_default[] = { 0, 0, 0, 0, 0, 0 };
  GByteArray *b;
  gboolean ok = TRUE;

  /* fixed newstyle: structured replies, a listing, INFO, GO, requests */
  b = g_byte_array_new ();
  add_flags (b, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
  add_option (b, NBD_OPT_STRUCTURED_REPLY, NULL, 0);
  add_option (b, NBD_OPT_LIST, NULL, 0);
  add_option (b, NBD_OPT_INFO, info, sizeof info);
  add_option (b, NBD_OPT_GO, go_default, sizeof go_default);
  add_requests (b, 1);
  ok &= write_seed (dir, "handshake-go", b);

  /* the old way in: EXPORT_NAME, zeroes after the reply */
  b = g_byte_array_new ();
  add_flags (b, NBD_FLAG_C_FIXED_NEWSTYLE);
  add_option (b, 42, "ignored", 7);
  add_option (b, NBD_OPT_STARTTLS, NULL, 0);
  add_option (b, NBD_OPT_EXPORT_NAME, EXPORT_NAME, strlen (EXPORT_NAME));
  add_request (b, 0, NBD_CMD_READ, 1, 0, 512);
  add_request (b, 0, NBD_CMD_DISC, 2, 0, 0);
  ok &= write_seed (dir, "handshake-export-name", b);

  /* a client that asks about a missing export and gives up */
  b = g_byte_array_new ();
  add_flags (b, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
  add_option (b, NBD_OPT_GO, "\0\0\0\7missing\0\0", 13);
  add_option (b, NBD_OPT_STRUCTURED_REPLY, "x", 1);
  add_option (b, NBD_OPT_ABORT, NULL, 0);
  ok &= write_seed (dir, "handshake-abort", b);

  /* the kernel's client: no handshake, even handles (writable) */
  b = g_byte_array_new ();
  add_requests (b, 2);
  ok &= write_seed (dir, "transmission", b);

  /* odd first handle: read-only; a write cut short ends it */
  b = g_byte_array_new ();
  add_request (b, 0, NBD_CMD_READ, 1, 512, 1024);
  add_request (b, 0, NBD_CMD_WRITE, 2, 0, 512);
  add_request (b, 0, NBD_CMD_TRIM, 3, 0, 512);
  add_request (b, 0, NBD_CMD_READ, 4, 0, 512);
  add_request (b, 0, NBD_CMD_WRITE, 5, 0, 0);
  add_request_cut (b, 0, NBD_CMD_WRITE, 6, 1024, 4096, 300);
  ok &= write_seed (dir, "transmission-read-only", b);
  return ok ? 0 : 1;
}
