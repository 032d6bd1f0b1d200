/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The NBD fixed-newstyle handshake of one connection: the greeting, then
 * option haggling (EXPORT_NAME, ABORT, LIST, INFO, GO, STRUCTURED_REPLY,
 * LIST_META_CONTEXT, SET_META_CONTEXT, and STARTTLS where the listener has
 * TLS; unknown options refused) until the client enters transmission. */
#include "config.h"

#include "nbd-handshake.h"
#include "nbd-server.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>

/* Wire constants, named and valued as in the NBD protocol (doc/proto.md of
 * NetworkBlockDevice/nbd). */
#define NBD_MAGIC G_GUINT64_CONSTANT (0x4e42444d41474943)      /* "NBDMAGIC" */
#define NBD_OPTS_MAGIC G_GUINT64_CONSTANT (0x49484156454f5054) /* "IHAVEOPT" */
#define NBD_REP_MAGIC G_GUINT64_CONSTANT (0x0003e889045565a9)

#define NBD_FLAG_FIXED_NEWSTYLE (1u << 0) /* handshake flags */
#define NBD_FLAG_NO_ZEROES (1u << 1)
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0) /* client flags */
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
#define NBD_REP_ERR_UNSUP ((1u << 31) + 1)
#define NBD_REP_ERR_INVALID ((1u << 31) + 3)
#define NBD_REP_ERR_TLS_REQD ((1u << 31) + 5)
#define NBD_REP_ERR_UNKNOWN ((1u << 31) + 6)

#define NBD_INFO_EXPORT 0u
#define NBD_INFO_NAME 1u
#define NBD_INFO_DESCRIPTION 2u
#define NBD_INFO_BLOCK_SIZE 3u

#define NBD_MAX_STRING 4096u /* export names, descriptions, messages */
#define NBD_ZEROES_LENGTH 124u

/* The longest well-formed option we parse: NBD_OPT_GO with a 4096-byte name
 * and every possible information request. Longer ones close the connection. */
#define VB_NBD_MAX_OPTION (4u + NBD_MAX_STRING + 2u + 2u * G_MAXUINT16)
#define VB_NBD_PREFERRED_BLOCK 4096u
/* A client that stalls in the handshake gives its slot back after this;
 * once in transmission, idling is legitimate (the kernel client does). */
#define VB_NBD_HANDSHAKE_TIMEOUT_S 30

typedef struct {
  const VbNbdExport *export;
  const VbNbdTls *tls; /* NULL: no TLS */
  int fd;              /* the plaintext side of the TLS link once there is one */
  gboolean no_zeroes;
  VbNbdTerms *terms;
  VbNbdTlsLink *link;
} VbNbdHandshake;

static int
send2 (int fd, const void *a, gsize alen, const void *b, gsize blen)
{
  struct iovec iov[2] = { { (void *) a, alen }, { (void *) b, blen } };
  return send_iov (fd, iov, 2);
}

static gboolean
name_is_ours (const VbNbdExport *e, const guint8 *name, guint32 len)
{
  return len == 0 || (len == strlen (e->name) && memcmp (name, e->name, len) == 0);
}

/* Size and flags are read when the client asks, so a connection made after
 * a resize or a change to read-only sees the device as it is now. */
void
vb_nbd_terms_load (const VbNbdExport *e, VbNbdTerms *terms)
{
  const VbBlockOps *ops = e->ops;
  guint16 f = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FUA | NBD_FLAG_SEND_WRITE_ZEROES;

  terms->size = ops->size (e->handle);
  if (ops->flush)
    f |= NBD_FLAG_SEND_FLUSH;
  if (ops->discard)
    f |= NBD_FLAG_SEND_TRIM;
  if (ops->can_multi_conn && ops->can_multi_conn (e->handle))
    f |= NBD_FLAG_CAN_MULTI_CONN;
  if (ops->pwrite == NULL || (ops->read_only && ops->read_only (e->handle)))
    f |= NBD_FLAG_READ_ONLY;
  terms->tflags = f;
}

static int
send_opt_reply (VbNbdHandshake *c, guint32 option, guint32 type, const void *data, guint32 len)
{
  guint8 h[20];

  put64 (h, NBD_REP_MAGIC);
  put32 (h + 8, option);
  put32 (h + 12, type);
  put32 (h + 16, len);
  return send2 (c->fd, h, sizeof h, data, len);
}

static int
send_opt_error (VbNbdHandshake *c, guint32 option, guint32 type, const char *message)
{
  return send_opt_reply (c, option, type, message, strlen (message));
}

