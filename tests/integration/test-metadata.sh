#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# On-component metadata (metadata=vblk): superblocks written at creation and
# read by vbmgr examine without a daemon; a corrupted superblock (bad CRC),
# a component of another device and two components claiming one role are
# refused at start with a message naming the component, and nothing is
# written; a failed component stays faulty through a start, and is never
# read while it is re-added (vbmgr add); a spare
# takes a failed slot and is rebuilt; check counts mismatches and repair
# fixes them.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

# forge: rewrite the superblock of $1 from the superblock of $2 with a new
# component UUID and a correct CRC32C (a second component claiming its role)
forge_claim () {
  python3 - "$1" "$2" <<'PY'
import os, struct, sys, uuid
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF
with open(sys.argv[2], "rb") as f:
    f.seek(4096); sb = bytearray(f.read(4096))
new = uuid.uuid4().bytes
sb[40:56] = new                         # component UUID
sb[232:248] = new                       # roles[0].uuid: the role it claims
sb[16:20] = b"\0\0\0\0"
sb[16:20] = struct.pack("<I", crc32c(bytes(sb)))
with open(sys.argv[1], "r+b") as f:
    f.seek(4096); f.write(sb)
PY
}

examine () { vbmgr examine --json "$1"; }

vb_mkimg "$T/a.img" 32M
vb_mkimg "$T/b.img" 32M
vbmgr create m --driver raid1 --backend loop --attr bitmap_chunk=1M --start "$T/a.img" "$T/b.img"
vbmgr wait m > /dev/null || vb_fail "initial resync of m"
uuid=$(vb_json m .uuid)

vb_log "vbmgr examine: every component carries the superblock"
for f in a b; do
  out=$(examine "$T/$f.img") || vb_fail "examine $f.img"
  vb_assert_eq "$uuid" "$(jq -r .device_uuid <<< "$out")" "$f: device UUID"
  vb_assert_eq "m raid1 2 1048576" "$(jq -r '"\(.device_name) \(.driver) \(.n_roles) \(.data_offset)"' <<< "$out")" "$f: name, driver, roles, data offset"
  vb_assert_eq "in-sync in-sync" "$(jq -r '[.roles[].state] | join(" ")' <<< "$out")" "$f: role states"
  vb_assert_eq "false" "$(jq -r .clean <<< "$out")" "$f: not clean while started"
done
vb_assert_eq 0 "$(examine "$T/a.img" | jq .role)" "a is role 0"
vb_assert_eq 1 "$(examine "$T/b.img" | jq .role)" "b is role 1"
examine_text=$(vbmgr examine "$T/a.img")
vb_assert_contains "$examine_text" "$uuid" "examine text names the device"
vb_assert_contains "$examine_text" "in-sync" "examine text shows role states"

# data written through the device, then a clean stop
bd=$(vb_blockdev_of m)
dd if=/dev/urandom of="$T/pattern" bs=1M count=31 status=none
dd if="$T/pattern" of="$bd" bs=1M oflag=direct status=none
vbmgr stop m
vb_assert_eq "true true" "$(examine "$T/a.img" | jq -r .clean) $(examine "$T/b.img" | jq -r .clean)" "clean after stop"
events=$(examine "$T/a.img" | jq .events)

vb_log "examine refuses garbage and a file without a superblock"
vb_mkimg "$T/blank.img" 4M
vb_expect_fail NotFound vbmgr examine "$T/blank.img"
vb_assert_contains "$VB_ERR" "$T/blank.img" "examine names the blank file"
vb_expect_fail NotFound vbmgr examine "$T/missing.img"

vb_log "a corrupted superblock (bad CRC) refuses the start, naming the component"
sum_a=$(sha256sum < "$T/a.img")
cp "$T/b.img" "$T/b.good"
printf '\x55' | dd of="$T/b.img" bs=1 seek=$((4096 + 300)) conv=notrunc status=none
vb_expect_fail Failed vbmgr start m
vb_assert_contains "$VB_ERR" "$T/b.img" "error names the corrupted component"
vb_assert_contains "$VB_ERR" "checksum" "error says checksum"
vb_assert_eq "$sum_a" "$(sha256sum < "$T/a.img")" "the other component is untouched"
vb_expect_fail InvalidArgument vbmgr examine "$T/b.img"
vb_assert_contains "$VB_ERR" "checksum" "examine reports the bad checksum"
cp "$T/b.good" "$T/b.img"

vb_log "two components claiming one role with equal events are refused"
forge_claim "$T/b.img" "$T/a.img"
sum_b=$(sha256sum < "$T/b.img")
vb_expect_fail Failed vbmgr start m
vb_assert_contains "$VB_ERR" "both claim role 0" "conflict named"
vb_assert_eq "$sum_a" "$(sha256sum < "$T/a.img")" "a untouched by the refused start"
vb_assert_eq "$sum_b" "$(sha256sum < "$T/b.img")" "b untouched by the refused start"
cp "$T/b.good" "$T/b.img"

