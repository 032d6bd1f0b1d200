#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# test-vm-boot-root, first guest (tests/vm/run with two virtio disks and a
# share): a vblk raid1 "root" on /dev/vda and /dev/vdb (VB_BOOT_BACKEND:
# kernel md with vblk's metadata, or the engine on ublk), an ext4 on it
# holding a root file system for the next guests (busybox,
# tests/vm/boot-root-init as /sbin/init, the desired state at /var/lib/vblk
# as the real root's vblkd reads it), and the state the initramfs images
# take, written to the share (they are made on the host:
# boot-root-mkinitramfs.sh, boot-root-dracut.sh).
source "$VB_SRCDIR/tests/integration/lib.sh"
[ "${VB_IN_VM:-}" = 1 ] || vb_fail "run me with tests/vm/run"
share=/vm-share
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

vb_state | jq '(.devices[] | select(.name == "root") | .started) = true' > "$T/st.json"
mv "$T/st.json" "$VB_STATE_FILE"
rm -f "$VB_STATE_JOURNAL"

# what the initramfs images take (made on the host: boot-root-mkinitramfs.sh,
# boot-root-dracut.sh): the state of this guest, root wanted running
mkdir -p "$share/state"
vb_state > "$share/state/state.json"
cp "$VB_STATE_DIR/instance-id" "$share/state/"
