#!/bin/bash
# test-vm-boot-root, first guest (tests/vm/run with two virtio disks and a
# share): a vblk raid1 "root" on /dev/vda and /dev/vdb (VB_BOOT_BACKEND:
# kernel md with vblk's metadata, or the engine on ublk), an ext4 on it
# holding a root file system for the next guests (busybox,
# tests/vm/boot-root-init as /sbin/init, the desired state at /var/lib/vblk
# as the real root's vblkd reads it), and an initramfs made by vblk's
# initramfs-tools hook and script, written to the share.
source "$VB_SRCDIR/tests/integration/lib.sh"
[ "${VB_IN_VM:-}" = 1 ] || vb_fail "run me with tests/vm/run"
share=/vm-share
kver=$(uname -r)
build=$(cd "$(dirname "$VBMGR")/.." && pwd)
vb_setup
vb_start_daemon

backend=${VB_BOOT_BACKEND:-kernel}
vb_log "raid1 'root' on /dev/vda /dev/vdb, backend $backend"
# (the engine's bitmap in chunks of 1 MiB: a reset dirties a few)
attrs=()
[ "$backend" = kernel ] || attrs=(--attr bitmap_chunk=1M)
vbmgr create root --driver raid1 --backend "$backend" "${attrs[@]}" --start /dev/vda /dev/vdb
vb_assert_eq "$backend" "$(vb_json root .backend)" "root's backend"
vbmgr wait root > /dev/null || vb_fail "initial resync of root"
node=$(vb_blockdev_of root)
mkfs.ext4 -q -L vblkroot "$node"
mkdir -p "$T/root"
mount "$node" "$T/root"
vb_on_cleanup_early "mountpoint -q $T/root && umount $T/root"
mkdir -p "$T/root"/{bin,sbin,dev,proc,sys,run,tmp,host,results,share,var/lib/vblk}
cp "$(cat "$share/busybox-path")" "$T/root/bin/busybox"
cp "$VB_SRCDIR/tests/vm/boot-root-init" "$T/root/sbin/init"
# the real root's desired state: this one, root wanted running
cp "$VB_STATE_DIR/instance-id" "$T/root/var/lib/vblk/"
jq '(.devices[] | select(.name == "root") | .started) = true' "$VB_STATE_FILE" \
  > "$T/root/var/lib/vblk/state.json"
umount "$T/root"
vbmgr stop root
vb_stop_daemon

vb_log "the initramfs, made by mkinitramfs with vblk's hook and local-top script"
conf=$T/initramfs-tools
# (mkinitramfs reads the kernel's config for its compressors; the overlay's
# /boot takes it)
cp "$(cat "$share/cache-path")/kernel/boot/config-$kver" /boot/
cp -a /etc/initramfs-tools "$conf"
mkdir -p "$conf/hooks" "$conf/scripts/local-top"
cp "$build/data/initramfs-hook-vblk" "$conf/hooks/vblk"
cp "$build/data/initramfs-local-top-vblk" "$conf/scripts/local-top/vblk"
chmod +x "$conf/hooks/vblk" "$conf/scripts/local-top/vblk"
sed -i 's/^MODULES=.*/MODULES=list/; s/^COMPRESS=.*/COMPRESS=gzip/' "$conf/initramfs.conf"
# the disks, the root's file system, and the 9p share boot-root-init mounts
printf '%s\n' virtio_pci virtio_blk ext4 9pnet_virtio 9p > "$conf/modules"
echo "VBLK_DEVICES=root" > "$T/initramfs.conf"
jq '(.devices[] | select(.name == "root") | .started) = true' "$VB_STATE_FILE" > "$T/st.json"
mv "$T/st.json" "$VB_STATE_FILE"
VBLKD=$VBLKD VBMGR=$VBMGR VBLK_STATE_DIR=$VB_STATE_DIR VBLK_POLICY_DIR=$T/no-policy \
  VBLK_UDEV_RULES=$build/data/64-vblk.rules VBLK_CONF=$T/initramfs.conf \
  mkinitramfs -d "$conf" -o "$share/initrd.img" "$kver" || vb_fail "mkinitramfs"
listing=$(lsinitramfs "$share/initrd.img")
for f in sbin/vblkd bin/vbmgr etc/vblk/initramfs-state/state.json \
  etc/vblk/initramfs-state/instance-id conf/conf.d/vblk scripts/local-top/vblk \
  lib/udev/rules.d/64-vblk.rules; do
  grep -qx "$f\|usr/$f" <<< "$listing" || vb_fail "the initramfs lacks $f"
done
for m in raid1 ublk_drv; do
  grep -q "/$m.ko" <<< "$listing" || vb_fail "the initramfs lacks $m.ko"
done
vb_log "initramfs: $(du -k "$share/initrd.img" | cut -f1) KiB, $(wc -l <<< "$listing") files"