vb_log "a component of another device is refused"
vb_mkimg "$T/x0.img" 32M
vb_mkimg "$T/x1.img" 32M
vbmgr create other --driver raid1 --backend loop "$T/x0.img" "$T/x1.img"
# superblocks at creation, before any start: every copy marked for the
# initial resync
vb_assert_eq "other 0 false" "$(examine "$T/x0.img" | jq -r '"\(.device_name) \(.role) \(.clean)"')" "x0 at creation"
vb_assert_eq 1 "$(examine "$T/x1.img" | jq .role)" "x1 at creation"
# a copy of a component (an image cloned, a disk moved between hosts)
cp "$T/x1.img" "$T/x1copy.img"
vb_expect_fail Busy vbmgr create third --driver raid1 "$T/x1copy.img" "$T/blank.img"
vb_assert_contains "$VB_ERR" "'$T/x1copy.img' carries the vblk superblock of device 'other'" "a component of another device"
vb_expect_fail NotFound vbmgr show third
vbmgr start other
vbmgr wait other > /dev/null || vb_fail "initial resync of other"
vbmgr stop other
cp "$T/b.img" "$T/b.good"
cp "$T/x1.img" "$T/b.img"
vb_expect_fail Busy vbmgr start m
vb_assert_contains "$VB_ERR" "'$T/b.img' carries the vblk superblock of device 'other'" "foreign component named"
cp "$T/b.good" "$T/b.img"

vb_log "the good components start again; the data is intact"
vbmgr start m
bd=$(vb_blockdev_of m)
cmp -n $((31 << 20)) "$T/pattern" "$bd" || vb_fail "data after restart"
[ "$(examine "$T/a.img" | jq .events)" -gt "$events" ] || vb_fail "events did not grow at start"

vb_log "a stale component is never read while it is re-added"
# make b stale: it misses a write while failed, then comes back
vbmgr fail m "$T/b.img"
vb_wait_state m degraded 10
vb_assert_eq "faulty" "$(examine "$T/a.img" | jq -r '.roles[1].state')" "a's superblock records b faulty"
a_events=$(examine "$T/a.img" | jq .events)
b_events=$(examine "$T/b.img" | jq .events)
[ "$a_events" -gt "$b_events" ] || vb_fail "survivor's events ($a_events) not above the failed one's ($b_events)"
dd if=/dev/urandom of="$T/pattern2" bs=1M count=4 status=none
dd if="$T/pattern2" of="$bd" bs=1M seek=8 oflag=direct status=none
vbmgr stop m
# slow re-add, so that reads run while b is still behind
vbmgr set m sync_speed_max=512K sync_speed_min=512K
vbmgr start m
bd=$(vb_blockdev_of m)
# a failed component stays faulty through a start: only an explicit re-add
# brings it back (issue 15, defect E)
vb_assert_eq "in-sync faulty" "$(vb_json m '[.components[].state] | join(" ")')" "b still faulty after start"
vbmgr add m "$T/b.img"
vb_assert_eq "in-sync rebuilding" "$(vb_json m '[.components[].state] | join(" ")')" "b rebuilding after its re-add"
for i in 1 2 3; do
  cmp -n $((4 << 20)) "$T/pattern2" <(dd if="$bd" bs=1M skip=8 count=4 iflag=direct status=none) \
    || vb_fail "read during re-add returned stale data (round $i)"
done
vbmgr set m sync_speed_max=0
vbmgr wait m > /dev/null || vb_fail "re-add did not finish"
job=$(vbmgr jobs --json | jq -c '[.[] | select(.device == "m" and .operation == "rebuild")] | last')
vb_assert_eq "finished" "$(jq -r .state <<< "$job")" "re-add job finished"
# only the chunks written while b was out: 4 MiB in 1 MiB chunks (the
# 8..12 MiB range), not the 31 MiB of the device
vb_assert_eq $((4 << 20)) "$(jq -r .bytes <<< "$job")" "re-add copied only the dirty chunks"
vb_assert_eq "active" "$(vb_state_of m)" "active after re-add"
vb_assert_eq "in-sync in-sync" "$(examine "$T/b.img" | jq -r '[.roles[].state] | join(" ")')" "b in sync in its superblock"
vbmgr stop m
cmp -i 1M:1M "$T/a.img" "$T/b.img" || vb_fail "copies differ after re-add"

