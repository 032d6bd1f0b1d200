/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Backend "ublk": a ublk device's queues served from the engine's switch
 * (ublk-queues.c). */
#pragma once

#include <glib.h>

#include "engine-switch.h"

G_BEGIN_DECLS

#define QUEUE_DEPTH 64
#define IO_BUF_BYTES (512u << 10) /* the largest request, and each tag's buffer */
#define MAX_QUEUES 4              /* one per CPU up to this */

typedef struct _VbUblkDevice VbUblkDevice;

/* Opens /dev/ublkcID and starts every queue's thread; returns once each
 * has fetched all its tags (what START_DEV and END_USER_RECOVERY wait
 * for), or failed (vb_ublk_device_opened says which; @error is set). The
 * threads end when the driver aborts their tags. @flags: the device's, as
 * the driver took them. UBLK_F_AUTO_BUF_REG: the driver puts each
 * request's own pages in the queue's ring and the engine's component I/O
 * uses them in place (zero copy); otherwise the driver copies into the
 * tags' buffers. UBLK_F_CMD_IOCTL_ENCODE: the I/O commands go with their
 * ioctl-encoded numbers (a driver built without the legacy ones takes
 * nothing else). */
VbUblkDevice *vb_ublk_device_open (guint dev_id, guint n_queues, guint64 flags, VbEngineSwitch *sw,
                                   GError **error);
/* Every queue's thread runs. */
gboolean vb_ublk_device_opened (VbUblkDevice *dev);
/* After STOP_DEV (or a failed open): the threads joined, all freed. */
void vb_ublk_device_free (VbUblkDevice *dev);

G_END_DECLS
