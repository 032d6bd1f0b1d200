#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Reconfigurations that must be refused, each with a clear error and no
# change at all (the device listing and state.json byte for byte, the
# block node and the data): conversions that would move data (reshapes),
# dropping the last in-sync copy, shrinking, components already in use,
# a started device on a kernel loop without the engine, a backend move of
# a started device; and swaps that fail half way — a drain that does not
# finish in time, a new leg whose superblock is corrupt — after which the
# held I/O goes on against the old configuration without an error.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

refused () {
  local code=$1 pattern=$2
  shift 2
  vb_snapshot
  vb_expect_fail "$code" vbmgr reconfigure "$@"
  grep -qE "$pattern" <<< "$VB_ERR" || vb_fail "reconfigure $*: message does not say '$pattern': $VB_ERR"
  vb_assert_unchanged "reconfigure $*"
  [ ! -e "$VB_STATE_DIR/reconfigure.json" ] || vb_fail "reconfigure $*: an intent was left behind"
  vb_log "refused ($code): $*"
}

for f in a b c d m0 m1 m2 m3 m4 s0 s1 small; do vb_mkimg "$T/$f.img" 64M; done
truncate -s 32M "$T/small.img"

vb_log "reshapes and conversions without meaning"
# without superblocks: the images go on to other devices below
vbmgr create s --driver raid0 --attr chunk_size=64K --attr metadata=none "$T/a.img" "$T/b.img"
refused NotSupported "reshape" s --driver raid10
refused NotSupported "reshape" s --add "$T/c.img"
vbmgr delete s
vbmgr create t --driver raid10 --start "$T/a.img" "$T/b.img"
refused NotSupported "reshape" t --add "$T/c.img"
refused NotSupported "reshape" t --driver raid0
vbmgr stop t
vbmgr delete t
vbmgr create l --driver linear --attr metadata=none --start "$T/a.img" "$T/b.img"
refused NotSupported "cut off the data" l --remove "$T/b.img"
refused InvalidArgument "nothing to reconfigure" l
refused InvalidArgument "not known" l --driver nosuch
refused InvalidArgument "not a component" l --remove "$T/c.img"
refused InvalidArgument "already a component" l --add "$T/a.img"
refused NotSupported "another block node" l --backend nbd
vbmgr stop l
vbmgr delete l

vb_log "a started file device on a kernel loop (no engine)"
vbmgr create k --driver file --start "$T/a.img"
refused NotSupported "LOOP_CHANGE_FD" k --driver raid1 --add "$T/b.img"
refused NotSupported "metadata=none" k --driver raid1 --add "$T/b.img" --attr metadata=vblk
vbmgr stop k
vbmgr delete k

vb_log "a mirror: last in-sync copy, shrinking, components in use"
vbmgr create r --driver raid1 --start "$T/m0.img" "$T/m1.img"
vbmgr wait r > /dev/null
bd=$(vb_blockdev_of r)
head -c 32M /dev/urandom > "$T/r.bin"
dd if="$T/r.bin" of="$bd" bs=1M oflag=direct status=none
refused WouldLoseData "cut off" r --add "$T/small.img"
vbmgr create other --driver file "$T/m2.img"
refused Busy "m2.img. is already used by device .other." r --add "$T/m2.img"
vbmgr delete other
# a rebuilding leg is not a copy yet: removing both in-sync legs is refused
vbmgr reconfigure r --add "$T/m2.img" --attr sync_speed_min=1M --attr sync_speed_max=1M
vb_assert_eq rebuilding "$(vbmgr show r --json | jq -r '.components[2].state')" "c.img rebuilding"
refused WouldLoseData "no in-sync copy" r --remove "$T/m0.img" --remove "$T/m1.img"
refused InvalidArgument "leaves nothing" r --remove "$T/m0.img" --remove "$T/m1.img" --remove "$T/m2.img"
refused NotSupported "cannot change" r --attr bitmap=none --add "$T/m3.img"
vbmgr set r sync_speed_min=0 sync_speed_max=0
vbmgr wait r > /dev/null

