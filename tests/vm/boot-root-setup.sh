#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# test-vm-boot-root, first guest (tests/vm/run with two virtio disks and a
# share): a vblk raid1 "root" on /dev/vda and /dev/vdb (VB_BOOT_BACKEND:
# kernel md with vblk's metadata, or the engine on ublk), an ext4 on it
# holding a root file system for the next guests (busybox,
# tests/vm/boot-root-init as /sbin/init, the desired state at /var/lib/vblk
# as the real root's vblkd reads it), and an initramfs made by vblk's
# initramfs-tools hook and script, written to the share with the state
# dracut's image takes (made on the host: boot-root-dracut.sh).
source "$VB_SRCDIR/tests/integration/lib.sh"
[ "${VB_IN_VM:-}" = 1 ] || vb_fail "run me with tests/vm/run"
share=/vm-share
kver=$(uname -r)
build=$(cd "$(dirname "$VBMGR")/.." && pwd)
vb_setup
vb_start_daemon

# The real systemd's configuration in the root's /etc (ETC): the file
# systems, vblkd.service and vblk's bus policy as installed (vblkd here
# from /opt/vblk), and a target that runs boot-root-systemd.sh.
systemd_units () {
  local etc=$1 units=$1/systemd/system
  cat > "$etc/fstab" << FSTAB
/dev/vblk/root / ext4 defaults 0 0
results /srv 9p trans=virtio,version=9p2000.L,msize=512000 0 0
share /mnt 9p trans=virtio,version=9p2000.L,msize=512000 0 0
FSTAB
  sed 's|^ExecStart=.*|ExecStart=/opt/vblk/vblkd --takeover|' "$build/data/vblkd.service" \
    > "$units/vblkd.service"
  mkdir -p "$units/vblkd.service.d" "$units/sysinit.target.wants"
  printf '[Service]\nStandardOutput=journal+console\nStandardError=journal+console\n' \
    > "$units/vblkd.service.d/console.conf"
  ln -sf ../vblkd.service "$units/sysinit.target.wants/vblkd.service"
  # the bus lets vblkd own its name (installed: DATADIR/dbus-1/system.d)
  mkdir -p "$etc/dbus-1/system.d"
  cp "$VB_SRCDIR/data/dbus/org.vblk.VBlk1.conf" "$etc/dbus-1/system.d/"
  cat > "$units/vblk-boot-test.service" << UNIT
[Unit]
Description=test-vm-boot-root: the booted system's checks
Requires=local-fs.target
Wants=dbus.service
After=vblkd.service local-fs.target basic.target dbus.service
[Service]
Type=oneshot
Environment=VB_BOOT_BACKEND=$backend
ExecStart=/bin/bash /host$VB_SRCDIR/tests/vm/boot-root-systemd.sh
StandardOutput=journal+console
StandardError=journal+console
UNIT
  cat > "$units/vblk-boot-test.target" << UNIT
[Unit]
Description=test-vm-boot-root
Requires=basic.target vblk-boot-test.service
After=basic.target vblk-boot-test.service
AllowIsolate=yes
UNIT
}

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
# a root as Debian 12's (merged /usr): /etc, /var and the test's files here,
# /usr the host's (the initramfs's boot-root-usr mounts it), so that a real
# systemd boots from it; boot-root-init (/opt/vblk/init) for the others
r=$T/root
mkdir -p "$r"/{usr,dev,proc,sys,run,tmp,host,results,share,srv,mnt,media,root,opt/vblk} \
  "$r"/var/{lib/vblk,log/journal,tmp,cache}
for d in bin sbin lib lib64; do ln -s "usr/$d" "$r/$d"; done
cp -a /etc "$r/etc"
cp "$VB_SRCDIR/tests/vm/boot-root-init" "$r/opt/vblk/init"
cp "$VBLKD" "$VBMGR" "$build/data/vblk.shutdown" "$r/opt/vblk/"
cat "$share/cache-path" > "$r/opt/vblk/cache-path"
systemd_units "$r/etc"
# the real root's desired state: this one, root wanted running
cp "$VB_STATE_DIR/instance-id" "$T/root/var/lib/vblk/"
vb_state | jq '(.devices[] | select(.name == "root") | .started) = true' \
  > "$T/root/var/lib/vblk/state.json"
umount "$T/root"
vbmgr stop root
vb_stop_daemon

# what vblk's initramfs parts take (data/initramfs/common.sh.in): this
# build's, the state of this guest (root wanted running), no policy rules
echo "VBLK_DEVICES=root" > "$T/initramfs.conf"
vb_state | jq '(.devices[] | select(.name == "root") | .started) = true' > "$T/st.json"
mv "$T/st.json" "$VB_STATE_FILE"
rm -f "$VB_STATE_JOURNAL"
export VBLKD VBMGR VBLK_STATE_DIR=$VB_STATE_DIR VBLK_POLICY_DIR=$T/no-policy \
  VBLK_UDEV_RULES=$build/data/64-vblk.rules VBLK_CONF=$T/initramfs.conf \
  VBLK_INITRAMFS_COMMON=$build/data/initramfs-common.sh VBLK_INITRAMFS_START=$build/data/initramfs-start

source "$VB_SRCDIR/tests/vm/boot-root-listing.sh"

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
# the disks, the root's file system, the 9p shares and the overlay of
# boot-root-usr (the host's /usr under the root)
printf '%s\n' virtio_pci virtio_blk ext4 9pnet_virtio 9p overlay > "$conf/modules"
mkdir -p "$conf/scripts/local-bottom"
cp "$VB_SRCDIR/tests/vm/boot-root-usr" "$conf/scripts/local-bottom/vm-usr"
mkinitramfs -d "$conf" -o "$share/initrd.img" "$kver" || vb_fail "mkinitramfs"
listing=$(lsinitramfs "$share/initrd.img")
check_listing "the initramfs" "$listing"
vb_log "initramfs: $(du -k "$share/initrd.img" | cut -f1) KiB, $(wc -l <<< "$listing") files"

# what dracut's image takes (test-vm-boot-root.sh makes it on the host)
mkdir -p "$share/state"
vb_state > "$share/state/state.json"
cp "$VB_STATE_DIR/instance-id" "$share/state/"
