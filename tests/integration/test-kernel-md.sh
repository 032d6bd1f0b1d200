#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Backend "kernel", its md part: raid1, raid10 and raid0 as in-kernel md
# arrays with vblk's superblocks as external metadata ("external:vblk"),
# vblkd answering md as mdmon does. Chosen by "auto" where md is present;
# md's initial resync as a Job; the reference-model I/O test and ext4
# (mkfs, fsck) on each level; the superblocks clean once md is idle and
# dirty while it writes; a component failed under fio verify through
# dm-flakey: recorded as faulty in the surviving superblocks while md
# still holds the writes (vblkd stopped at that point, md's dev state
# still "blocked"), vblkd SIGKILLed there and started again, fio without
# an error; a spare rebuilt by md (rebuild job, spare moved into the
# slot); check and repair through sync_action; the same workload on the
# engine and on md leaving the same data; arrays outliving a SIGKILLed
# vblkd; a clean stop leaving no array or loop device. A raid0 with vblk's
# superblocks (the default): md's data offset past them, clean after a
# stop, a stale member refused with nothing written, adopted again by
# scan --adopt --start with its data. Needs md and dm: runs in the VM
# (tests/vm), skips elsewhere.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
for m in md-mod raid0 raid1 raid10 dm-mod dm-flakey; do modprobe "$m" 2> /dev/null || true; done
if [ ! -w /sys/module/md_mod/parameters/new_array ] || [ ! -e /dev/mapper/control ]; then
  echo "SKIP: no md or device-mapper in this kernel (run it in the VM: tests/vm)" >&2
  exit 77
fi
vb_setup
vb_start_daemon

# vblk's md arrays, but for an empty one in state clear (a md that keeps a
# stopped array's disk: vblk deletes it at the next start)
md_arrays () {
  local n=0 d
  for d in /sys/block/md_vb*; do
    [ -e "$d" ] || continue
    if [ "$(cat "$d/md/array_state" 2> /dev/null)" = clear ] && ! compgen -G "$d/md/dev-*" > /dev/null; then
      continue
    fi
    n=$((n + 1))
  done
  echo "$n"
}
examine () { vbmgr examine "$1" --json; }
refmodel () {
  local name=$1 chunk=$2 seed=${3:-$RANDOM} out
  out=$("$VB_REFMODEL" --device "$(vb_blockdev_of "$name")" --ops 600 --chunk "$chunk" \
        --seed "$seed") || vb_fail "$name: reference model: $out"
  vb_log "$name: $out"
}
ext4_round () {
  local bd=$1
  mkfs.ext4 -q -F "$bd" || vb_fail "mkfs.ext4 on $bd"
  fsck.ext4 -n -f "$bd" > "$T/fsck.log" 2>&1 || vb_fail "fsck on $bd: $(cat "$T/fsck.log")"
}
md_attr () { cat "/sys/block/$(basename "$1")/md/$2"; }

for f in a b c d e f g h s x0 x1 k0 k1 q0 q1 q2 z0 z1; do vb_mkimg "$T/$f.img" 48M; done

vb_log "raid1 on md (auto): external metadata, initial resync as a job"
vbmgr create m --driver raid1 --start "$T/a.img" "$T/b.img"
vb_assert_eq kernel "$(vb_json m .backend)" "backend auto picks for raid1"
bd=$(vb_blockdev_of m)
[[ "$bd" == /dev/md_vb* ]] || vb_fail "raid1 node $bd is not an md array"
inst=$(basename "$bd" | sed 's/^md_vb\([0-9a-f]*\)_.*/\1/')
vb_on_cleanup "for a in /sys/block/md_vb${inst}_*/md; do echo clear > \$a/array_state; done"
vb_assert_eq "external:vblk" "$(md_attr "$bd" metadata_version)" "md metadata_version"
vb_assert_eq raid1 "$(md_attr "$bd" level)" "md level"
vb_assert_eq "$(vb_json m .size)" "$(blockdev --getsize64 "$bd")" "md's size equals vblk's"
vbmgr wait m > /dev/null || vb_fail "initial resync"
job=$(vbmgr jobs --json | jq -c '[.[] | select(.device == "m" and .operation == "resync")] | last')
vb_assert_eq "resync finished" "$(jq -r '"\(.operation) \(.state)"' <<< "$job")" "md's resync as a job"
vb_assert_eq "in-sync in-sync" "$(vb_json m '[.components[].state] | join(" ")')" "component states"
refmodel m $((16 << 20))
sleep 1 # md's safe mode: idle 200 ms, then clean
vb_assert_eq "true true" "$(examine "$T/a.img" | jq -r .clean) $(examine "$T/b.img" | jq -r .clean)" \
  "superblocks clean once md is idle"