vb_log "a corrupt superblock on the new leg: the swap rolls back, I/O goes on"
# a copy of a's superblock with one byte flipped: its checksum fails
dd if="$T/m0.img" of="$T/m4.img" bs=4096 skip=1 seek=1 count=1 conv=notrunc status=none
printf '\x5a' | dd of="$T/m4.img" bs=1 seek=$((4096 + 200)) conv=notrunc status=none
fio --name=held --filename="$bd" --ioengine=psync --direct=1 --rw=randrw --bs=4k --size=16M \
    --offset=32M --verify=crc32c --verify_backlog=64 --verify_fatal=1 --time_based --runtime=6 \
    --output="$T/fio.log" &
fio_pid=$!
VB_BG_PIDS+=("$fio_pid")
sleep 1
vb_snapshot
rc=0
vbmgr reconfigure r --add "$T/m4.img" 2> "$T/err" || rc=$?
[ "$rc" = 1 ] || vb_fail "a leg with a corrupt superblock was taken: $(cat "$T/err")"
grep -qE "checksum" "$T/err" || vb_fail "the error does not name the bad superblock: $(cat "$T/err")"
vb_log "refused: $(cat "$T/err")"
vb_assert_unchanged "corrupt new leg"
wait "$fio_pid" || vb_fail "fio saw an error around the rolled-back swap: $(tail -20 "$T/fio.log")"
grep -q "err= 0" "$T/fio.log" || vb_fail "fio errors: $(cat "$T/fio.log")"
cmp -n 32M "$T/r.bin" "$bd" || vb_fail "data changed by the refused reconfigurations"

vb_log "backends: unknown, or another node for a started device"
refused InvalidArgument "not known" r --backend nosuch
refused NotSupported "another block node" r --backend ublk
vbmgr stop r
for b in ublk nbd; do
  vbmgr reconfigure r --backend $b
  vb_assert_eq $b "$(vb_state | jq -r '.devices[0].backend')" "backend of the stopped device"
done
vbmgr reconfigure r --backend loop
vb_assert_eq loop "$(vb_state | jq -r '.devices[0].backend')" "backend of the stopped device"
vbmgr delete r

vb_log "a stopped device: the desired state changes, the new leg is rebuilt at start"
head -c 16M /dev/urandom > "$T/s.bin"
dd if="$T/s.bin" of="$T/s0.img" bs=1M conv=notrunc status=none
vbmgr create sp --driver file "$T/s0.img"
vbmgr reconfigure sp --driver raid1 --add "$T/s1.img"
vb_assert_eq "raid1 false" "$(vb_state | jq -r '.devices[] | select(.name == "sp") | "\(.driver) \(.components[1].in_sync)"')" "stopped file -> raid1"
refused WouldLoseData "no in-sync copy" sp --remove "$T/s0.img"
vbmgr start sp
vbmgr wait sp > /dev/null || vb_fail "rebuild at the start of sp"
vbmgr stop sp
cmp "$T/s0.img" "$T/s1.img" || vb_fail "sp's legs differ after the rebuild at start"
vbmgr delete sp

vb_log "a drain that does not finish in time: abandoned, nothing changes"
vbmgr create slow --driver faulty --start "$T/d.img"
vbmgr create top --driver linear --start vblk:slow
top=$(vb_blockdev_of top)
vbmgr set slow delay_us=3000000
dd if="$top" of=/dev/null bs=4k count=1 iflag=direct status=none &
dd_pid=$!
VB_BG_PIDS+=("$dd_pid")
sleep 0.5
refused Busy "did not finish within 200 ms" top --add "$T/c.img" --timeout 200
wait "$dd_pid" || vb_fail "the request held across the abandoned swap failed"
vbmgr set slow delay_us=0
vbmgr stop top
vbmgr delete top
vbmgr stop slow
vbmgr delete slow
vb_stop_daemon