static int
send_info (VbNbdHandshake *c, guint32 option, guint16 type, const void *data, gsize len)
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
handle_list (VbNbdHandshake *c, guint32 len)
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
handle_info_go (VbNbdHandshake *c, guint32 option, const guint8 *data, guint32 len)
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

  vb_nbd_terms_load (c->export, c->terms);
  put64 (export_info, c->terms->size);
  put16 (export_info + 8, c->terms->tflags);
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

/* Whether @query (of a LIST_META_CONTEXT when @list) selects
 * base:allocation: by its name, or in a list by its namespace alone. */
static gboolean
query_selects_allocation (const guint8 *query, guint32 len, gboolean list)
{
  const char *name = VB_NBD_CONTEXT_ALLOCATION;

  return (len == strlen (name) && memcmp (query, name, len) == 0)
         || (list && len == 5 && memcmp (query, "base:", 5) == 0);
}

/* NBD_OPT_LIST_META_CONTEXT and NBD_OPT_SET_META_CONTEXT: an export name,
 * then a count of queries, each a length and a string. base:allocation
 * is the one context; queries of other namespaces select nothing. */
static int
handle_meta_context (VbNbdHandshake *c, guint32 option, const guint8 *data, guint32 len)
{
  gboolean list = option == NBD_OPT_LIST_META_CONTEXT;
  gboolean selected = FALSE;
  guint32 nlen, n_queries;
  guint64 at;
  guint8 reply[4 + sizeof VB_NBD_CONTEXT_ALLOCATION - 1];
  int r;

  /* a set replaces what was set, even when it fails (spec) */
  if (!list)
    c->terms->allocation = FALSE;
  if (!c->terms->structured)
    return send_opt_error (c, option, NBD_REP_ERR_INVALID,
                           "structured replies must be negotiated first");
  if (len < 8 || (nlen = get32 (data)) > len - 8)
    return send_opt_error (c, option, NBD_REP_ERR_INVALID, "malformed request");
  if (nlen > NBD_MAX_STRING)
    return send_opt_error (c, option, NBD_REP_ERR_INVALID, "export name longer than 4096 bytes");
  n_queries = get32 (data + 4 + nlen);
  at = 8 + (guint64) nlen;
  for (guint32 i = 0; i < n_queries; i++)
    {
      guint32 qlen;
      if (len - at < 4 || (qlen = get32 (data + at)) > len - at - 4)
        return send_opt_error (c, option, NBD_REP_ERR_INVALID, "malformed query");
      if (qlen > NBD_MAX_STRING)
        return send_opt_error (c, option, NBD_REP_ERR_INVALID, "query longer than 4096 bytes");
      selected |= query_selects_allocation (data + at + 4, qlen, list);
      at += 4 + (guint64) qlen;
    }
  if (at != len)
    return send_opt_error (c, option, NBD_REP_ERR_INVALID, "data after the last query");
  if (!name_is_ours (c->export, data + 4, nlen))
    return send_opt_error (c, option, NBD_REP_ERR_UNKNOWN, "no such export");
  /* a list without queries lists everything; a set replaces what was set */
  if (list)
    selected |= n_queries == 0;
  else
    c->terms->allocation = selected;
  if (selected)
    {
      put32 (reply, list ? 0 : VB_NBD_CONTEXT_ALLOCATION_ID);
      memcpy (reply + 4, VB_NBD_CONTEXT_ALLOCATION, sizeof reply - 4);
      if ((r = send_opt_reply (c, option, NBD_REP_META_CONTEXT, reply, sizeof reply)) < 0)
        return r;
    }
  return send_opt_reply (c, option, NBD_REP_ACK, NULL, 0);
}

/* NBD_OPT_EXPORT_NAME cannot carry an error: a wrong name closes (spec). */
static int
handle_export_name (VbNbdHandshake *c, const guint8 *name, guint32 len)
{
  guint8 reply[10 + NBD_ZEROES_LENGTH] = { 0 };

  if (len > NBD_MAX_STRING || !name_is_ours (c->export, name, len))
    return -ENOENT;
  vb_nbd_terms_load (c->export, c->terms);
  put64 (reply, c->terms->size);
  put16 (reply + 8, c->terms->tflags);
  return send2 (c->fd, reply, c->no_zeroes ? 10 : sizeof reply, NULL, 0) < 0 ? -EIO : 1;
}

/* The fixed newstyle greeting, and the client's flags (@fixed: it speaks
 * fixed newstyle). */
static int
exchange_greeting (VbNbdHandshake *c, gboolean *fixed)
{
  guint8 greeting[18], flags[4];
  guint32 client_flags;
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
  *fixed = (client_flags & NBD_FLAG_C_FIXED_NEWSTYLE) != 0;
  c->no_zeroes = (client_flags & NBD_FLAG_C_NO_ZEROES) != 0;
  return 0;
}

