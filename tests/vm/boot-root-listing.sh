# SPDX-License-Identifier: LGPL-2.1-or-later
# test-vm-boot-root (sourced): check_listing WHAT LISTING fails (vb_fail)
# unless LISTING, an initramfs image's file list (lsinitramfs, or lsinitrd's
# long one), has vblk's files and the md and ublk modules.
check_listing () {
  local what=$1 listing=$2 f m
  for f in sbin/vblkd bin/vbmgr sbin/vblk-initramfs-start etc/vblk/initramfs-state/state.json \
    etc/vblk/initramfs-state/instance-id etc/vblk/initramfs.conf lib/udev/rules.d/64-vblk.rules; do
    grep -q "^\(.* \)\?\(usr/\)\?$f\( \|$\)" <<< "$listing" || vb_fail "$what lacks $f"
  done
  for m in raid1 ublk_drv; do
    grep -q "/$m.ko" <<< "$listing" || vb_fail "$what lacks $m.ko"
  done
}
