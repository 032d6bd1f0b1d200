#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A process that makes a mount namespace while an engine device runs (a
# service with a private /tmp, polkitd started again, unshare) holds a
# copy of the engine's FUSE mount, so unmounting it does not end the
# kernel's connection: the stop must end it itself, or the serving
# threads never wake and vblkd hangs (found by test-bus-restart). Three
# stops and starts, each with a new namespace holding the mount; the data
# survives them.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

vb_mkimg "$T/a.img" 40M
vb_mkimg "$T/b.img" 40M
vbmgr create r1 --driver raid1 --attr bitmap_chunk=1M --start "$T/a.img" "$T/b.img"
vbmgr wait r1 > /dev/null
dd if=/dev/urandom of="$T/x.bin" bs=1M count=16 status=none
dd if="$T/x.bin" of="$(vb_blockdev_of r1)" bs=1M oflag=direct status=none
for round in 1 2 3; do
  # a namespace made now copies every mount, the engine's among them
  unshare --mount --propagation private sleep 120 &
  VB_BG_PIDS+=("$!")
  sleep 0.3
  timeout 20 "$VBMGR" stop r1 || vb_fail "round $round: the stop did not finish (exit $?)"
  vbmgr start r1
  vb_wait_state r1 active 20
  cmp "$T/x.bin" <(dd if="$(vb_blockdev_of r1)" bs=1M count=16 iflag=direct status=none) ||
    vb_fail "round $round: the data changed"
done
vbmgr stop r1
vb_log "ok"