events=$(examine "$T/a.img" | jq .events)
vb_assert_eq "$events" "$(examine "$T/b.img" | jq .events)" "equal events on both legs"
ext4_round "$bd"

vbmgr stop m
vb_assert_eq 0 "$(md_arrays)" "md arrays after stop"
vb_assert_eq "true true" "$(examine "$T/a.img" | jq -r .clean) $(examine "$T/b.img" | jq -r .clean)" \
  "clean after stop"

vb_log "the same workload on the engine and on md: the same data"
vbmgr create k --driver raid1 --start "$T/k0.img" "$T/k1.img"
vbmgr create e --driver raid1 --backend loop --start "$T/x0.img" "$T/x1.img"
vbmgr wait e > /dev/null || vb_fail "resync of e"
vbmgr wait k > /dev/null || vb_fail "resync of k"
seed=$RANDOM
refmodel k $((64 << 20)) "$seed"
refmodel e $((64 << 20)) "$seed"
cmp "$(vb_blockdev_of k)" "$(vb_blockdev_of e)" || vb_fail "md and engine nodes differ after the same workload"
vbmgr stop e
vbmgr stop k
for i in 0 1; do
  cmp -i 1M:1M "$T/k$i.img" "$T/x$i.img" || vb_fail "leg $i: md and engine data areas differ"
done
vbmgr delete e
vbmgr delete k

vb_log "raid10 and raid0 on md: reference model, ext4"
vbmgr create r10 --driver raid10 --start "$T/c.img" "$T/d.img" "$T/e.img" "$T/f.img"
vb_assert_eq kernel "$(vb_json r10 .backend)" "backend of raid10"
r10=$(vb_blockdev_of r10)
vb_assert_eq "$(vb_json r10 .size)" "$(blockdev --getsize64 "$r10")" "raid10: md's size equals vblk's"
vb_assert_eq 258 "$(md_attr "$r10" layout)" "raid10 near 2"
refmodel r10 $((512 << 10))
ext4_round "$r10"
vbmgr stop r10
vbmgr delete r10
vbmgr create r0 --driver raid0 --start "$T/z0.img" "$T/z1.img"
r0=$(vb_blockdev_of r0)
vb_assert_eq raid0 "$(md_attr "$r0" level)" "md level of raid0"
vb_assert_eq "$(vb_json r0 .size)" "$(blockdev --getsize64 "$r0")" "raid0: md's size equals vblk's"
refmodel r0 $((512 << 10))
ext4_round "$r0"

vb_log "raid0 on md with vblk's superblocks (the default): stopped, refused stale, adopted again"
vb_assert_eq vblk "$(vb_json r0 .attributes.metadata)" "a new raid0's metadata"
for dev in /sys/block/"$(basename "$r0")"/md/dev-*; do
  vb_assert_eq 2048 "$(cat "$dev/offset")" "md's data offset of $(basename "$dev") (sectors)"
done
vb_assert_eq "raid0 0 raid0 1" "$(examine "$T/z0.img" | jq -r '"\(.driver) \(.role)"') $(examine "$T/z1.img" | jq -r '"\(.driver) \(.role)"')" \
  "the members' superblocks"
dd if=/dev/urandom of="$r0" bs=1M count=40 oflag=direct status=none
r0_sum=$(head -c $((40 << 20)) "$r0" | sha256sum)
r0_uuid=$(vb_json r0 .uuid)
vbmgr stop r0
vb_assert_eq "true true" "$(examine "$T/z0.img" | jq -r .clean) $(examine "$T/z1.img" | jq -r .clean)" \
  "raid0's superblocks clean after stop"
