#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Backend ublk: the engine served to the kernel's ublk driver (io_uring
# commands on /dev/ublk-control and per-queue rings on /dev/ublkcN;
# backend-engine.sh has the checks shared with nbd). Every engine driver
# on it: /dev/ublkbN whose device info carries vblk's tag, the
# reference-model I/O test, mkfs.ext4 + fsck, a stop deletes the device.
# ext4 on a ublk raid1 under fio verify while vblkd is SIGKILLed and
# started again: the driver quiesces the device and requeues what was in
# flight, the new vblkd takes it over (START/END_USER_RECOVERY), fio sees
# no error. Online reconfiguration: a raid1 gains a leg; a change of size
# is refused where the driver cannot resize a live device (6.1's) and
# nothing changes, and goes through where it can (UBLK_F_UPDATE_SIZE, 6.16
# on: the VM's newer kernel) with the data kept; vblkd asked the driver for
# its features and said 6.1's does not tell them. Auto picks ublk first among the engine's backends, and
# vbmgr show says why. Needs ublk_drv (the VM harness builds it): runs in the VM
# (tests/vm), skips elsewhere.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/backend-engine.sh"
modprobe ublk_drv 2> /dev/null || true
if [ ! -e /dev/ublk-control ]; then
  echo "SKIP: no ublk_drv in this kernel (run it in the VM: tests/vm)" >&2
  exit 77
fi
: "${VB_UBLK_CTL:?}" "${VB_REFMODEL:?}"
EB_BACKEND=ublk
EB_NODE_PREFIX=/dev/ublkb
# the driver's device exists and is not dead (the tag is vblkd's to read)
eb_node_live () {
  local info
  info=$("$VB_UBLK_CTL" info "${1#/dev/ublkb}" 2> /dev/null) || return 1
  [[ "$info" != "state 0 "* ]]
}
eb_cleanup_node () { "$VB_UBLK_CTL" delete "${1#/dev/ublkb}"; }
vb_setup
vb_start_daemon

vb_log "each engine driver on backend ublk"
eb_each_driver
vb_log "auto: ublk where backend kernel cannot run the driver"
eb_auto_reason
vb_log "ext4 on ublk raid1 under fio verify; vblkd SIGKILLed and started again"
eb_kill_restart
vb_log "QD 128 under fio verify on ublk raid1, a leg failed, the engine swapped"
eb_stress

vb_mkimg "$T/g0.img" 40M
vb_mkimg "$T/g1.img" 40M
vbmgr create g --driver linear --backend ublk --start "$T/g0.img"
eb_node_of g
bd=$EB_BD
# the device's flags, as vblkd asked for them at ADD_DEV from the features
flags=$("$VB_UBLK_CTL" info "${bd#/dev/ublkb}" | sed -n 's/.* flags //p')
[ -n "$flags" ] || vb_fail "vb-ublk-ctl info ${bd#/dev/ublkb} gave no flags"
if (( flags & 0x400 )); then
  vb_log "the driver resizes a live device (UBLK_F_UPDATE_SIZE): a grow goes through, the data stays"
  size0=$(blockdev --getsize64 "$bd")
  head -c $((8 << 20)) /dev/urandom > "$T/pattern"
  dd if="$T/pattern" of="$bd" bs=1M oflag=direct status=none
  vbmgr reconfigure g --add "$T/g1.img"
  size1=$(blockdev --getsize64 "$bd")
  [ "$size1" -gt "$size0" ] || vb_fail "$bd: $size1 bytes after the grow, $size0 before"
  vb_assert_eq "$(vb_json g .size)" "$size1" "the device's size and the node's after the grow"
  cmp -n $((8 << 20)) "$T/pattern" "$bd" || vb_fail "$bd: the data before the grow changed"
  # the new end is reachable
  dd if="$T/pattern" of="$bd" bs=1M seek=$((size1 - (8 << 20))) oflag=direct,seek_bytes status=none
  cmp -n $((8 << 20)) -i 0:$((size1 - (8 << 20))) "$T/pattern" "$bd" ||
    vb_fail "$bd: the last 8 MiB after the grow do not read back"
else
  vb_log "a reconfiguration that changes the size is refused on ublk; nothing changes"
  vb_snapshot
  vb_expect_fail NotSupported vbmgr reconfigure g --add "$T/g1.img"
  vb_assert_contains "$VB_ERR" "the ublk driver cannot grow a started device" "the refusal"
  vb_assert_unchanged "a refused change of size"
  vb_assert_eq "$(vb_json g .size)" "$(blockdev --getsize64 "$bd")" "size after the refusal"
fi
eb_refmodel g $((8 << 20))
vbmgr stop g

vb_log "zero copy where the driver registers request buffers itself (UBLK_F_AUTO_BUF_REG)"
features=$(sed -n "s/.*the ublk driver's features: \(0x[0-9a-f]*\).*/\1/p" "$VB_LOG" | head -1)
if [ -n "$features" ] && (( features & 0x800 )); then
  # every device above went through it: each driver (faulty's injected
  # errors too), fio verify, the takeover after SIGKILL, the stress with a
  # failed leg and a swap
  (( flags & 0x800 )) || vb_fail "the driver offers automatic buffer registration ($features), device g was added without it ($flags)"
  grep -q "zero copy (the driver registers each request's buffer)" "$VB_LOG" ||
    vb_fail "vblkd did not say it serves with zero copy"
  vb_log "device flags $flags: zero copy"
else
  (( ! (flags & 0x800) )) || vb_fail "device g has UBLK_F_AUTO_BUF_REG ($flags) though the driver does not offer it"
  grep -q "the driver copies to and from vblkd's buffers" "$VB_LOG" ||
    vb_fail "vblkd did not say it serves through its buffers"
fi

vb_log "the driver was asked for its features (6.1's does not tell them)"
if [ "$(printf '%s\n' "$(uname -r)" 6.5 | sort -V | head -1)" = 6.5 ]; then
  features_said="the ublk driver's features: 0x"
else
  features_said="the ublk driver does not tell its features (before Linux 6.5"
fi
grep -qF "$features_said" "$VB_LOG" ||
  vb_fail "the vblkd log does not say \"$features_said\""
vb_log "$(grep -F "$features_said" "$VB_LOG" | head -1)"
vb_stop_daemon
