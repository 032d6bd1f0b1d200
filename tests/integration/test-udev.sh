#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The system sees vblk (issue 18, part 1), with data/udev's rules in a real
# systemd-udevd: a started device's node gets its /dev/vblk/NAME and by-id
# links and UDisks' name hint from udev (vblkd's record of the node, imported
# by the rule), and they go when it stops; a block device holding a vblk superblock carries
# ID_FS_TYPE=vblk_member, ID_FS_USAGE=raid, the device's UUID, the
# component's as the sub-UUID and the device's name as the label, as blkid
# names md's members; lsblk (through the udev database) shows it. A blank
# disk gets nothing, a damaged superblock gets nothing and a message naming
# what is wrong.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup

vb_install_udev_rules
vb_start_daemon

props () { udevadm info --query=property --name="$1"; }
prop () { props "$1" | sed -n "s/^$2=//p"; }
changed () { udevadm trigger --action=change --settle "$@"; }

for f in a b blank; do vb_mkimg "$T/$f.img" 64M; done
la=$(losetup --find --show "$T/a.img")
lb=$(losetup --find --show "$T/b.img")
lblank=$(losetup --find --show "$T/blank.img")

# a name of this run's: udev's links are the host's
name=udevtest$$
vbmgr create "$name" --driver raid1 --start "$la" "$lb"
vbmgr wait "$name" > /dev/null || vb_fail "initial resync"
uuid=$(vb_json "$name" .uuid)
node=$(vb_blockdev_of "$name")
# the component's UUID: the desired state's
ua=$(vb_state | jq -r --arg n "$name" --arg s "$la" \
  '.devices[] | select(.name == $n) | .components[] | select(.source == $s) | .uuid')

vb_log "the device's node: links and hints made by udev"
udevadm settle
vb_assert_eq "$node" "$(readlink -f "/dev/vblk/$name")" "/dev/vblk/$name"
vb_assert_eq "$node" "$(readlink -f "/dev/disk/by-id/vblk-$uuid")" "/dev/disk/by-id/vblk-$uuid"
vb_assert_eq "$name" "$(prop "$node" UDISKS_NAME)" "UDISKS_NAME of $node"
vb_assert_eq device "$(prop "$node" VBLK_NODE)" "VBLK_NODE of $node"
vb_assert_eq "" "$(prop "$la" VBLK_NODE)" "VBLK_NODE of the component $la (not vblk's node)"
changed "$la" "$lb" "$lblank"

vb_log "a member: what blkid says of md's, for vblk"
vb_assert_eq vblk_member "$(prop "$la" ID_FS_TYPE)" "ID_FS_TYPE of $la"
vb_assert_eq raid "$(prop "$la" ID_FS_USAGE)" "ID_FS_USAGE of $la"
vb_assert_eq "$uuid" "$(prop "$la" ID_FS_UUID)" "ID_FS_UUID of $la (the device's)"
vb_assert_eq "$ua" "$(prop "$la" ID_FS_UUID_SUB)" "ID_FS_UUID_SUB of $la (the component's)"
vb_assert_eq "$name" "$(prop "$la" ID_FS_LABEL)" "ID_FS_LABEL of $la"
vb_assert_eq 0 "$(prop "$la" VBLK_MEMBER_ROLE)" "VBLK_MEMBER_ROLE of $la"
# systemd starts vblkd for a member that appears while it is not running
vb_assert_contains "$(prop "$la" SYSTEMD_WANTS)" vblkd.service "SYSTEMD_WANTS of $la"
vb_assert_contains " $(prop "$la" TAGS | tr : ' ') " " systemd " "udev tags of $la"
vb_assert_eq "$uuid" "$(prop "$lb" ID_FS_UUID)" "ID_FS_UUID of $lb"
# lsblk reads the udev database
vb_assert_eq "vblk_member $name" "$(lsblk --noheadings --nodeps --output FSTYPE,LABEL "$la" | xargs)" \
  "lsblk of $la"

vb_log "a blank disk: nothing"
vb_assert_eq "" "$(prop "$lblank" ID_FS_TYPE)" "ID_FS_TYPE of the blank $lblank"
vb_assert_eq "" "$(vbmgr examine --udev "$lblank")" "examine --udev of a blank disk"

vb_log "a spare is a member too"
vbmgr add "$name" "$lblank" --spare
changed "$lblank"
vb_assert_eq vblk_member "$(prop "$lblank" ID_FS_TYPE)" "ID_FS_TYPE of the spare"
vb_assert_eq spare "$(prop "$lblank" VBLK_MEMBER_ROLE)" "VBLK_MEMBER_ROLE of the spare"

vb_log "a damaged superblock: no member, and a message naming what is wrong"
vbmgr stop "$name"
udevadm settle
vb_log "stopped: the links went"
vb_assert_absent "/dev/vblk/$name" "/dev/vblk/$name after the stop"
vb_assert_absent "/dev/disk/by-id/vblk-$uuid" "the by-id link after the stop"
vb_assert_eq "" "$(ls "$VB_RUN_DIR/udev")" "udev records after the stop"
vbmgr remove "$name" "$lblank"
vb_mkimg "$T/bad.img" 64M
dd if="$T/b.img" of="$T/bad.img" bs=4096 skip=1 seek=1 count=1 conv=notrunc status=none
printf 'X' | dd of="$T/bad.img" bs=1 seek=$((4096 + 300)) conv=notrunc status=none
lbad=$(losetup --find --show "$T/bad.img")
changed "$lbad"
vb_assert_eq "" "$(prop "$lbad" ID_FS_TYPE)" "ID_FS_TYPE of a damaged superblock"
vb_expect_fail InvalidArgument vbmgr examine --udev "$lbad"
vb_assert_contains "$VB_ERR" "checksum mismatch" "examine --udev of a damaged superblock"

vb_log "members of a stopped device keep their names"
vb_assert_eq vblk_member "$(prop "$la" ID_FS_TYPE)" "ID_FS_TYPE of $la, stopped"
vbmgr delete "$name"

vb_log "a wiped member is no member any more"
vbmgr wipe "$la" > /dev/null
changed "$la"
vb_assert_eq "" "$(prop "$la" ID_FS_TYPE)" "ID_FS_TYPE of $la after vbmgr wipe"
vb_assert_eq "" "$(lsblk --noheadings --nodeps --output FSTYPE "$la" | xargs)" "lsblk of $la after the wipe"
vb_stop_daemon