cp "$T/z1.img" "$T/z1.old"
vbmgr start r0
dd if=/dev/urandom of="$(vb_blockdev_of r0)" bs=1M count=1 seek=50 oflag=direct status=none
r0_sum=$(head -c $((40 << 20)) "$(vb_blockdev_of r0)" | sha256sum)
vbmgr stop r0
cp "$T/z1.img" "$T/z1.new"
cp "$T/z1.old" "$T/z1.img"
sum_c=$(sha256sum < "$T/z0.img")
vb_expect_fail Failed vbmgr start r0
vb_assert_contains "$VB_ERR" "$T/z1.img" "the refusal names the stale member"
vb_assert_contains "$VB_ERR" "stale" "the refusal says stale"
vb_assert_eq 0 "$(md_arrays)" "no md array left by the refused start"
vb_assert_eq "$sum_c" "$(sha256sum < "$T/z0.img")" "nothing written on refusal"
cp "$T/z1.new" "$T/z1.img"
vbmgr delete r0
out=$(vbmgr scan --adopt --start --json "$T/z0.img" "$T/z1.img") || vb_fail "scan --adopt --start of r0"
vb_assert_eq true "$(jq -r '.[] | select(.name == "r0") | .adopted' <<< "$out")" "r0 adopted"
vb_wait_state r0 active 20
vb_assert_eq "$r0_uuid kernel vblk" "$(vb_json r0 '"\(.uuid) \(.backend) \(.attributes.metadata)"')" "r0 as adopted"
[[ "$(vb_blockdev_of r0)" == /dev/md_vb* ]] || vb_fail "the adopted raid0 is not an md array"
vb_assert_eq "$r0_sum" "$(head -c $((40 << 20)) "$(vb_blockdev_of r0)" | sha256sum)" "r0's data after adoption"
vbmgr stop r0
vbmgr delete r0
vbmgr create r0n --driver raid0 --attr metadata=none --start "$T/z0.img" "$T/z1.img"
vb_assert_eq 0 "$(cat /sys/block/"$(basename "$(vb_blockdev_of r0n)")"/md/dev-*/offset | sort -u)" \
  "raid0 without metadata: data from sector 0"
vbmgr stop r0n
vbmgr delete r0n

vb_log "SIGKILL of vblkd: the array stays and is watched again"
vbmgr start m
bd=$(vb_blockdev_of m)
vb_kill_daemon
[ -b "$bd" ] && [ "$(md_arrays)" = 1 ] || vb_fail "md array did not outlive vblkd"
vb_start_daemon
vb_wait_state m active 10
vb_assert_eq "$bd" "$(vb_blockdev_of m)" "m's node after the restart"
dd if=/dev/urandom of="$bd" bs=64K count=4 oflag=direct status=none || vb_fail "write after the restart"
sleep 1
vb_assert_eq true "$(examine "$T/a.img" | jq -r .clean)" "the new monitor marks the array clean again"
vbmgr stop m
vbmgr delete m

vb_log "refusals on md: a corrupt superblock, the last copy, a reshape, md1 by hand"
vbmgr create q --driver raid1 --start "$T/q0.img" "$T/q1.img"
vbmgr wait q > /dev/null || vb_fail "resync of q"
vbmgr stop q
sum_q0=$(sha256sum < "$T/q0.img")
cp "$T/q1.img" "$T/q1.good"
printf '\x55' | dd of="$T/q1.img" bs=1 seek=$((4096 + 300)) conv=notrunc status=none
vb_expect_fail Failed vbmgr start q
vb_assert_contains "$VB_ERR" "$T/q1.img" "error names the corrupted component"
vb_assert_contains "$VB_ERR" "checksum" "error says checksum"
vb_assert_eq "$sum_q0" "$(sha256sum < "$T/q0.img")" "the other component is untouched"
vb_assert_eq 0 "$(md_arrays)" "no md array left by the refused start"
[ -z "$(losetup -a | grep "$T/q" || true)" ] || vb_fail "loop devices left by the refused start: $(losetup -a)"
cp "$T/q1.good" "$T/q1.img"
vbmgr start q
vbmgr fail q "$T/q0.img"
vb_wait_state q degraded 10
vb_expect_fail WouldLoseData vbmgr fail q "$T/q1.img"
vb_assert_eq "faulty in-sync" "$(vb_json q '[.components[].state] | join(" ")')" "the last copy stays in sync"

