#!/bin/bash
# Backend "kernel", its device-mapper part: window and linear as dm linear
# tables (file components on tagged loop devices), chosen by "auto" where
# dm is present; the reference-model I/O test on each, ext4 on linear;
# a linear grown while its ext4 is mounted and fio verifies in it (dm's
# suspend / load / resume), then resize2fs online; a window resized
# online and exported over NBD (nbdcopy equals the node); kernel devices
# outliving a SIGKILLed vblkd and found again; vblkd killed in the middle
# of a dm reconfiguration (even with the device suspended): the table is
# loaded again from the configuration chosen at start-up; a stop that
# leaves no dm device or loop device behind. Needs dm: runs in
# the VM (tests/vm), skips elsewhere.
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
vb_assert_eq $((192 << 20)) "$(blockdev --getsize64 "$lbd")" "size after the grow"
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
for step in suspended swapped committed; do
  case $step in committed) want=$((48 << 20)) slots=3 ;; *) want=$((32 << 20)) slots=2 ;; esac
  for f in k0 k1 k2; do rm -f "$T/$f.img"; vb_mkimg "$T/$f.img" 16M; done
  vbmgr create k --driver linear --start "$T/k0.img" "$T/k1.img"
  vb_stop_daemon
  vb_start_daemon VBLK_TEST_STOP_AT="reconfigure:$step"
  vb_bg vbmgr reconfigure k --add "$T/k2.img"
  client=$VB_BG_PID
  vb_wait_stopped "$VBLKD_PID" || vb_fail "vblkd did not stop at $step"
  vb_kill_daemon
  wait "$client" 2> /dev/null && vb_fail "the reconfiguration succeeded although vblkd was killed at $step"
  vb_start_daemon
  vb_wait_state k active 10 || vb_fail "k after $step"
  vb_assert_eq "$slots" "$(jq '[.devices[] | select(.name == "k") | .components[]] | length' "$VB_STATE_FILE")" \
    "k's components in the desired state after $step"
  vb_assert_eq "$want" "$(blockdev --getsize64 "$(vb_blockdev_of k)")" "k's table after $step"
  dd if="$(vb_blockdev_of k)" of=/dev/null bs=1M count=1 iflag=direct status=none ||
    vb_fail "k does not serve I/O after $step"
  vbmgr stop k
  vbmgr delete k
  vb_log "killed at $step: $((want >> 20)) MiB, $slots components"
done

vb_log "stop and delete: no dm device, no loop device left"
vbmgr stop l
vbmgr stop w
vb_assert_eq 0 "$(dm_count)" "dm devices after stop"
[ -z "$(losetup -j "$T/a.img"; losetup -j "$T/w.img"; losetup -j "$T/c.img")" ] ||
  vb_fail "loop devices left: $(losetup -a)"
vbmgr delete l
vbmgr delete w
vb_stop_daemon
