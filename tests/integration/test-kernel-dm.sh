#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Backend "kernel", its device-mapper part: window and linear as dm linear
# tables (file components on tagged loop devices), chosen by "auto" where
# dm is present; the reference-model I/O test on each, ext4 on linear;
# a linear grown while its ext4 is mounted and fio verifies in it (dm's
# suspend / load / resume), then resize2fs online; a window resized
# online and exported over NBD (nbdcopy equals the node); kernel devices
# outliving a SIGKILLed vblkd and found again; vblkd killed in the middle
# of a dm reconfiguration (even with the device suspended): the table is
# loaded again from the configuration chosen at start-up; a stop that
# leaves no dm device or loop device behind. A linear with vblk's
# superblocks (the default): the table maps past them, a component
# appended online gets its own and the new role table, clean after a
# stop, a stale component refused with nothing written, adopted again by
# scan --adopt --start with its data. Needs dm: runs in the VM
# (tests/vm), skips elsewhere.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
modprobe dm-mod 2> /dev/null || true
if [ ! -e /dev/mapper/control ] || [ ! -d /sys/module/dm_mod ]; then
  echo "SKIP: no device-mapper in this kernel (run it in the VM: tests/vm)" >&2
  exit 77
fi
vb_setup
vb_start_daemon

dm_count () { dmsetup ls 2> /dev/null | grep -c "^vblk-" || true; }
refmodel () {
  local name=$1 chunk=$2 out
  out=$("$VB_REFMODEL" --device "$(vb_blockdev_of "$name")" --ops 800 --chunk "$chunk" \
        --seed "$RANDOM") || vb_fail "$name: reference model: $out"
  vb_log "$name: $out"
}

backends=$(gdbus call --system --dest org.vblk.VBlk1 --object-path /org/vblk/VBlk1/Manager \
  --method org.freedesktop.DBus.Properties.Get org.vblk.VBlk1.Manager Backends)
grep -q "'kernel': (true" <<< "$backends" || vb_fail "Backends does not say kernel is available: $backends"

for f in a b c w; do vb_mkimg "$T/$f.img" 64M; done

vb_log "window on device-mapper (auto), data where the window says"
vbmgr create w --driver window --attr offset=1M --attr size=16M --start "$T/w.img"
vb_assert_eq kernel "$(vb_json w .backend)" "backend auto picks for a window"
bd=$(vb_blockdev_of w)
[[ "$bd" == /dev/dm-* ]] || vb_fail "window node $bd is not a dm device"
dmsetup table | grep -q "linear" || vb_fail "no linear table: $(dmsetup table)"
refmodel w $((16 << 20))
head -c 1M /dev/urandom > "$T/pattern"
dd if="$T/pattern" of="$bd" bs=1M seek=2 oflag=direct status=none
cmp -n 1M -i 0:$((3 << 20)) "$T/pattern" "$T/w.img" || vb_fail "window data not at offset 1M + 2M of w.img"
vb_log "window resized online (suspend/load/resume)"
vbmgr set w size=32M
vb_assert_eq $((32 << 20)) "$(blockdev --getsize64 "$bd")" "window size after set"
cmp -n 1M -i 0:$((2 << 20)) "$T/pattern" "$bd" || vb_fail "data after the resize"
vb_log "a kernel device exported over NBD"
vbmgr export w --nbd --listen "unix:$T/w.sock"
vb_assert_eq $((32 << 20)) "$(nbdinfo --size "nbd+unix:///?socket=$T/w.sock")" "NBD size of w"
nbdcopy "nbd+unix:///?socket=$T/w.sock" "$T/w-export.img"
cmp "$T/w-export.img" "$bd" || vb_fail "NBD export of w differs from its node"
vbmgr export w --nbd --listen "unix:$T/w.sock" --stop
mkfs.ext4 -q -F "$bd" || vb_fail "mkfs.ext4 on the window"
fsck.ext4 -n -f "$bd" > "$T/fsck.log" 2>&1 || vb_fail "fsck on the window: $(cat "$T/fsck.log")"