vb_log "a failed component stays out of md through a start; its re-add is recovered in full"
head -c 2M /dev/urandom > "$T/qpattern"
dd if="$T/qpattern" of="$(vb_blockdev_of q)" bs=1M seek=3 oflag=direct status=none
vbmgr stop q
vbmgr start q
qbd=$(vb_blockdev_of q)
vb_assert_eq "faulty in-sync" "$(vb_json q '[.components[].state] | join(" ")')" "q0 still faulty after the start"
cmp -n $((2 << 20)) -i 0:$((3 << 20)) "$T/qpattern" "$qbd" || vb_fail "q read stale data after the start"
vbmgr add q "$T/q0.img"
cmp -n $((2 << 20)) -i 0:$((3 << 20)) "$T/qpattern" "$qbd" || vb_fail "q read stale data during the re-add"
vbmgr wait q > /dev/null || vb_fail "recovery of the re-added leg"
vb_assert_eq "in-sync in-sync" "$(vb_json q '[.components[].state] | join(" ")')" "q after the recovery"
vbmgr stop q
cmp -i 1M:1M "$T/q0.img" "$T/q1.img" || vb_fail "q's legs differ after the recovery"

vb_log "a stale copy of a component at start: md recovers it in full, never reads it"
cp "$T/q0.img" "$T/q0.snap"
vbmgr start q
head -c 2M /dev/urandom > "$T/qpattern"
dd if="$T/qpattern" of="$(vb_blockdev_of q)" bs=1M seek=3 oflag=direct status=none
vbmgr stop q
cp "$T/q0.snap" "$T/q0.img"
vbmgr start q
qbd=$(vb_blockdev_of q)
grep -q "component 0 ($T/q0.img): it is at events .*; md recovers it in full" "$VB_LOG" ||
  vb_fail "the stale copy was not recovered in full"
for i in 1 2 3 4; do
  cmp -n $((2 << 20)) -i 0:$((3 << 20)) "$T/qpattern" "$qbd" || vb_fail "q read the stale copy (round $i)"
done
vbmgr wait q > /dev/null || vb_fail "recovery of the stale copy"
vbmgr stop q
cmp -i 1M:1M "$T/q0.img" "$T/q1.img" || vb_fail "q's legs differ after the recovery of the copy"
vbmgr start q
vb_expect_fail NotSupported vbmgr reconfigure q --add "$T/q2.img"
vb_assert_contains "$VB_ERR" "md array" "the refusal names md"
vbmgr stop q
vbmgr delete q
vb_expect_fail InvalidArgument vbmgr create z --driver raid1 --attr metadata=md1 "$T/q0.img" "$T/q1.img"
vb_assert_contains "$VB_ERR" "vbmgr scan --adopt" "md1 is for adopted arrays"

vb_log "a component failed under fio verify (dm-flakey): recorded before md unblocks"
fl_loop=$(losetup -f --show "$T/h.img")
sectors=$(blockdev --getsz "$fl_loop")
fl=vbtest-flakey-$$
dmsetup create "$fl" --table "0 $sectors linear $fl_loop 0"
vb_on_cleanup "dmsetup remove --retry $fl"
vb_stop_daemon
vb_start_daemon VBLK_TEST_STOP_AT=md:failure-recorded
vbmgr create f --driver raid1 --start "/dev/mapper/$fl" "$T/g.img"
fbd=$(vb_blockdev_of f)
vbmgr wait f > /dev/null || vb_fail "resync of f"
mkfs.ext4 -q -F "$fbd"
mkdir -p "$T/mnt"
mount "$fbd" "$T/mnt"
fio --name=fail --directory="$T/mnt" --filename=data --size=24M --ioengine=psync --direct=1 \
    --rw=randrw --bs=4k --verify=crc32c --verify_backlog=128 --verify_fatal=1 --time_based \
    --runtime=25 --output="$T/fio.log" &
