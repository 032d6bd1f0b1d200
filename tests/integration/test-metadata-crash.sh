#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# SIGKILL of vblkd while fio writes with verification to a raid1: after the
# restart only the bitmap's dirty chunks are resynced (the count is read from
# the job), fio's verify of everything it had written passes (no
# acknowledged write lost) and the copies are equal again.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

vb_mkimg "$T/a.img" 64M
vb_mkimg "$T/b.img" 64M
vbmgr create r --driver raid1 --attr bitmap_chunk=1M --start "$T/a.img" "$T/b.img"
vbmgr wait r > /dev/null || vb_fail "initial resync"
bd=$(vb_blockdev_of r)
size=$(vb_json r .size)

# fio writes only 16..24 MiB: 8 of the 63 bitmap chunks
fio_job=(--name=crash --ioengine=psync --direct=1 --rw=randwrite --bs=4k --offset=16M --size=8M
         --randseed=1234 --verify=crc32c --verify_state_save=1)
mkdir "$T/fio"
(cd "$T/fio" && exec fio "${fio_job[@]}" --filename="$bd" --time_based --runtime=60 \
   --do_verify=0 --output="$T/fio-write.log") &
fio_pid=$!
sleep 3
vb_log "SIGKILL of vblkd while fio writes"
vb_kill_daemon
rc=0
wait "$fio_pid" || rc=$?
[ "$rc" != 0 ] || vb_fail "fio did not notice the device going away"
ls "$T"/fio/*verify.state > /dev/null || vb_fail "fio saved no verify state: $(tail -5 "$T/fio-write.log")"
for f in a b; do
  vb_assert_eq false "$(vbmgr examine --json "$T/$f.img" | jq -r .clean)" "$f: unclean after the kill"
done
dirty=$(vbmgr examine --json "$T/a.img" | jq -r .bitmap_dirty)
vb_log "after the kill: $dirty dirty chunk(s) in a.img's bitmap (vbmgr examine)"
[ "$dirty" -ge 1 ] && [ "$dirty" -le 8 ] || vb_fail "a.img's bitmap: $dirty dirty chunks, fio wrote to 8"

vb_log "restart: the device comes back and resyncs the dirty chunks"
vb_start_daemon
vb_wait_state r active 20 || vb_wait_state r degraded 5
bd=$(vb_blockdev_of r)
[ -n "$bd" ] || vb_fail "device not started again"
(cd "$T/fio" && fio "${fio_job[@]}" --filename="$bd" --verify_only --verify_state_load=1 \
   --verify_fatal=1 --output="$T/fio-verify.log") || vb_fail "fio verify after the crash: $(tail -20 "$T/fio-verify.log")"
grep -q "err= 0" "$T/fio-verify.log" || vb_fail "fio verify saw errors: $(cat "$T/fio-verify.log")"
vbmgr wait r > /dev/null || vb_fail "resync after the crash"
job=$(vbmgr jobs --json | jq -c '[.[] | select(.device == "r" and .operation == "resync")] | last')
vb_assert_eq finished "$(jq -r .state <<< "$job")" "resync finished"
bytes=$(jq -r .bytes <<< "$job")
vb_log "resynced $bytes of $size bytes"
[ "$bytes" -gt 0 ] || vb_fail "nothing resynced after an unclean stop"
[ "$bytes" -le $((8 << 20)) ] || vb_fail "resynced $bytes bytes: more than the 8 MiB fio wrote"
vbmgr stop r
cmp -i 1M:1M "$T/a.img" "$T/b.img" || vb_fail "copies differ after the resync"
vb_assert_eq "true true" "$(vbmgr examine --json "$T/a.img" | jq -r .clean) $(vbmgr examine --json "$T/b.img" | jq -r .clean)" "clean after stop"

vb_log "idle, then killed: no bit set, so nothing to resync, whatever the clean flag says"
vbmgr start r
vb_wait_state r active 20
# the sweeper clears the bits of chunks idle for two of its rounds
vb_wait_until 30 eval '[ "$(vbmgr examine --json "$T/a.img" | jq -r .bitmap_dirty)" = 0 ] &&
  [ "$(vbmgr examine --json "$T/b.img" | jq -r .bitmap_dirty)" = 0 ]' ||
  vb_fail "bits still set while idle: $(vbmgr examine "$T/a.img")"
vb_kill_daemon
vb_assert_eq false "$(vbmgr examine --json "$T/a.img" | jq -r .clean)" "unclean after the second kill"
vb_start_daemon
vb_wait_state r active 20
vbmgr wait r > /dev/null
vb_assert_eq 0 "$(sed -n '/^=== vblkd start/h; /^=== vblkd start/!H; ${x;p}' "$VB_LOG" | grep -c "r: resync started")" \
  "resyncs after an unclean stop with no dirty bit"
vb_assert_eq 0 "$(vbmgr jobs --json | jq '[.[] | select(.device == "r" and .operation == "resync")] | length')" "resyncs of r"
vbmgr stop r
cmp -i 1M:1M "$T/a.img" "$T/b.img" || vb_fail "copies differ after the second kill"
vbmgr delete r
vb_stop_daemon
