#!/bin/bash
# Suite 'vm': boot from a vblk root (issue 18). Four guests on Debian 12's
# kernel share two virtio disks:
#   1. boot-root-setup.sh: a vblk raid1 'root' on the disks with a root file
#      system, and an initramfs made by mkinitramfs with vblk's hook and
#      local-top script;
#   2. that initramfs starts the array without a bus and mounts it as the
#      root; the real root's vblkd takes over (boot-root-stage.sh
#      takeover), a file is written, the shutdown is clean;
#   3. no resync after it (clean), then a reset in the middle of writes;
#   4. a resync after the reset (of the bitmap's dirty chunks only where
#      there is one); after the takeover a leg fails and the failure is in
#      the surviving superblock (unclean).
# BACKEND: kernel (md with vblk's metadata; md fails the leg) or ublk (the
# engine with its bitmap; the leg is failed by vbmgr once the bus comes).
set -euo pipefail
backend=${1:-kernel}
case $backend in kernel | ublk) ;; *) echo "usage: $0 [kernel|ublk]" >&2; exit 2 ;; esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "SKIP: the VM tests need root" >&2; exit 77; }
command -v "${VB_VM_QEMU:-qemu-system-x86_64}" > /dev/null ||
  { echo "SKIP: no ${VB_VM_QEMU:-qemu-system-x86_64}" >&2; exit 77; }
cache=${VB_VM_CACHE:-/var/cache/vblk-vm}
[ -s "$cache/kernel-version" ] || { echo "SKIP: no VM cache (tests/vm/build-cache.sh)" >&2; exit 77; }
command -v mkinitramfs > /dev/null || { echo "FAIL: no mkinitramfs (tools/install-deps.sh)" >&2; exit 1; }
: "${VBLKD:?}" "${VBMGR:?}" "${VB_SRCDIR:?}"

work=$(mktemp -d /tmp/vblk-boot-root.XXXXXX)
trap 'rm -rf "$work"' EXIT
truncate -s 96M "$work/vda.img" "$work/vdb.img"
echo "$cache/busybox/bin/busybox" > "$work/busybox-path"
echo "$cache" > "$work/cache-path"
disks=(--disk "$work/vda.img" --disk "$work/vdb.img")
env=()
for v in VBLKD VBMGR VB_SRCDIR; do env+=("$v=${!v}"); done
env+=("VB_BOOT_BACKEND=$backend")
env=$(printf '%q ' "${env[@]}")
boot=(--boot "$work/initrd.img" --append "root=/dev/vblk/root ro rootfstype=ext4 init=/sbin/init")

echo "# guest 1: the array, its root file system, the initramfs"
"$here/run" --timeout 900 "${disks[@]}" --share "$work" \
  "for m in virtio_blk loop fuse dm-mod raid0 raid1 raid10 nbd ublk_drv; do modprobe \$m; done && env $env bash $(printf '%q' "$here/boot-root-setup.sh")"
for phase in takeover clean unclean; do
  echo "# guest: boot from the vblk root on $backend ($phase)"
  "$here/run" --timeout 600 "${disks[@]}" --share "$work" "${boot[@]}" \
    "env $env bash $(printf '%q' "$here/boot-root-stage.sh") $phase"
done
echo "# booted from a vblk root on $backend three times: takeover, clean shutdown, unclean reset"
