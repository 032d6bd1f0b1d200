#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Backend nbd: the engine served to the kernel nbd client (socketpairs
# connected with NBD_CMD_CONNECT over generic netlink; backend-engine.sh
# has the checks shared with ublk). Every engine driver on it: /dev/nbdN
# with vblk's backend identifier, the reference-model I/O test, mkfs.ext4
# + fsck, a stop disconnects it. ext4 on an nbd raid1 under fio verify
# while vblkd is SIGKILLed and started again: the node waits, the new
# vblkd hands it new sockets (NBD_CMD_RECONFIGURE), fio sees no error.
# Online reconfiguration: a raid1 gains a leg, a linear grows and the
# kernel sees the new size. Auto picks nbd where neither the kernel's md
# nor ublk can run the driver, and vbmgr show says why. Needs the nbd
# module: runs in the VM (tests/vm), skips elsewhere.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/backend-engine.sh"
modprobe nbd 2> /dev/null || true
if [ ! -e /sys/block/nbd0 ] || [ ! -d /sys/module/nbd ]; then
  echo "SKIP: no nbd in this kernel (run it in the VM: tests/vm)" >&2
  exit 77
fi
: "${VB_NBD_FILE_SERVER:?}" "${VB_REFMODEL:?}"
# auto takes ublk before nbd: this test wants the kernel without it
if [ -d /sys/module/ublk_drv ]; then
  modprobe -r ublk_drv || vb_fail "ublk_drv is in use; auto would not pick nbd"
fi
EB_BACKEND=nbd
EB_NODE_PREFIX=/dev/nbd
eb_node_live () {
  local id
  id=$(cat "/sys/block/${1#/dev/}/backend" 2> /dev/null) || return 1
  [[ "$id" == vblk:*:"$2" ]]
}
eb_cleanup_node () { "$VB_NBD_FILE_SERVER" --disconnect "${1#/dev/nbd}"; }
vb_setup
vb_start_daemon

vb_log "each engine driver on backend nbd"
eb_each_driver
vb_log "auto: nbd where backend kernel cannot run the driver (and no ublk)"
eb_auto_reason
vb_log "ext4 on nbd raid1 under fio verify; vblkd SIGKILLed and started again"
eb_kill_restart
vb_log "QD 128 under fio verify on nbd raid1, a leg failed, the engine swapped"
eb_stress

vb_log "online reconfiguration that grows the size: linear on nbd, the kernel sees it"
vb_mkimg "$T/g0.img" 40M
vb_mkimg "$T/g1.img" 40M
vbmgr create g --driver linear --backend nbd --start "$T/g0.img"
eb_node_of g
bd=$EB_BD
size_before=$(blockdev --getsize64 "$bd")
vbmgr reconfigure g --add "$T/g1.img"
vb_assert_eq "$(vb_json g .size)" "$(blockdev --getsize64 "$bd")" "size the kernel sees after the grow"
[ "$(blockdev --getsize64 "$bd")" -gt "$size_before" ] || vb_fail "g did not grow from $size_before"
eb_refmodel g $((8 << 20))
vbmgr stop g
! eb_node_live "$bd" "$(vb_json g .uuid)" || vb_fail "g still connected after the stop"
vb_stop_daemon
