#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A linear device grown by appending a component while its ext4 is mounted:
# the kernel sees the new size at once (same block node), resize2fs grows
# the mounted filesystem online, and the data written before and after
# verifies (backend loop: the engine; test-kernel-dm does the same on
# device-mapper). Online ext4 growth (EXT4_IOC_RESIZE_FS) needs CAP_SYS_RESOURCE;
# where the test runs without it (a container's bounding set), ext4 is
# grown by resize2fs unmounted and XFS shows the online growth instead
# (xfs_growfs on the mounted filesystem needs only CAP_SYS_ADMIN). A mirror with metadata=vblk shrunk to one leg becomes a window
# over its data area on the same node, its superblock erased.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

# bit 24 of the effective capabilities: CAP_SYS_RESOURCE
cap_eff=$((16#$(awk '/^CapEff/ {print $2}' /proc/self/status)))
online_ext4=$(( (cap_eff >> 24) & 1 ))

vb_mkimg "$T/a.img" 96M
vb_mkimg "$T/b.img" 64M
mkdir "$T/mnt"
vbmgr create l --driver linear --backend loop --start "$T/a.img"
bd=$(vb_blockdev_of l)
# metadata=vblk (the default): each component gives 1 MiB less
vb_assert_eq $((95 << 20)) "$(blockdev --getsize64 "$bd")" "size before"
mkfs.ext4 -q -F "$bd"
# an NBD export and a device stacked on it go through the same swap
vbmgr export l --nbd --listen "unix:$T/l.sock"
vb_assert_eq $((95 << 20)) "$(nbdinfo --size "nbd+unix:///?socket=$T/l.sock")" "NBD export size before"
# without superblocks: top's bytes are l's
vbmgr create top --driver linear --backend loop --attr metadata=none --start vblk:l
top=$(vb_blockdev_of top)
mount "$bd" "$T/mnt"
head -c 24M /dev/urandom > "$T/before.bin"
cp "$T/before.bin" "$T/mnt/before.bin"
sync
blocks_before=$(df --output=size -B1 "$T/mnt" | tail -1)

vb_log "linear grown by b.img while mounted"
vbmgr reconfigure l --add "$T/b.img"
vb_assert_eq $((158 << 20)) "$(nbdinfo --size "nbd+unix:///?socket=$T/l.sock")" "NBD export size after"
vb_assert_eq "$bd" "$(vb_blockdev_of l)" "block node"
vb_assert_eq $((158 << 20)) "$(blockdev --getsize64 "$bd")" "size the kernel sees after the grow"
vb_assert_eq $((158 << 20)) "$(vb_json l .size)" "size vblkd shows"
vb_assert_eq $((158 << 20)) "$(cat "/sys/class/block/${bd#/dev/}/size" | awk '{print $1 * 512}')" "sysfs size"
if [ "$online_ext4" = 1 ]; then
  resize2fs "$bd" > "$T/resize.log" 2>&1 || vb_fail "resize2fs online: $(cat "$T/resize.log")"
else
  vb_log "no CAP_SYS_RESOURCE here: ext4 is grown unmounted (XFS online below)"
  umount "$T/mnt"
  e2fsck -f -p "$bd" > /dev/null
  resize2fs "$bd" > "$T/resize.log" 2>&1 || vb_fail "resize2fs: $(cat "$T/resize.log")"
  mount "$bd" "$T/mnt"
fi
blocks_after=$(df --output=size -B1 "$T/mnt" | tail -1)
vb_log "filesystem: $blocks_before -> $blocks_after bytes"
[ "$blocks_after" -gt $((blocks_before + (48 << 20))) ] ||
  vb_fail "the filesystem did not grow: $blocks_before -> $blocks_after"
# fill past the old end: the new component holds data now
head -c 80M /dev/urandom > "$T/after.bin"
cp "$T/after.bin" "$T/mnt/after.bin"
sync
echo 3 > /proc/sys/vm/drop_caches
cmp "$T/before.bin" "$T/mnt/before.bin" || vb_fail "data written before the grow differs"
cmp "$T/after.bin" "$T/mnt/after.bin" || vb_fail "data written after the grow differs"
umount "$T/mnt"
fsck.ext4 -n -f "$bd" > "$T/fsck.log" 2>&1 || vb_fail "fsck: $(cat "$T/fsck.log")"
# (compared once nothing writes: a mounted ext4 initialises inode tables lazily)
cmp -n $((95 << 20)) "$top" "$bd" || vb_fail "the device stacked on l does not read l's bytes after the swap"
vbmgr stop top
vbmgr delete top

vb_log "restart of the grown device: same data"
vbmgr stop l
vbmgr start l
bd=$(vb_blockdev_of l)
mount "$bd" "$T/mnt"
cmp "$T/before.bin" "$T/mnt/before.bin" || vb_fail "before.bin after restart"
cmp "$T/after.bin" "$T/mnt/after.bin" || vb_fail "after.bin after restart"
umount "$T/mnt"
vbmgr stop l
vbmgr delete l

vb_log "XFS on linear, grown online with xfs_growfs while mounted and written to"
vb_mkimg "$T/x0.img" 320M
vb_mkimg "$T/x1.img" 128M
vbmgr create x --driver linear --backend loop --start "$T/x0.img"
bd=$(vb_blockdev_of x)
mkfs.xfs -q -f "$bd"
mount "$bd" "$T/mnt"
cp "$T/before.bin" "$T/mnt/before.bin"
# writes go on during the swap
dd if=/dev/urandom of="$T/mnt/during.bin" bs=1M count=64 oflag=direct status=none &
dd_pid=$!
VB_BG_PIDS+=("$dd_pid")
vbmgr reconfigure x --add "$T/x1.img"
wait "$dd_pid" || vb_fail "writes during the grow failed"
vb_assert_eq $((446 << 20)) "$(blockdev --getsize64 "$bd")" "size after the grow"
xfs_before=$(df --output=size -B1 "$T/mnt" | tail -1)
xfs_growfs "$T/mnt" > "$T/growfs.log" 2>&1 || vb_fail "xfs_growfs: $(cat "$T/growfs.log")"
xfs_after=$(df --output=size -B1 "$T/mnt" | tail -1)
vb_log "xfs: $xfs_before -> $xfs_after bytes online"
[ "$xfs_after" -gt $((xfs_before + (96 << 20))) ] || vb_fail "xfs did not grow: $xfs_before -> $xfs_after"
cp "$T/after.bin" "$T/mnt/after.bin"
cp "$T/after.bin" "$T/mnt/after2.bin"
sync
sha=$(sha256sum < "$T/mnt/during.bin")
umount "$T/mnt"
xfs_repair -n "$bd" > "$T/xfs_repair.log" 2>&1 || vb_fail "xfs_repair -n: $(cat "$T/xfs_repair.log")"
mount "$bd" "$T/mnt"
cmp "$T/before.bin" "$T/mnt/before.bin" || vb_fail "xfs: before.bin"
cmp "$T/after.bin" "$T/mnt/after2.bin" || vb_fail "xfs: after2.bin (past the old end)"
vb_assert_eq "$sha" "$(sha256sum < "$T/mnt/during.bin")" "xfs: file written during the grow"
umount "$T/mnt"
vbmgr stop x
vbmgr delete x

vb_log "raid1 with metadata=vblk -> one leg -> window over its data area"
vb_mkimg "$T/m0.img" 64M
vb_mkimg "$T/m1.img" 64M
vbmgr create m --driver raid1 --backend loop --start "$T/m0.img" "$T/m1.img"
vbmgr wait m > /dev/null
bd=$(vb_blockdev_of m)
size=$(vb_json m .size)
head -c "$size" /dev/urandom > "$T/m.bin"
dd if="$T/m.bin" of="$bd" bs=1M oflag=direct status=none
vbmgr reconfigure m --remove "$T/m1.img"
vb_assert_eq 1 "$(vbmgr examine --json "$T/m0.img" | jq '.roles | length')" "slots in m0's superblock"
cmp "$T/m.bin" "$bd" || vb_fail "data after dropping a leg"
vb_expect_fail NotSupported vbmgr reconfigure m --driver file
grep -q "use --driver window" <<< "$VB_ERR" || vb_fail "no hint at window: $VB_ERR"
vbmgr reconfigure m --driver window
vb_assert_eq "window 1048576 true $bd" \
  "$(vb_json m .driver) $(vb_json m .attributes.offset) $(vb_json m .attributes.engine) $(vb_blockdev_of m)" \
  "window over the data area, same node"
cmp -n "$size" "$T/m.bin" "$bd" || vb_fail "data after becoming a window"
vb_expect_fail NotFound vbmgr examine "$T/m0.img"
vb_expect_fail NotFound vbmgr examine "$T/m1.img"
vbmgr stop m
vbmgr start m
cmp -n "$size" "$T/m.bin" "$(vb_blockdev_of m)" || vb_fail "data after restarting the window"
vbmgr stop m
vbmgr delete m
vb_stop_daemon
