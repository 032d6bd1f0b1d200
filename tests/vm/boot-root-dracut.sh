#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# test-vm-boot-root, on the host: the initramfs made by dracut with vblk's
# module (data/dracut, as installed: 90vblk) for the guest kernel, with the
# state boot-root-setup.sh left in WORK/state, written to
# WORK/initrd-dracut.img. Beside vblk's, the test's own module 99vmusr runs
# boot-root-usr as a pre-pivot hook; both are added to a copy of dracut's
# base directory (under lib.sh's $T). A systemd initramfs of the few modules a root on virtio
# disks needs.
source "$VB_SRCDIR/tests/integration/lib.sh"
source "$VB_SRCDIR/tests/vm/boot-root-listing.sh"
work=${1:?usage: boot-root-dracut.sh WORK}
cache=$(cat "$work/cache-path")
kver=$(cat "$cache/kernel-version")
build=$(cd "$(dirname "$VBMGR")/.." && pwd)
dir=$T

base=$dir/base
mods=$base/modules.d
mkdir -p "$mods/90vblk" "$mods/99vmusr"
for f in /usr/lib/dracut/*; do
  [ "${f##*/}" = modules.d ] || ln -s "$f" "$base/"
done
ln -s /usr/lib/dracut/modules.d/* "$mods/"
cp "$build/data/module-setup.sh" "$VB_SRCDIR/data/dracut/vblk-trigger.sh" "$mods/90vblk/"
cat > "$mods/99vmusr/module-setup.sh" << 'MODULE'
#!/bin/bash
check () { return 255; }
depends () { return 0; }
installkernel () { hostonly='' instmods 9pnet_virtio 9p overlay; }
install () {
  inst_multiple mount cp chmod mkdir cat uname modprobe
  inst_script "$VB_SRCDIR/tests/vm/boot-root-usr" /sbin/vm-usr
  inst_hook pre-pivot 50 "$moddir/vm-usr.sh"
}
MODULE
echo 'rootmnt=$NEWROOT sh /sbin/vm-usr || die "vm: no /usr under the root"' > "$mods/99vmusr/vm-usr.sh"
echo "VBLK_DEVICES=root" > "$dir/initramfs.conf"
export VB_SRCDIR VBLKD VBMGR VBLK_STATE_DIR=$work/state VBLK_POLICY_DIR=$dir/no-policy \
  VBLK_UDEV_RULES=$build/data/64-vblk.rules VBLK_CONF=$dir/initramfs.conf \
  VBLK_INITRAMFS_COMMON=$build/data/initramfs-common.sh VBLK_INITRAMFS_START=$build/data/initramfs-start
dracutbasedir=$base dracut --force --no-hostonly --kver "$kver" --kmoddir "$cache/kernel/lib/modules/$kver" \
  --compress gzip --add-drivers "virtio_pci virtio_blk ext4" \
  -m "bash systemd systemd-initrd systemd-udevd dracut-systemd udev-rules base fs-lib rootfs-block vblk vmusr" \
  "$work/initrd-dracut.img" > "$dir/dracut.log" 2>&1 || vb_fail "dracut: $(tail -20 "$dir/dracut.log")"
grep -q "Including module: vblk" "$dir/dracut.log" || vb_fail "dracut left vblk's module out: $(cat "$dir/dracut.log")"
listing=$(lsinitrd "$work/initrd-dracut.img" 2> /dev/null)
check_listing "dracut's initramfs" "$listing"
grep -q "hooks/pre-trigger/40-vblk-trigger.sh" <<< "$listing" || vb_fail "dracut's initramfs lacks vblk's hook"
echo "# dracut's initramfs: $(du -k "$work/initrd-dracut.img" | cut -f1) KiB, $(wc -l <<< "$listing") files"