fio_pid=$!
VB_BG_PIDS+=("$fio_pid")
sleep 3
# from now on every request to the component fails
dmsetup suspend "$fl"
dmsetup load "$fl" --table "0 $sectors flakey $fl_loop 0 0 3600"
dmsetup resume "$fl"
vb_wait_stopped "$VBLKD_PID" || vb_fail "vblkd did not stop once the failure was recorded"
dev="dev-$(basename "$(readlink -f "/dev/mapper/$fl")")"
st=$(md_attr "$fbd" "$dev/state")
vb_assert_contains "$st" "blocked" "md still holds the failed component (blocked) when the superblocks say faulty"
vb_assert_eq faulty "$(examine "$T/g.img" | jq -r '.roles[0].state')" "the survivor's superblock records slot 0 faulty"
vb_log "md dev state at the hook: $st; array_state $(md_attr "$fbd" array_state)"
vb_kill_daemon
vb_start_daemon
vb_wait_state f degraded 20
vb_wait_until 10 eval '[ ! -e "/sys/block/$(basename "$fbd")/md/$dev" ]' ||
  vb_fail "the failed component was not removed from md: $(ls "/sys/block/$(basename "$fbd")/md")"
vb_assert_eq "faulty in-sync" "$(vb_json f '[.components[].state] | join(" ")')" "states after the failure"
wait "$fio_pid" || vb_fail "fio across the failure: $(tail -20 "$T/fio.log")"
grep -q "err= 0" "$T/fio.log" || vb_fail "fio errors: $(cat "$T/fio.log")"
vb_log "fio: $(grep -o 'WRITE: bw=[^,]*' "$T/fio.log" | head -1), no error"

vb_log "a spare takes the failed slot; md rebuilds it"
vbmgr add f "$T/s.img" --spare
roles_are () { [ "$(vb_json f '[.components[].role] | join(" ")')" = "$1" ]; }
vb_wait_until 30 roles_are "0 1 faulty" || vb_fail "spare not moved into slot 0: $(vb_json f '.components')"
vbmgr wait f > /dev/null || vb_fail "rebuild onto the spare"
job=$(vbmgr jobs --json | jq -c '[.[] | select(.device == "f" and .operation == "rebuild")] | last')
vb_assert_eq finished "$(jq -r .state <<< "$job")" "md's recovery as a rebuild job"
vb_assert_eq "in-sync in-sync faulty" "$(vb_json f '[.components[].state] | join(" ")')" "states after the rebuild"
vb_assert_eq "0 in-sync" "$(examine "$T/s.img" | jq -r '"\(.role) \(.roles[0].state)"')" "the spare's superblock"
umount "$T/mnt"
fsck.ext4 -n -f "$fbd" > "$T/fsck.log" 2>&1 || vb_fail "fsck after the failure: $(cat "$T/fsck.log")"
vbmgr remove f "/dev/mapper/$fl"
vbmgr stop f
cmp -i 1M:1M "$T/s.img" "$T/g.img" || vb_fail "copies differ after the rebuild"

vb_log "check counts mismatches through sync_action; repair rewrites them"
dd if=/dev/urandom of="$T/g.img" bs=4K count=3 seek=$(((1 << 20) / 4096 + 100)) conv=notrunc status=none
vbmgr start f
job=$(vbmgr check f)
vbmgr wait "$job" > /dev/null || vb_fail "check failed"
mism=$(vbmgr jobs --json | jq --arg p "$job" '.[] | select(.path == $p) | .mismatches')
[ "$mism" -gt 0 ] || vb_fail "check found no mismatch ($mism)"
vb_log "check: $mism mismatching 4 KiB blocks (md counts whole resync blocks)"
job=$(vbmgr check f --repair)
vbmgr wait "$job" > /dev/null || vb_fail "repair failed"
job=$(vbmgr check f)
vbmgr wait "$job" > /dev/null || vb_fail "second check failed"
vb_assert_eq 0 "$(vbmgr jobs --json | jq --arg p "$job" '.[] | select(.path == $p) | .mismatches')" "no mismatch after repair"
vbmgr stop f
cmp -i 1M:1M "$T/s.img" "$T/g.img" || vb_fail "copies differ after the repair"
vbmgr delete f
dmsetup remove "$fl"
losetup -d "$fl_loop"

vb_log "stop: no array, no loop device left"
vb_assert_eq 0 "$(md_arrays)" "md arrays at the end"
[ -z "$(losetup -a | grep "$T/" || true)" ] || vb_fail "loop devices left: $(losetup -a)"
vb_stop_daemon
