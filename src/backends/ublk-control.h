/* One ublk control command (linux/ublk_cmd.h) on /dev/ublk-control: an
 * io_uring URING_CMD in a 128-byte SQE, as the driver requires. Blocking
 * (START_DEV and END_USER_RECOVERY wait for every queue's FETCH_REQ); any
 * thread. Shared by backend ublk and the tests' vb-ublk-ctl. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* UBLK_CMD_@op on device @dev_id with @buf (@len bytes, may be NULL) and
 * data[0] = @data0: 0 or -errno. */
int vb_ublk_control (guint32 op, guint32 dev_id, void *buf, guint16 len, guint64 data0);

G_END_DECLS