vb_log "linear over two files: ext4, fio verify, grown online by a third"
vbmgr create l --driver linear --start "$T/a.img" "$T/b.img"
vb_assert_eq kernel "$(vb_json l .backend)" "backend of linear"
lbd=$(vb_blockdev_of l)
refmodel l $((64 << 20))
mkfs.ext4 -q -F "$lbd"
mkdir "$T/mnt"
mount "$lbd" "$T/mnt"
fio --name=grow --directory="$T/mnt" --filename=data --size=32M --ioengine=psync --direct=1 \
    --rw=randrw --bs=4k --verify=crc32c --verify_backlog=128 --verify_fatal=1 --time_based \
    --runtime=15 --output="$T/fio.log" &
fio_pid=$!
VB_BG_PIDS+=("$fio_pid")
sleep 3
vbmgr reconfigure l --add "$T/c.img"
vb_assert_eq "$lbd" "$(vb_blockdev_of l)" "block node after the grow"
# metadata=vblk (the default): each file gives 63 MiB
vb_assert_eq $((189 << 20)) "$(blockdev --getsize64 "$lbd")" "size after the grow"
held=$(grep -o "requests held [0-9]* us" "$VB_LOG" | tail -1)
vb_log "dm swap: $held"
before=$(df --output=size -B1 "$T/mnt" | tail -1)
resize2fs "$lbd" > "$T/resize.log" 2>&1 || vb_fail "resize2fs online: $(cat "$T/resize.log")"
after=$(df --output=size -B1 "$T/mnt" | tail -1)
vb_log "ext4 grown online: $before -> $after bytes"
[ "$after" -gt $((before + (48 << 20))) ] || vb_fail "ext4 did not grow: $before -> $after"
wait "$fio_pid" || vb_fail "fio across the dm swap: $(tail -20 "$T/fio.log")"
grep -q "err= 0" "$T/fio.log" || vb_fail "fio errors: $(cat "$T/fio.log")"
umount "$T/mnt"
fsck.ext4 -n -f "$lbd" > "$T/fsck.log" 2>&1 || vb_fail "fsck: $(cat "$T/fsck.log")"

vb_log "linear with vblk's superblocks: the table maps past them; the grown one has its own"
vb_assert_eq vblk "$(vb_json l .attributes.metadata)" "a new linear's metadata"
l_table=$(dmsetup table "vblk-$(cat "$VB_STATE_DIR/instance-id")-$(vb_json l .uuid)")
vb_assert_eq "2048 2048 2048" "$(awk '{ print $5 }' <<< "$l_table" | xargs)" "the table's offsets (sectors)"
vb_assert_eq "l 2 3" "$(vbmgr examine --json "$T/c.img" | jq -r '"\(.device_name) \(.role) \(.n_roles)"')" \
  "the appended component's superblock"
vb_assert_eq 3 "$(vbmgr examine --json "$T/a.img" | jq -r .n_roles)" "the new role table on the first one"

vb_log "SIGKILL of vblkd: kernel devices stay, and are found again"
vb_kill_daemon
[ -b "$lbd" ] && [ "$(dm_count)" = 2 ] || vb_fail "dm devices did not outlive vblkd: $(dmsetup ls)"
vb_start_daemon
vb_wait_state l active 10 || vb_fail "l not found running again"
vb_assert_eq "$lbd" "$(vb_blockdev_of l)" "l's node after the restart"
vb_assert_eq "$bd" "$(vb_blockdev_of w)" "w's node after the restart"
vb_assert_eq 2 "$(dm_count)" "dm devices after the restart (no duplicates)"
fsck.ext4 -n -f "$lbd" > /dev/null 2>&1 || vb_fail "fsck after the restart"

