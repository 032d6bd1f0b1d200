#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# test-vm-boot-root, on the host: the initramfs made by mkinitramfs with
# vblk's initramfs-tools hook and local-top script for the guest kernel,
# with the state boot-root-setup.sh left in WORK/state, written to
# WORK/initrd.img. mkinitramfs has no option for another kernel's modules:
# it runs in a mount namespace of its own whose /lib/modules/KVER is the VM
# cache's (on an overlay of /usr/lib: a host, a container say, may have no
# /usr/lib/modules to mount on) and whose /boot holds that kernel's config
# (it reads it for the compressors); the host's stay as they are. (In the
# first guest, under TCG, it took three minutes; here seconds.)
source "$VB_SRCDIR/tests/integration/lib.sh"
source "$VB_SRCDIR/tests/vm/boot-root-listing.sh"
work=${1:?usage: boot-root-mkinitramfs.sh WORK}
cache=$(cat "$work/cache-path")
kver=$(cat "$cache/kernel-version")
build=$(cd "$(dirname "$VBMGR")/.." && pwd)
dir=$T

conf=$dir/initramfs-tools
mkdir "$dir/overlay"
cp -a /etc/initramfs-tools "$conf"
mkdir -p "$conf/hooks" "$conf/scripts/local-top" "$conf/scripts/local-bottom"
cp "$build/data/initramfs-hook-vblk" "$conf/hooks/vblk"
cp "$build/data/initramfs-local-top-vblk" "$conf/scripts/local-top/vblk"
chmod +x "$conf/hooks/vblk" "$conf/scripts/local-top/vblk"
sed -i 's/^MODULES=.*/MODULES=list/; s/^COMPRESS=.*/COMPRESS=gzip/' "$conf/initramfs.conf"
# the disks, the root's file system, the 9p shares and the overlay of
# boot-root-usr (the host's /usr under the root)
printf '%s\n' virtio_pci virtio_blk ext4 9pnet_virtio 9p overlay > "$conf/modules"
cp "$VB_SRCDIR/tests/vm/boot-root-usr" "$conf/scripts/local-bottom/vm-usr"

# what vblk's initramfs parts take (data/initramfs/common.sh.in): this
# build's, the guest's state (root wanted running), no policy rules
echo "VBLK_DEVICES=root" > "$dir/initramfs.conf"
export VB_SRCDIR VBLKD VBMGR VBLK_STATE_DIR=$work/state VBLK_POLICY_DIR=$dir/no-policy \
  VBLK_UDEV_RULES=$build/data/64-vblk.rules VBLK_CONF=$dir/initramfs.conf \
  VBLK_INITRAMFS_COMMON=$build/data/initramfs-common.sh VBLK_INITRAMFS_START=$build/data/initramfs-start
# shellcheck disable=SC2016 # expanded by the namespace's shell
unshare --mount --propagation private bash -euc '
  kver=$1 cache=$2 conf=$3 out=$4 over=$5
  mkdir "$over/upper" "$over/work"
  mount -t overlay vm-lib -o "lowerdir=/usr/lib,upperdir=$over/upper,workdir=$over/work" /usr/lib
  mkdir -p /usr/lib/modules
  mount -t tmpfs vm-modules /usr/lib/modules
  mkdir "/usr/lib/modules/$kver"
  mount --bind "$cache/kernel/lib/modules/$kver" "/usr/lib/modules/$kver"
  mount -t tmpfs vm-boot /boot
  cp "$cache/kernel/boot/config-$kver" /boot/
  mkinitramfs -d "$conf" -o "$out" "$kver"' \
  vm "$kver" "$cache" "$conf" "$work/initrd.img" "$dir/overlay" > "$dir/mkinitramfs.log" 2>&1 ||
  vb_fail "mkinitramfs: $(tail -20 "$dir/mkinitramfs.log")"
listing=$(lsinitramfs "$work/initrd.img")
check_listing "the initramfs" "$listing"
echo "# the initramfs: $(du -k "$work/initrd.img" | cut -f1) KiB, $(wc -l <<< "$listing") files"
