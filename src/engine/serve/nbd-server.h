/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An NBD server for one export, served through VbBlockOps: fixed-newstyle
 * handshake, simple and structured replies. Each connection has a thread
 * and a ring of its own (nbd-conn.c): it reads requests as they come, runs
 * many at once on the export's asynchronous path and replies out of order.
 * The server never touches a GMainContext, so vblkd's main loop can own
 * it. */
#pragma once

#include <glib.h>

#include "block-ops.h"
#include "nbd-tls.h"

G_BEGIN_DECLS

/* Largest READ or WRITE a client may send (advertised as the maximum
 * block size); a WRITE announcing a longer payload closes the connection. */
#define VB_NBD_MAX_REQUEST (32u << 20)
/* Connections served at once per server; more are accepted and closed. */
#define VB_NBD_MAX_CONNECTIONS 64
/* Requests of one connection read and not yet replied to: at this many,
 * nothing more is read from that connection until one completes. */
#define VB_NBD_MAX_IN_FLIGHT 128u
/* An export without the asynchronous path (VbBlockOps.submit): threads
 * running the requests of one connection at once, started as needed. */
#define VB_NBD_MAX_WORKERS 16u
/* Data buffers one connection may hold (payloads read, data to send, and
 * free buffers kept for reuse); at least one VB_NBD_MAX_REQUEST. */
#define VB_NBD_BUFFER_BUDGET (64u << 20)

typedef struct _VbNbdServer VbNbdServer;

typedef enum {
  VB_NBD_SERVE_DEFAULT = 0,
  /* The peer already knows size and flags (e.g. the kernel nbd client on
   * one end of a socketpair): start in the transmission phase, simple
   * replies only; requests are checked against the size of now, which
   * the peer learns from whoever owns it. */
  VB_NBD_SERVE_NO_HANDSHAKE = 1 << 0,
} VbNbdServeFlags;

/* @export_name is what NBD_OPT_GO / EXPORT_NAME / LIST see ("" allowed; the
 * default export "" always maps to this one as well); @description may be
 * NULL. @ops must provide size, pread and (unless read-only) pwrite; the
 * block size must be a power of two from 1 to 64 KiB and must not change
 * while the server exists. @ops and @handle must outlive the server. */
VbNbdServer *vb_nbd_server_new (const char *export_name, const char *description,
                                const VbBlockOps *ops, void *handle, GError **error);

/* Start accepting on "unix:PATH" or "tcp:HOST:PORT" (HOST may be a name, an
 * address, "[v6-address]" or empty for every address). May be called more
 * than once. A stale unix socket (nobody listening) at PATH is replaced, a
 * live one is not. A host name is resolved here, blocking: from a main loop,
 * pass a numeric address. The socket gets the process umask's mode. Clients
 * of this address may or must start TLS with @tls (NULL: plaintext only),
 * which the server holds a reference to. */
gboolean vb_nbd_server_listen (VbNbdServer *server, const char *address, VbNbdTls *tls,
                               GError **error);

/* Serve one already connected stream socket; the server owns @fd from now
 * on, and closes it even when this fails (stopping, or too many connections). */
gboolean vb_nbd_server_serve_fd (VbNbdServer *server, int fd, VbNbdServeFlags flags,
                                 GError **error);

/* Connections currently being served (handshake or transmission). */
guint vb_nbd_server_n_connections (VbNbdServer *server);

/* Stops accepting, shuts every connection down with shutdown(2) (requests
 * already running finish on the device, but their replies are lost; those
 * not started are dropped), joins all threads and unlinks the unix sockets
 * it made. */
void vb_nbd_server_free (VbNbdServer *server);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (VbNbdServer, vb_nbd_server_free)

G_END_DECLS