vb_log "SIGKILL in the middle of a dm reconfiguration: the table follows the state chosen"
# without superblocks the desired state decides (new once committed); with
# them, the role table the components carry (written once the new table is
# live)
for meta in none vblk; do
for step in suspended swapped committed; do
  per=16
  [ "$meta" = none ] || per=15
  case $meta:$step in
    *:committed | vblk:swapped) want=$((3 * per << 20)) slots=3 ;;
    *) want=$((2 * per << 20)) slots=2 ;;
  esac
  for f in k0 k1 k2; do rm -f "$T/$f.img"; vb_mkimg "$T/$f.img" 16M; done
  vbmgr create k --driver linear --attr metadata=$meta --start "$T/k0.img" "$T/k1.img"
  vb_stop_daemon
  vb_start_daemon VBLK_TEST_STOP_AT="reconfigure:$step"
  vb_bg vbmgr reconfigure k --add "$T/k2.img"
  client=$VB_BG_PID
  vb_wait_stopped "$VBLKD_PID" || vb_fail "vblkd did not stop at $step"
  vb_kill_daemon
  wait "$client" 2> /dev/null && vb_fail "the reconfiguration succeeded although vblkd was killed at $step"
  vb_start_daemon
  vb_wait_state k active 10 || vb_fail "k after $step"
  vb_assert_eq "$slots" "$(vb_state | jq '[.devices[] | select(.name == "k") | .components[]] | length')" \
    "k's components in the desired state after $step"
  vb_assert_eq "$want" "$(blockdev --getsize64 "$(vb_blockdev_of k)")" "k's table after $step"
  dd if="$(vb_blockdev_of k)" of=/dev/null bs=1M count=1 iflag=direct status=none ||
    vb_fail "k does not serve I/O after $step"
  vbmgr stop k
  vbmgr delete k
  vb_log "metadata=$meta, killed at $step: $((want >> 20)) MiB, $slots components"
done
done

vb_log "stop and delete: no dm device, no loop device left"
vbmgr stop l
vbmgr stop w
vb_assert_eq 0 "$(dm_count)" "dm devices after stop"

vb_log "linear on dm: stopped clean, a stale component refused, adopted again by scan"
for f in a b c; do
  vb_assert_eq true "$(vbmgr examine --json "$T/$f.img" | jq -r .clean)" "$f.img clean after stop"
done
cp "$T/b.img" "$T/b.old"
vbmgr start l
dd if=/dev/urandom of="$(vb_blockdev_of l)" bs=1M count=1 seek=70 oflag=direct status=none
l_sum=$(sha256sum < "$(vb_blockdev_of l)")
l_uuid=$(vb_json l .uuid)
vbmgr stop l
cp "$T/b.img" "$T/b.new"
cp "$T/b.old" "$T/b.img"
sum_a=$(sha256sum < "$T/a.img")
vb_expect_fail Failed vbmgr start l
vb_assert_contains "$VB_ERR" "$T/b.img" "the refusal names the stale component"
vb_assert_contains "$VB_ERR" "stale" "the refusal says stale"
vb_assert_eq 0 "$(dm_count)" "no dm device left by the refused start"
vb_assert_eq "$sum_a" "$(sha256sum < "$T/a.img")" "nothing written on refusal"
cp "$T/b.new" "$T/b.img"
vbmgr delete l
out=$(vbmgr scan --adopt --start --json "$T/a.img" "$T/b.img" "$T/c.img") || vb_fail "scan --adopt --start of l"
vb_assert_eq true "$(jq -r '.[] | select(.name == "l") | .adopted' <<< "$out")" "l adopted"
vb_wait_state l active 20
vb_assert_eq "$l_uuid kernel vblk 3" "$(vb_json l '"\(.uuid) \(.backend) \(.attributes.metadata) \(.components | length)"')" "l as adopted"
vb_assert_eq "$l_sum" "$(sha256sum < "$(vb_blockdev_of l)")" "l's data after adoption"
vbmgr stop l
vb_assert_eq 0 "$(dm_count)" "dm devices after the last stop"
[ -z "$(losetup -j "$T/a.img"; losetup -j "$T/w.img"; losetup -j "$T/c.img")" ] ||
  vb_fail "loop devices left: $(losetup -a)"
vbmgr delete l
vbmgr delete w
vb_stop_daemon
