/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One NBD connection from greeting to close: the protocol half of the NBD
 * server (nbd-server.c owns the sockets and the connection threads).
 * Blocking; it runs on the connection's thread, or straight on a socketpair
 * in a fuzz target, and starts and joins its own workers. */
#pragma once

#include <glib.h>

#include "block-ops.h"
#include "nbd-tls.h"

G_BEGIN_DECLS

typedef struct {
  const char *name;        /* at most 4096 bytes of UTF-8 */
  const char *description; /* NULL: none */
  const VbBlockOps *ops;
  void *handle;
  guint32 block_size; /* power of two, 1 to 64 KiB */
} VbNbdExport;

/* Serves @fd until the client disconnects or breaks the protocol: returns 0,
 * or the -errno that ended it. Without @handshake the connection starts in
 * transmission with simple replies. With @tls (may be NULL) the client may
 * or must (its mode) start TLS. Does not close @fd, but may shut it down
 * (shutdown(2)) to stop its workers; every worker is joined on return. */
int vb_nbd_conn_run (const VbNbdExport *export, const VbNbdTls *tls, int fd, gboolean handshake);

G_END_DECLS