static void
set_socket_timeout (int fd, int seconds)
{
  struct timeval tv = { .tv_sec = seconds };

  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* After the ACK the TLS handshake runs on the socket; the option haggling
 * goes on over the link's plaintext side, and what was negotiated before
 * is forgotten (the spec: an attacker may have written it). */
static int
handle_starttls (VbNbdHandshake *c, guint32 len)
{
  int r, plain_fd = -1;

  if (vb_nbd_tls_mode (c->tls) == VB_NBD_TLS_OFF)
    return send_opt_error (c, NBD_OPT_STARTTLS, NBD_REP_ERR_UNSUP,
                           "TLS is not offered on this address");
  if (c->link)
    return send_opt_error (c, NBD_OPT_STARTTLS, NBD_REP_ERR_INVALID, "TLS is already in use");
  if (len != 0)
    return send_opt_error (c, NBD_OPT_STARTTLS, NBD_REP_ERR_INVALID, "takes no data");
  if ((r = send_opt_reply (c, NBD_OPT_STARTTLS, NBD_REP_ACK, NULL, 0)) < 0)
    return r;
  if ((r = vb_nbd_tls_link_start (c->tls, c->fd, &c->link, &plain_fd)) < 0)
    return r;
  c->fd = plain_fd;
  set_socket_timeout (c->fd, VB_NBD_HANDSHAKE_TIMEOUT_S);
  c->terms->structured = FALSE;
  c->terms->allocation = FALSE;
  return 0;
}

/* An option whose data nothing needs (already dropped unread). */
static int
handle_dataless_option (VbNbdHandshake *c, guint32 option, guint32 len)
{
  switch (option)
    {
    case NBD_OPT_LIST:
      return handle_list (c, len);
    case NBD_OPT_STARTTLS:
      return handle_starttls (c, len);
    case NBD_OPT_STRUCTURED_REPLY:
      if (len != 0)
        return send_opt_error (c, option, NBD_REP_ERR_INVALID, "takes no data");
      c->terms->structured = TRUE;
      return send_opt_reply (c, option, NBD_REP_ACK, NULL, 0);
    default:
      return send_opt_error (c, option, NBD_REP_ERR_UNSUP, "unknown option");
    }
}

/* Returns 1 to enter transmission, 0 when the client aborted, -errno to
 * close the connection. */
static int
run_handshake (VbNbdHandshake *c)
{
  gboolean fixed = FALSE;
  int r;

  if ((r = exchange_greeting (c, &fixed)) < 0)
    return r;
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
      if (vb_nbd_tls_mode (c->tls) == VB_NBD_TLS_REQUIRE && c->link == NULL
          && option != NBD_OPT_STARTTLS && option != NBD_OPT_ABORT)
        {
          /* EXPORT_NAME cannot be answered with an error */
          if (option == NBD_OPT_EXPORT_NAME)
            return -EACCES;
          if ((r = recv_discard (c->fd, len)) < 0
              || (r = send_opt_error (c, option, NBD_REP_ERR_TLS_REQD,
                                      "TLS is required: send NBD_OPT_STARTTLS first"))
                     < 0)
            return r;
          continue;
        }

      switch (option)
        {
        case NBD_OPT_EXPORT_NAME:
        case NBD_OPT_INFO:
        case NBD_OPT_GO:
        case NBD_OPT_LIST_META_CONTEXT:
        case NBD_OPT_SET_META_CONTEXT:
          data = g_malloc (MAX (len, 1));
          if ((r = recv_all (c->fd, data, len)) < 0)
            return r;
          if (option == NBD_OPT_EXPORT_NAME)
            r = handle_export_name (c, data, len);
          else if (option == NBD_OPT_INFO || option == NBD_OPT_GO)
            r = handle_info_go (c, option, data, len);
          else
            r = handle_meta_context (c, option, data, len);
          break;
        default:
          /* Nothing else needs its data: drop it without storing it. */
          if ((r = recv_discard (c->fd, len)) < 0)
            return r;
          if (option == NBD_OPT_ABORT)
            {
              send_opt_reply (c, option, NBD_REP_ACK, NULL, 0);
              return 0;
            }
          r = handle_dataless_option (c, option, len);
          break;
        }
      if (r != 0)
        return r;
    }
}

int
vb_nbd_handshake (const VbNbdExport *export, const VbNbdTls *tls, int fd, VbNbdTerms *terms,
                  VbNbdTlsLink **link, int *plain_fd)
{
  VbNbdHandshake c = { .export = export, .tls = tls, .fd = fd, .terms = terms };
  int r;

  set_socket_timeout (fd, VB_NBD_HANDSHAKE_TIMEOUT_S);
  r = run_handshake (&c);
  set_socket_timeout (c.fd, 0);
  *link = c.link;
  *plain_fd = c.fd;
  return r;
}
