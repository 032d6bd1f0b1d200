/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One ublk control command (linux/ublk_cmd.h) on /dev/ublk-control: an
 * io_uring URING_CMD in a 128-byte SQE, as the driver requires. Blocking
 * (START_DEV and END_USER_RECOVERY wait for every queue's FETCH_REQ); any
 * thread. Shared by backend ublk and the tests' vb-ublk-ctl. */
#pragma once

#include <glib.h>
#include <linux/ublk_cmd.h>
#include <sys/ioctl.h>

G_BEGIN_DECLS

/* What drivers newer than Debian 12's header know (values as in Linux's
 * include/uapi/linux/ublk_cmd.h). */
#ifndef UBLK_U_CMD_GET_FEATURES
#define UBLK_U_CMD_GET_FEATURES _IOR ('u', 0x13, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_U_CMD_UPDATE_SIZE
#define UBLK_U_CMD_UPDATE_SIZE _IOWR ('u', 0x15, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_F_UPDATE_SIZE
#define UBLK_F_UPDATE_SIZE (1ULL << 10)
#endif
#ifndef UBLK_F_CMD_IOCTL_ENCODE
#define UBLK_F_CMD_IOCTL_ENCODE (1ULL << 6)
#endif
#ifndef UBLK_F_AUTO_BUF_REG
#define UBLK_F_AUTO_BUF_REG (1ULL << 11)
#endif
#ifndef UBLK_PARAM_TYPE_DMA_ALIGN
#define UBLK_PARAM_TYPE_DMA_ALIGN (1 << 4)
#endif

/* struct ublk_params as drivers lay it out from Linux 6.14 on, up to the
 * DMA alignment (6.1's ends after the discard part; every driver takes
 * what it knows of the first len bytes). */
typedef struct {
  guint32 len;
  guint32 types;
  struct ublk_param_basic basic;
  struct ublk_param_discard discard;
  guint32 devt[4];  /* struct ublk_param_devt */
  guint32 zoned[8]; /* struct ublk_param_zoned */
  guint32 dma_alignment;
  guint8 dma_pad[4];
} VbUblkParams;
G_STATIC_ASSERT (G_STRUCT_OFFSET (VbUblkParams, devt) == 60);
G_STATIC_ASSERT (G_STRUCT_OFFSET (VbUblkParams, dma_alignment) == 108);

/* UBLK_CMD_@op on device @dev_id with @buf (@len bytes, may be NULL) and
 * data[0] = @data0: 0 or -errno. */
int vb_ublk_control (guint32 op, guint32 dev_id, void *buf, guint16 len, guint64 data0);

/* The driver's UBLK_F_* features (GET_FEATURES, Linux 6.5 on) into
 * @features: 0, or -errno when the driver cannot say (Linux 6.1: it has
 * exactly the features of linux/ublk_cmd.h as Debian 12 ships it). */
int vb_ublk_features (guint64 *features);

G_END_DECLS
