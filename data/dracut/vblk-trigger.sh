#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# dracut pre-trigger hook of the vblk module (sourced): once udev settled
# after the coldplug, the initqueue runs vblk-initramfs-start (the
# initramfs's vblkd); the initqueue, or systemd, waits for each device's
# /dev/vblk link before the root is mounted. rd.vblk=0: nothing is started.
VBLK_DEVICES=
[ -r /etc/vblk/initramfs.conf ] && . /etc/vblk/initramfs.conf
if [ -n "$VBLK_DEVICES" ] && getargbool 1 rd.vblk; then
  /sbin/initqueue --settled --onetime --unique --name vblk-start /sbin/vblk-initramfs-start
  for name in $(echo "$VBLK_DEVICES" | tr ',' ' '); do
    wait_for_dev "/dev/vblk/$name"
  done
fi
