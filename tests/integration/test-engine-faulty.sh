#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A raid1 / raid10 component that starts failing mid-run: its filesystem is
# shut down (EXT4_IOC_SHUTDOWN: every I/O to it then fails with EIO). The
# workload sees no error, data stays correct, the component shows faulty and
# the device degraded. vbmgr fail marks a component faulty by hand; the
# last copy is refused.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

# every I/O to files of the ext4 mounted at $1 fails with EIO from now on
shutdown_fs () {
  python3 - "$1" <<'PY'
import fcntl, os, struct, sys
EXT4_IOC_SHUTDOWN = 0x8004587d  # _IOR('X', 125, __u32)
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", 2))  # NOLOGFLUSH
PY
}

# a small ext4 holding one leg's image, so that leg can be made to fail
vb_mkimg "$T/host.img" 128M
mkfs.ext4 -q -F "$T/host.img"
hostloop=$(losetup --show -f "$T/host.img")
mkdir "$T/host"
mount "$hostloop" "$T/host"
truncate -s 64M "$T/host/leg1.img"
vb_mkimg "$T/leg0.img" 64M

vbmgr create m --driver raid1 --start "$T/leg0.img" "$T/host/leg1.img"
bd=$(vb_blockdev_of m)

gdbus monitor --system --dest org.vblk.VBlk1 > "$T/monitor.log" 2>&1 &
monitor=$!

# verify_backlog: written blocks are read back and checked while writing goes
# on, so reads and writes both run before and after the failure
fio --name=w --filename="$bd" --ioengine=io_uring --direct=1 --rw=randwrite --bs=64k \
    --iodepth=8 --size=48M --time_based --runtime=4 --verify=crc32c --verify_backlog=256 \
    --verify_fatal=1 --output="$T/fio.log" &
fio_pid=$!
sleep 1
vb_log "shutting down the filesystem under leg 1"
shutdown_fs "$T/host"
rc=0
wait "$fio_pid" || rc=$?
[ "$rc" = 0 ] || vb_fail "fio failed ($rc): $(tail -20 "$T/fio.log")"
grep -q "err= 0" "$T/fio.log" || vb_fail "fio saw errors: $(cat "$T/fio.log")"

vb_wait_state m degraded 10
vb_assert_eq "in-sync faulty" "$(vb_json m '[.components[].state] | join(" ")')" "component states"
[ "$(vb_json m '.components[1].errors')" -gt 0 ] || vb_fail "no errors counted on leg 1"
sleep 0.3
kill "$monitor"; wait "$monitor" 2> /dev/null || true
grep -q "'component-failed'" "$T/monitor.log" || vb_fail "no component-failed event"
grep -q "'degraded'" "$T/monitor.log" || vb_fail "no degraded event"

vb_log "the surviving leg holds everything fio wrote"
"$VB_REFMODEL" --device "$bd" --ops 300 --seed 7 > /dev/null || vb_fail "reads after the failure"

vb_log "the last in-sync copy cannot be failed"
vb_expect_fail WouldLoseData vbmgr fail m "$T/leg0.img"
vb_assert_eq degraded "$(vb_state_of m)" "state after the refused fail"

vb_log "raid10: a component fails mid-run under fio verify"
vb_mkimg "$T/host2.img" 96M
mkfs.ext4 -q -F "$T/host2.img"
hostloop2=$(losetup --show -f "$T/host2.img")
mkdir "$T/host2"
mount "$hostloop2" "$T/host2"
truncate -s 32M "$T/host2/n1.img"
vb_mkimg "$T/n0.img" 32M; vb_mkimg "$T/n2.img" 32M
vbmgr create n10 --driver raid10 --attr chunk_size=64K --start "$T/n0.img" "$T/host2/n1.img" "$T/n2.img"
fio --name=w10 --filename="$(vb_blockdev_of n10)" --ioengine=io_uring --direct=1 --rw=randwrite \
    --bs=16k --iodepth=8 --size=40M --time_based --runtime=4 --verify=crc32c --verify_backlog=256 \
    --verify_fatal=1 --output="$T/fio10.log" &
fio_pid=$!
sleep 1
shutdown_fs "$T/host2"
rc=0
wait "$fio_pid" || rc=$?
[ "$rc" = 0 ] || vb_fail "fio on raid10 failed ($rc): $(tail -20 "$T/fio10.log")"
grep -q "err= 0" "$T/fio10.log" || vb_fail "fio on raid10 saw errors: $(cat "$T/fio10.log")"
vb_wait_state n10 degraded 10
vb_assert_eq "in-sync faulty in-sync" "$(vb_json n10 '[.components[].state] | join(" ")')" \
  "raid10 component states"
vbmgr stop n10
umount "$T/host2" || umount -l "$T/host2"
losetup -d "$hostloop2"

vb_log "raid10: fail one component by hand, data stays readable"
for i in 0 1 2 3; do vb_mkimg "$T/t$i.img" 32M; done
vbmgr create r10 --driver raid10 --attr chunk_size=64K --start \
  "$T/t0.img" "$T/t1.img" "$T/t2.img" "$T/t3.img"
"$VB_REFMODEL" --device "$(vb_blockdev_of r10)" --ops 300 --seed 3 --chunk 65536 > /dev/null ||
  vb_fail "raid10 before the failure"
vbmgr fail r10 "$T/t2.img"
vb_assert_eq degraded "$(vb_state_of r10)" "raid10 state after fail"
vb_expect_fail WouldLoseData vbmgr fail r10 "$T/t3.img"
vbmgr fail r10 "$T/t0.img"
"$VB_REFMODEL" --device "$(vb_blockdev_of r10)" --ops 300 --seed 4 --chunk 65536 > /dev/null ||
  vb_fail "raid10 with two components failed"

vb_log "no redundancy, no fail"
vb_mkimg "$T/z0.img" 8M; vb_mkimg "$T/z1.img" 8M
vbmgr create z --driver raid0 --start "$T/z0.img" "$T/z1.img"
vb_expect_fail NotSupported vbmgr fail z "$T/z0.img"

vbmgr stop m; vbmgr stop r10; vbmgr stop z
umount "$T/host" || umount -l "$T/host"
losetup -d "$hostloop"
vb_stop_daemon
