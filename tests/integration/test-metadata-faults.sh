#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Fault injection (driver "faulty", like md's faulty personality and
# dm-flakey): a raid1 leg starts failing writes in the middle of a fio run.
# Every write acknowledged before or after is read back correct; the
# survivor's superblock records the failure with a higher event counter;
# once the leg works again it is re-added by copying only the bitmap's dirty
# chunks. Also: injected read errors are retried on the other leg, latency
# is injected, and a device with no copy left refuses writes.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

examine () { vbmgr examine --json "$1"; }

vb_mkimg "$T/f.img" 64M
vb_mkimg "$T/b.img" 64M
vbmgr create f --driver faulty "$T/f.img"
vbmgr create r --driver raid1 --attr bitmap_chunk=1M --start vblk:f "$T/b.img"
vbmgr wait r > /dev/null || vb_fail "initial resync"
bd=$(vb_blockdev_of r)

vb_log "injected read errors: retried on the other leg, the leg turns faulty"
dd if=/dev/urandom of="$T/pattern" bs=1M count=8 status=none
dd if="$T/pattern" of="$bd" bs=1M seek=40 oflag=direct status=none
vbmgr set f fail_reads=true fail_offset=41M fail_length=1M
for i in 1 2 3 4; do
  cmp "$T/pattern" <(dd if="$bd" bs=1M skip=40 count=8 iflag=direct status=none) \
    || vb_fail "read with a failing leg returned wrong data"
done
vb_wait_state r degraded 10
vb_assert_eq "faulty in-sync" "$(vb_json r '[.components[].state] | join(" ")')" "leg 0 faulty after read errors"
vbmgr set f fail_reads=false fail_offset=0 fail_length=0
vbmgr stop r
vbmgr start r
# a failed leg stays faulty through a start (issue 15, defect E); the
# explicit re-add brings it back
vb_assert_eq "faulty in-sync" "$(vb_json r '[.components[].state] | join(" ")')" "leg 0 still faulty after the start"
vbmgr add r vblk:f
vbmgr wait r > /dev/null || vb_fail "re-add after the read errors"
vb_assert_eq active "$(vb_state_of r)" "active after re-add"
bd=$(vb_blockdev_of r)

vb_log "a leg fails writes in the middle of a fio run"
sum_before=$(examine "$T/b.img" | jq .events)
# the first 300 writes reaching leg 0 succeed, every later one fails
vbmgr set f fail_writes=true fail_after=300
fio --name=w --filename="$bd" --ioengine=io_uring --direct=1 --rw=randwrite --bs=64k \
    --iodepth=8 --size=32M --verify=crc32c --verify_fatal=1 --do_verify=1 \
    --output="$T/fio.log" || vb_fail "fio: $(tail -20 "$T/fio.log")"
grep -q "err= 0" "$T/fio.log" || vb_fail "fio saw errors: $(cat "$T/fio.log")"
vb_wait_state r degraded 10
vb_assert_eq "faulty in-sync" "$(vb_json r '[.components[].state] | join(" ")')" "leg 0 faulty"
out=$(examine "$T/b.img")
vb_assert_eq faulty "$(jq -r '.roles[0].state' <<< "$out")" "survivor's superblock: leg 0 faulty"
survivor=$(jq .events <<< "$out")
failed=$(examine "$T/f.img" | jq .events)
[ "$survivor" -gt "$failed" ] || vb_fail "survivor events $survivor not above the failed leg's $failed"
[ "$survivor" -gt "$sum_before" ] || vb_fail "events did not grow with the failure"
vb_log "events: survivor $survivor, failed leg $failed"

vb_log "writes go on degraded; reads come from the survivor"
fio --name=w2 --filename="$bd" --ioengine=io_uring --direct=1 --rw=randwrite --bs=16k \
    --iodepth=4 --offset=8M --size=4M --verify=crc32c --verify_fatal=1 --do_verify=1 \
    --output="$T/fio2.log" || vb_fail "fio degraded: $(tail -20 "$T/fio2.log")"
cp "$bd" "$T/expected.img" 2> /dev/null || dd if="$bd" of="$T/expected.img" bs=1M iflag=direct status=none

vb_log "the leg works again: re-added (vbmgr add of its own component) through the bitmap"
vbmgr set f fail_writes=false fail_after=0
vb_expect_fail Busy vbmgr add r "$T/b.img"
vbmgr add r vblk:f
vbmgr wait r > /dev/null || vb_fail "re-add"
job=$(vbmgr jobs --json | jq -c '[.[] | select(.device == "r" and .operation == "rebuild")] | last')
vb_assert_eq finished "$(jq -r .state <<< "$job")" "re-add finished"
bytes=$(jq -r .bytes <<< "$job")
size=$(vb_json r .size)
vb_log "re-add copied $bytes of $size bytes"
[ "$bytes" -gt 0 ] && [ "$bytes" -le $((32 << 20)) ] || vb_fail "re-add copied $bytes bytes, fio wrote 32 MiB"
vb_assert_eq "in-sync in-sync" "$(vb_json r '[.components[].state] | join(" ")')" "both legs in sync"
cmp "$T/expected.img" "$bd" || vb_fail "data after the re-add"
vbmgr stop r
cmp -i 1M:1M "$T/f.img" "$T/b.img" || vb_fail "legs differ after the re-add"

vb_log "latency injection slows the leg down, nothing fails"
vbmgr start r
bd=$(vb_blockdev_of r)
vbmgr set f delay_us=20000
t0=$(date +%s%N)
dd if=/dev/zero of="$bd" bs=4k count=20 oflag=direct,dsync status=none
elapsed=$((($(date +%s%N) - t0) / 1000000))
[ "$elapsed" -ge 400 ] || vb_fail "20 writes with 20 ms injected latency took $elapsed ms"
vb_assert_eq active "$(vb_state_of r)" "latency is no failure"
vbmgr set f delay_us=0

vb_log "no copy left: the device fails and refuses writes"
vbmgr stop r
vb_mkimg "$T/g0.img" 32M
vb_mkimg "$T/g1.img" 32M
vbmgr create g0 --driver faulty "$T/g0.img"
vbmgr create g1 --driver faulty "$T/g1.img"
vbmgr create two --driver raid1 --start vblk:g0 vblk:g1
vbmgr wait two > /dev/null || vb_fail "initial resync of two"
bd=$(vb_blockdev_of two)
vbmgr set g0 fail_writes=true
dd if=/dev/zero of="$bd" bs=4k count=1 seek=100 oflag=direct status=none || vb_fail "a write with one copy left"
vb_wait_state two degraded 10
vbmgr set g1 fail_writes=true
dd if=/dev/zero of="$bd" bs=4k count=1 seek=200 oflag=direct status=none 2> /dev/null \
  && vb_fail "a write with no copy left succeeded"
vb_wait_state two failed 10
vbmgr set g0 fail_writes=false
vbmgr set g1 fail_writes=false
dd if=/dev/zero of="$bd" bs=4k count=1 seek=300 oflag=direct status=none 2> /dev/null \
  && vb_fail "a failed device took a write"
vbmgr stop two
vbmgr delete two
vbmgr delete g0
vbmgr delete g1
vbmgr delete r
vbmgr delete f
vb_stop_daemon
