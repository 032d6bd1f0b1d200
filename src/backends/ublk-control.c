/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* See ublk-control.h. */
#include "config.h"

#include "ublk-control.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/ublk_cmd.h>
#include <liburing.h>
#include <string.h>
#include <unistd.h>

int
vb_ublk_control (guint32 op, guint32 dev_id, void *buf, guint16 len, guint64 data0)
{
  struct io_uring ring;
  struct io_uring_sqe *sqe;
  struct io_uring_cqe *cqe;
  struct ublksrv_ctrl_cmd *cmd;
  int fd, r;

  fd = open ("/dev/ublk-control", O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  r = io_uring_queue_init (4, &ring, IORING_SETUP_SQE128);
  if (r < 0)
    {
      close (fd);
      return r;
    }
  sqe = io_uring_get_sqe (&ring);
  io_uring_prep_rw (IORING_OP_URING_CMD, sqe, fd, NULL, 0, 0);
  sqe->cmd_op = op;
  /* a 128-byte SQE: the command fills its second half */
  cmd = (struct ublksrv_ctrl_cmd *) sqe->cmd;
  memset (cmd, 0, sizeof *cmd);
  cmd->dev_id = dev_id;
  cmd->queue_id = (guint16) -1;
  cmd->addr = (guint64) (guintptr) buf;
  cmd->len = len;
  cmd->data[0] = data0;
  r = io_uring_submit_and_wait (&ring, 1);
  if (r >= 0 && (r = io_uring_wait_cqe (&ring, &cqe)) == 0)
    {
      r = cqe->res;
      io_uring_cqe_seen (&ring, cqe);
    }
  io_uring_queue_exit (&ring);
  close (fd);
  return r < 0 ? r : 0;
}

int
vb_ublk_features (guint64 *features)
{
  *features = 0;
  return vb_ublk_control (UBLK_U_CMD_GET_FEATURES, (guint32) -1, features, sizeof *features, 0);
}
