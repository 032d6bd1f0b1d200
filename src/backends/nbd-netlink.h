/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The kernel nbd client, driven over generic netlink (family "nbd",
 * linux/nbd-netlink.h): the half of backend nbd that talks to the kernel.
 * The sockets handed over are already in NBD's transmission phase (the
 * kernel does no handshake): vblk's NBD server serves their other ends
 * with VB_NBD_SERVE_NO_HANDSHAKE. Blocking; any thread. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  gint index;                  /* /dev/nbdINDEX, or -1: the kernel picks a free one */
  guint64 size;                /* bytes */
  guint64 block_size;          /* a power of two from 512 to the page size */
  guint64 server_flags;        /* NBD_FLAG_* of the export */
  guint64 timeout_s;           /* a request outstanding this long fails (0: the kernel's) */
  guint64 dead_conn_timeout_s; /* dead sockets are waited for this long (RECONFIGURE) */
  const char *backend_id;      /* shown in /sys/block/nbdN/backend (NULL: none) */
  const int *fds;              /* connected stream sockets, one per connection */
  guint n_fds;
} VbNbdConnect;

/* The kernel family is there (module nbd loaded); FALSE with a reason. */
gboolean vb_nbd_netlink_available (char **reason);

/* NBD_CMD_CONNECT: the device's index, or -1 with @error. The kernel
 * holds its own references to the sockets; the caller may close its fds. */
gint vb_nbd_netlink_connect (const VbNbdConnect *connect, GError **error);

/* NBD_CMD_RECONFIGURE: new sockets for a live device whose connections
 * died (within its dead-connection timeout). A device connected with a
 * backend identifier takes only a command that names the same one. */
gboolean vb_nbd_netlink_reconfigure (gint index, const char *backend_id, const int *fds,
                                     guint n_fds, GError **error);

/* NBD_CMD_RECONFIGURE with a new size: the kernel announces the capacity
 * (a device connected over netlink refuses the ioctl NBD_SET_SIZE). */
gboolean vb_nbd_netlink_resize (gint index, const char *backend_id, guint64 size, GError **error);

/* NBD_CMD_DISCONNECT. */
gboolean vb_nbd_netlink_disconnect (gint index, GError **error);

G_END_DECLS