vb_log "check counts mismatches; repair rewrites them"
# a copy goes bad behind the device's back (a bit rot)
dd if=/dev/urandom of="$T/b.img" bs=4K count=3 seek=$(((1 << 20) / 4096 + 100)) conv=notrunc status=none
vbmgr start m
job=$(vbmgr check m)
vbmgr wait "$job" > /dev/null || vb_fail "check failed"
vb_assert_eq 3 "$(vbmgr jobs --json | jq --arg p "$job" '.[] | select(.path == $p) | .mismatches')" "check: 3 mismatching blocks"
job=$(vbmgr check m --repair)
vbmgr wait "$job" > /dev/null || vb_fail "repair failed"
job=$(vbmgr check m)
vbmgr wait "$job" > /dev/null || vb_fail "second check failed"
vb_assert_eq 0 "$(vbmgr jobs --json | jq --arg p "$job" '.[] | select(.path == $p) | .mismatches')" "no mismatch after repair"
vb_expect_fail NotSupported vbmgr check other

vb_log "a job can be cancelled (not by just anybody)"
vbmgr set m sync_speed_max=1M sync_speed_min=1M
job=$(vbmgr check m)
vb_expect_fail Busy vbmgr check m
cancel () { gdbus call --system --dest org.vblk.VBlk1 --object-path "$job" --method org.vblk.VBlk1.Job.Cancel {}; }
out=$(vb_as_nobody gdbus call --system --dest org.vblk.VBlk1 --object-path "$job" \
        --method org.vblk.VBlk1.Job.Cancel {} 2>&1) && vb_fail "nobody cancelled a job"
vb_assert_contains "$out" "NotAuthorized" "Cancel by nobody"
# on a terminal, vbmgr wait draws a progress bar (here until its timeout)
script -qec "$VBMGR wait $job --timeout 2" /dev/null > "$T/bar.out" 2>&1 || true
vb_assert_contains "$(tr '\r' '\n' < "$T/bar.out")" "% " "progress bar on a terminal"
vb_assert_contains "$(cat "$T/bar.out")" "check" "progress bar names the operation"
cancel > /dev/null || vb_fail "Cancel as root"
rc=0
vbmgr wait "$job" > /dev/null 2> "$T/wait.err" || rc=$?
vb_assert_eq 1 "$rc" "vbmgr wait on a cancelled job"
vb_assert_eq cancelled "$(vbmgr jobs --json | jq -r --arg p "$job" '.[] | select(.path == $p) | .state')" "job state"
done_bytes=$(vbmgr jobs --json | jq -r --arg p "$job" '.[] | select(.path == $p) | .bytes_done')
[ "$done_bytes" -lt $((31 << 20)) ] || vb_fail "the cancelled check ran to the end"
vbmgr set m sync_speed_max=0 sync_speed_min=1M
vb_assert_eq "0 1048576" "$(examine "$T/a.img" | jq -r '.attributes | "\(.sync_speed_max) \(.sync_speed_min)"')" \
  "superblock attribute text follows an online change"

vb_log "a spare takes a failed slot and is rebuilt"
vb_mkimg "$T/s.img" 32M
vbmgr add m "$T/s.img" --spare
vb_assert_eq "in-sync in-sync spare" "$(vb_json m '[.components[].state] | join(" ")')" "states with a spare"
gdbus monitor --system --dest org.vblk.VBlk1 > "$T/monitor.log" 2>&1 &
monitor=$!
vbmgr fail m "$T/a.img"
roles_are () { [ "$(vb_json m '[.components[].role] | join(" ")')" = "$1" ]; }
vb_wait_until 20 roles_are "0 1 faulty" || vb_fail "spare not moved into slot 0: $(vb_json m '.components')"
vbmgr wait m > /dev/null || vb_fail "rebuild onto the spare"
vb_assert_eq "$T/s.img $T/b.img $T/a.img" "$(vb_json m '[.components[].source] | join(" ")')" "sources after the takeover"
vb_assert_eq "in-sync in-sync faulty" "$(vb_json m '[.components[].state] | join(" ")')" "states after the rebuild"
vb_assert_eq active "$(vb_state_of m)" "active after the rebuild"
sleep 0.3
kill "$monitor"; wait "$monitor" 2> /dev/null || true
for ev in component-failed rebuild-started rebuild-finished spare-active; do
  grep -q "'$ev'" "$T/monitor.log" || vb_fail "no $ev event"
done
bd=$(vb_blockdev_of m)
cmp -n $((31 << 20)) <(dd if="$T/pattern" bs=1M count=8 status=none; cat "$T/pattern2";
                      dd if="$T/pattern" bs=1M skip=12 status=none) "$bd" || vb_fail "data after the rebuild"
vb_assert_eq 0 "$(examine "$T/s.img" | jq .role)" "the spare's superblock: role 0"
vbmgr remove m "$T/a.img"
vb_assert_eq "$T/s.img $T/b.img" "$(vb_json m '[.components[].source] | join(" ")')" "replaced component removed"
vb_expect_fail Busy vbmgr remove m "$T/b.img"
vbmgr stop m
cmp -i 1M:1M "$T/s.img" "$T/b.img" || vb_fail "copies differ after the rebuild"

vbmgr delete m
vbmgr delete other
vb_stop_daemon
