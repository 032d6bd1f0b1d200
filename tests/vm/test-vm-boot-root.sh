#!/bin/bash
# Suite 'vm': boot from a vblk root (issue 18). Five guests on Debian 12's
# kernel share two virtio disks:
#   1. boot-root-setup.sh: a vblk raid1 'root' on the disks with a root file
#      system, and an initramfs made by mkinitramfs with vblk's hook and
#      local-top script;
#   2. that initramfs starts the array without a bus and mounts it as the
#      root, /usr the host's (boot-root-usr); a real systemd boots from it:
#      vblkd.service takes over before the root goes read-write, a file is
#      written (boot-root-systemd.sh), systemctl poweroff: vblkd stays for
#      the root, spared by the last killing spree (console, journal);
#   3. the initramfs's vblkd taken over, a file written, a clean
#      shutdown (boot-root-stage.sh takeover: SIGTERM, read-only,
#      vblk.shutdown run by the stage);
#   4. no resync after it (clean), then a reset in the middle of writes;
#   5. a resync after the reset (of the bitmap's dirty chunks only where
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
echo "$cache" > "$work/cache-path"
disks=(--disk "$work/vda.img" --disk "$work/vdb.img")
env=()
for v in VBLKD VBMGR VB_SRCDIR; do env+=("$v=${!v}"); done
env+=("VB_BOOT_BACKEND=$backend")
env=$(printf '%q ' "${env[@]}")
root="root=/dev/vblk/root ro rootfstype=ext4"

echo "# guest 1: the array, its root file system, the initramfs"
"$here/run" --timeout 900 "${disks[@]}" --share "$work" \
  "for m in virtio_blk loop fuse dm-mod raid0 raid1 raid10 nbd ublk_drv; do modprobe \$m; done && env $env bash $(printf '%q' "$here/boot-root-setup.sh")"

echo "# guest 2: a real systemd from the vblk root on $backend, then poweroff"
rc=0
"$here/run" --timeout 900 "${disks[@]}" --share "$work" --boot "$work/initrd.img" \
  --append "$root init=/lib/systemd/systemd systemd.unit=vblk-boot-test.target systemd.show_status=1 systemd.log_target=console systemd.log_level=notice" \
  true > "$work/console" 2>&1 || rc=$?
grep "^# \|FAIL\|vblk" "$work/console" || true
[ "$rc" = 0 ] || { tail -60 "$work/console"; echo "FAIL: the systemd guest (status $rc)" >&2; exit 1; }
# what the console showed of the shutdown: vblkd, staying for the root, was
# spared by systemd-shutdown's killing spree (the next boot finds "staying
# for root" in the journal the root keeps). systemd-shutdown here does not
# run the hooks of /lib/systemd/system-shutdown (neither vblk.shutdown nor
# a probe that only writes to /dev/kmsg ran; /usr, where they are, is this
# test's overlay and stays mounted): the takeover guest next runs
# vblk.shutdown itself, as the last step of its clean shutdown.
console () {
  grep -a -q "$1" "$work/console" && return
  sed 's/\x1b\[[0-9;]*[mK]//g' "$work/console" | grep -a -v " running (" | tail -50 >&2
  echo "FAIL: systemd's shutdown: $2" >&2
  exit 1
}
console "has been marked to be excluded from killing" "systemd-shutdown did not spare vblkd"
echo "# systemd's shutdown: $(grep -m1 -o 'Process [0-9]* ([^)]*) has been marked to be excluded from killing' "$work/console")"

for phase in takeover clean unclean; do
  echo "# guest: boot from the vblk root on $backend ($phase)"
  "$here/run" --timeout 600 "${disks[@]}" --share "$work" --boot "$work/initrd.img" \
    --append "$root init=/opt/vblk/init" "env $env bash $(printf '%q' "$here/boot-root-stage.sh") $phase"
done
echo "# booted from a vblk root on $backend: systemd, a takeover with a clean shutdown, a clean boot, an unclean reset"
