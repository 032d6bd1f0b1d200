#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Suite 'vm': boot from a vblk root (issue 18). Six guests on Debian 12's
# kernel share two virtio disks:
#   1. boot-root-setup.sh: a vblk raid1 'root' on the disks with a root file
#      system; then, on the host, two initramfs images for the guest's
#      kernel: mkinitramfs with vblk's hook and local-top script
#      (boot-root-mkinitramfs.sh) and dracut with vblk's module
#      (boot-root-dracut.sh);
#   2. the first starts the array without a bus and mounts it as the
#      root, /usr the host's (boot-root-usr); a real systemd boots from it:
#      vblkd.service takes over before the root goes read-write, a file is
#      written (boot-root-systemd.sh), systemctl poweroff: vblkd stays for
#      the root, spared by the last killing spree (console, journal), and
#      systemd-shutdown runs vblk.shutdown, which settles it (console);
#   3. no resync after that shutdown; the initramfs's vblkd taken over, a
#      file written, a clean shutdown (boot-root-stage.sh takeover:
#      SIGTERM, read-only, vblk.shutdown run by the stage);
#   4. dracut's initramfs starts the root: the same takeover, no resync,
#      the file intact, a clean shutdown (dracut);
#   5. no resync after it (clean), then a reset in the middle of writes;
#   6. a resync after the reset (of the bitmap's dirty chunks only where
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
for tool in mkinitramfs dracut; do
  command -v "$tool" > /dev/null || { echo "FAIL: no $tool (tools/install-deps.sh)" >&2; exit 1; }
done
: "${VBLKD:?}" "${VBMGR:?}" "${VB_SRCDIR:?}"

work=$(mktemp -d /tmp/vblk-boot-root.XXXXXX)
trap 'rm -rf "$work"' EXIT
truncate -s 96M "$work/vda.img" "$work/vdb.img"
echo "$cache" > "$work/cache-path"
disks=(--disk "$work/vda.img" --disk "$work/vdb.img")
vars=()
for v in VBLKD VBMGR VB_SRCDIR; do vars+=("$v=${!v}"); done
vars+=("VB_BOOT_BACKEND=$backend")
env=$(printf '%q ' "${vars[@]}")
root="root=/dev/vblk/root ro rootfstype=ext4"

echo "# guest 1: the array, its root file system, the state"
"$here/run" --timeout 900 "${disks[@]}" --share "$work" \
  "for m in virtio_blk loop fuse dm-mod raid0 raid1 raid10 nbd ublk_drv; do modprobe \$m; done && env $env bash $(printf '%q' "$here/boot-root-setup.sh")"

echo "# on the host: the initramfs made by mkinitramfs with vblk's hook and local-top script"
bash "$here/boot-root-mkinitramfs.sh" "$work"
echo "# on the host: the initramfs made by dracut with vblk's module"
bash "$here/boot-root-dracut.sh" "$work"

echo "# guest 2: a real systemd from the vblk root on $backend, then poweroff"
rc=0
"$here/run" --timeout 900 "${disks[@]}" --share "$work" --boot "$work/initrd.img" \
  --append "$root init=/lib/systemd/systemd systemd.unit=vblk-boot-test.target systemd.show_status=1 systemd.log_target=console systemd.log_level=notice loglevel=6" \
  true > "$work/console" 2>&1 || rc=$?
grep "^# \|FAIL\|vblk" "$work/console" || true
[ "$rc" = 0 ] || { tail -60 "$work/console"; echo "FAIL: the systemd guest (status $rc)" >&2; exit 1; }
# what the console showed of the shutdown: vblkd, staying for the root, was
# spared by systemd-shutdown's killing spree (the next boot finds "staying
# for root" in the journal the root keeps), and vblk.shutdown, run from
# systemd's system-shutdown directory once the root was read-only, had
# vblkd settle the root (it says so in the kernel's log, shown on the
# console from level notice on: loglevel=6); the next boot (takeover)
# finds nothing to resync.
console () {
  grep -a -q "$1" "$work/console" && return
  sed 's/\x1b\[[0-9;]*[mK]//g' "$work/console" | grep -a -v " running (" | tail -50 >&2
  echo "FAIL: systemd's shutdown: $2" >&2
  exit 1
}
console "has been marked to be excluded from killing" "systemd-shutdown did not spare vblkd"
echo "# systemd's shutdown: $(grep -a -m1 -o 'Process [0-9]* ([^)]*) has been marked to be excluded from killing' "$work/console")"
console "vblk: root: settled" "vblk.shutdown did not settle the root at systemd's last step"
echo "# systemd's shutdown: $(grep -a -m1 -o 'vblk: root: settled' "$work/console") (vblk.shutdown)"

for phase in takeover dracut clean unclean; do
  echo "# guest: boot from the vblk root on $backend ($phase)"
  initrd=$work/initrd.img
  extra=
  # (dracut's emergency shell would wait for a console: power off instead;
  # its systemd-fsck-root may write to the root — e2fsck setting the
  # superblock's times right — whose chunks the takeover then resyncs,
  # where the phase checks that a clean shutdown left nothing to resync)
  [ "$phase" != dracut ] ||
    { initrd=$work/initrd-dracut.img; extra=" rd.emergency=poweroff fsck.mode=skip"; }
  "$here/run" --timeout 600 "${disks[@]}" --share "$work" --boot "$initrd" \
    --append "$root init=/opt/vblk/init$extra" "env $env bash $(printf '%q' "$here/boot-root-stage.sh") $phase"
done
echo "# booted from a vblk root on $backend: systemd, a takeover with a clean shutdown, a clean boot, an unclean reset"
