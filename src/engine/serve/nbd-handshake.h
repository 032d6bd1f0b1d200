/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Private to the NBD protocol code: the handshake phase (nbd-handshake.c),
 * which settles what nbd-conn.c's transmission phase is held to, and the
 * byte-order and socket helpers both halves use. */
#pragma once

#include "nbd-conn.h"
#include "nbd-tls.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

G_BEGIN_DECLS

/* Transmission flags, named and valued as in the NBD protocol. */
#define NBD_FLAG_HAS_FLAGS (1u << 0)
#define NBD_FLAG_READ_ONLY (1u << 1)
#define NBD_FLAG_SEND_FLUSH (1u << 2)
#define NBD_FLAG_SEND_FUA (1u << 3)
#define NBD_FLAG_SEND_TRIM (1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1u << 6)
#define NBD_FLAG_CAN_MULTI_CONN (1u << 8)

/* What the client was told in the handshake and transmission holds it to. */
typedef struct {
  guint64 size;        /* as told to the client */
  guint16 tflags;      /* transmission flags, as told to the client */
  gboolean structured; /* the client asked for structured replies */
  gboolean allocation; /* the client selected base:allocation (block status) */
} VbNbdTerms;

/* The one metadata context, and the ID it has on this server. */
#define VB_NBD_CONTEXT_ALLOCATION "base:allocation"
#define VB_NBD_CONTEXT_ALLOCATION_ID 1u

/* Reads the export's size and transmission flags into @terms, leaving
 * what the client negotiated as it is. */
void vb_nbd_terms_load (const VbNbdExport *export, VbNbdTerms *terms);

/* Runs the fixed-newstyle handshake on @fd and fills @terms: returns 1 to
 * enter transmission, 0 when the client aborted, -errno to close. With
 * @tls (may be NULL) a client may start TLS: *@link is then the session
 * (NULL without one), which the caller finishes whatever the result, and
 * *@plain_fd the socket the protocol goes on on (@fd without TLS). */
int vb_nbd_handshake (const VbNbdExport *export, const VbNbdTls *tls, int fd, VbNbdTerms *terms,
                      VbNbdTlsLink **link, int *plain_fd);

/* All integers on the wire are big-endian. */

static inline void
put16 (guint8 *p, guint16 v)
{
  v = GUINT16_TO_BE (v);
  memcpy (p, &v, sizeof v);
}

static inline void
put32 (guint8 *p, guint32 v)
{
  v = GUINT32_TO_BE (v);
  memcpy (p, &v, sizeof v);
}

static inline void
put64 (guint8 *p, guint64 v)
{
  v = GUINT64_TO_BE (v);
  memcpy (p, &v, sizeof v);
}

static inline guint16
get16 (const guint8 *p)
{
  guint16 v;
  memcpy (&v, p, sizeof v);
  return GUINT16_FROM_BE (v);
}

static inline guint32
get32 (const guint8 *p)
{
  guint32 v;
  memcpy (&v, p, sizeof v);
  return GUINT32_FROM_BE (v);
}

static inline guint64
get64 (const guint8 *p)
{
  guint64 v;
  memcpy (&v, p, sizeof v);
  return GUINT64_FROM_BE (v);
}

static inline int
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

static inline int
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
static inline int
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

G_END_DECLS
