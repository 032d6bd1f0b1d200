/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vb-ublk-ctl: the ublk control commands a test needs around vblkd,
 * through /dev/ublk-control (io_uring URING_CMD, 128-byte SQEs):
 *   vb-ublk-ctl info ID     state, queues, depth, server pid of ublk device ID
 *   vb-ublk-ctl delete ID   STOP_DEV then DEL_DEV (a test's cleanup of a
 *                           device whose server was killed)
 * Exits 0, 1 (the command failed), 2 (usage). */
#include "config.h"

#include "ublk-control.h"

#include <linux/ublk_cmd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
main (int argc, char **argv)
{
  struct ublksrv_ctrl_dev_info info;
  char *end;
  unsigned long id;
  int r;

  if (argc != 3 || (id = strtoul (argv[2], &end, 10), *end != '\0' || end == argv[2]))
    {
      fprintf (stderr, "usage: vb-ublk-ctl info|delete ID\n");
      return 2;
    }
  if (strcmp (argv[1], "info") == 0)
    {
      memset (&info, 0, sizeof info);
      r = vb_ublk_control (UBLK_CMD_GET_DEV_INFO, (unsigned) id, &info, sizeof info, 0);
      if (r == 0)
        printf ("state %u queues %u depth %u pid %d flags %#llx\n", info.state, info.nr_hw_queues,
                info.queue_depth, info.ublksrv_pid, (unsigned long long) info.flags);
    }
  else if (strcmp (argv[1], "delete") == 0)
    {
      r = vb_ublk_control (UBLK_CMD_STOP_DEV, (unsigned) id, NULL, 0, 0);
      if (r == 0)
        r = vb_ublk_control (UBLK_CMD_DEL_DEV, (unsigned) id, NULL, 0, 0);
    }
  else
    {
      fprintf (stderr, "usage: vb-ublk-ctl info|delete ID\n");
      return 2;
    }
  if (r < 0)
    {
      fprintf (stderr, "ublk device %lu: %s: %s\n", id, argv[1], strerror (-r));
      return 1;
    }
  return 0;
}
