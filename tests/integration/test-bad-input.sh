#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Every bad input of the contract is refused with its D-Bus error, a message
# naming the field, and no change: `vbmgr list --json` and state.json stay
# byte-identical and no loop device appears.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

for f in a b other w m; do
  vb_mkimg "$T/$f.img" 32M
done
vbmgr create a --driver file "$T/a.img"
vbmgr create w --driver window --attr offset=1M --attr size=4M "$T/w.img"
vbmgr start w
w_bd=$(vb_blockdev_of w)
vb_snapshot

# refuse CODE CMD... — CMD fails with CODE and changes nothing.
refuse () {
  vb_expect_fail "$@"
  vb_assert_unchanged "after '${*:2}'"
}

vb_log "names"
long=$(printf 'n%.0s' {1..65})
refuse InvalidArgument vbmgr create "$long" --driver file "$T/b.img"
vb_assert_contains "$VB_ERR" "name '${long:0:32}" "too-long name message"
vb_assert_contains "$VB_ERR" "64" "too-long name message"
for bad in 'bad/name' 'sp ace' 'colon:x' 'star*' 'ünï'; do
  refuse InvalidArgument vbmgr create "$bad" --driver file "$T/b.img"
  vb_assert_contains "$VB_ERR" "name '$bad'" "bad name message"
done
refuse InvalidArgument vbmgr create "" --driver file "$T/b.img"
vb_assert_contains "$VB_ERR" "name: must not be empty" "empty name message"

vb_log "drivers, attributes, values, components"
refuse InvalidArgument vbmgr create b --driver foo "$T/b.img"
vb_assert_contains "$VB_ERR" "driver 'foo': unknown (known: file, window, linear, raid0, raid1, raid10, faulty)" "unknown driver message"
refuse InvalidArgument vbmgr create b --driver file --attr foo=1 "$T/b.img"
vb_assert_contains "$VB_ERR" "attribute 'foo': not an attribute of driver 'file' (allowed: read_only, sector_size, engine)" \
  "unknown attribute message"
refuse InvalidArgument vbmgr create b --driver file --attr sector_size=1000 "$T/b.img"
vb_assert_contains "$VB_ERR" "attribute 'sector_size'" "sector_size message"
refuse InvalidArgument vbmgr create b --driver file --attr read_only=perhaps "$T/b.img"
vb_assert_contains "$VB_ERR" "attribute 'read_only'" "read_only message"
refuse InvalidArgument vbmgr create b --driver window --attr offset=1000 "$T/b.img"
vb_assert_contains "$VB_ERR" "attribute 'offset'" "offset message"
refuse InvalidArgument vbmgr create b --driver window --attr size=12345 "$T/b.img"
vb_assert_contains "$VB_ERR" "attribute 'size'" "size message"
refuse InvalidArgument vbmgr create b --driver file "$T/b.img" "$T/other.img"
vb_assert_contains "$VB_ERR" "components: " "too many components message"

vb_log "missing file"
refuse NotFound vbmgr create b --driver file "$T/missing.img"
vb_assert_contains "$VB_ERR" "component '$T/missing.img': No such file or directory" "missing file message"
refuse NotFound vbmgr create b --driver window vblk:nosuch

vb_log "component already used by another device"
refuse Busy vbmgr create b --driver file "$T/a.img"
vb_assert_contains "$VB_ERR" "component '$T/a.img' is already used by device 'a'" "used component message"

vb_log "a block device holding a mounted filesystem"
mkfs.ext4 -q -F "$T/m.img"
mloop=$(losetup --show -f "$T/m.img")
mkdir "$T/mnt"
mount "$mloop" "$T/mnt"
refuse WouldLoseData vbmgr create b --driver window "$mloop"
vb_assert_contains "$VB_ERR" "component '$mloop' is mounted on $T/mnt" "mounted component message"
umount "$T/mnt"
losetup -d "$mloop"

vb_log "a disk whose partition holds a mounted filesystem"
vb_mkimg "$T/p.img" 32M
printf 'label: dos\nstart=2048, size=16384, type=83\n' | sfdisk -q "$T/p.img"
ploop=$(losetup --show -f -P "$T/p.img")
udevadm settle
# a kernel without the msdos partition parser leaves partscan empty: add it by hand
[ -b "${ploop}p1" ] || partx -a "$ploop"
udevadm settle
[ -b "${ploop}p1" ] || vb_fail "no partition ${ploop}p1"
mkfs.ext4 -q -F "${ploop}p1"
mkdir "$T/pmnt"
mount "${ploop}p1" "$T/pmnt"
refuse WouldLoseData vbmgr create b --driver window "$ploop"
vb_assert_contains "$VB_ERR" "component '$ploop' is mounted on $T/pmnt" "partition-mounted message"
umount "$T/pmnt"
losetup -d "$ploop"

vb_log "duplicate name"
refuse AlreadyExists vbmgr create a --driver file "$T/other.img"
vb_assert_contains "$VB_ERR" "device 'a' already exists" "duplicate name message"

vb_log "a device built on itself"
refuse DependencyCycle vbmgr create self --driver window vblk:self
vb_assert_contains "$VB_ERR" "self" "cycle message"

vb_log "unknown devices"
refuse NotFound vbmgr start nosuch
refuse NotFound vbmgr stop nosuch
refuse NotFound vbmgr delete nosuch
refuse NotFound vbmgr set nosuch read_only=true

vb_log "bad attributes in set"
refuse InvalidArgument vbmgr set a foo=1
vb_assert_contains "$VB_ERR" "attribute 'foo'" "set unknown attribute message"
refuse InvalidArgument vbmgr set a sector_size=1000
vb_assert_contains "$VB_ERR" "attribute 'sector_size'" "set bad value message"

vb_log "attributes that cannot change while started"
refuse Busy vbmgr set w read_only=true
vb_assert_contains "$VB_ERR" "attribute 'read_only' cannot change while 'w' is started" "read_only online message"
refuse Busy vbmgr set w offset=2M
vb_assert_contains "$VB_ERR" "attribute 'offset' cannot change while 'w' is started" "offset online message"
vb_assert_eq $((4 << 20)) "$(blockdev --getsize64 "$w_bd")" "size of w after refusals"
vb_assert_eq "" "$(vb_loops_of "$T/b.img")" "loop devices over b.img"
vb_assert_eq "" "$(vb_loops_of "$T/a.img")" "loop devices over a.img"

vb_log "attributes that can change while started"
vbmgr set w size=8M
vb_assert_eq active "$(vb_state_of w)" "state of w after online resize"
vb_assert_eq "$w_bd" "$(vb_blockdev_of w)" "block node of w after online resize"
vb_assert_eq $((8 << 20)) "$(blockdev --getsize64 "$w_bd")" "size of w after online resize"
vb_assert_eq $((8 << 20)) "$(vb_state | jq -r '.devices[] | select(.name == "w") | .attributes.size')" \
  "size of w in state.json"
vbmgr start a
a_bd=$(vb_blockdev_of a)
vbmgr set a sector_size=4096
vb_assert_eq "$a_bd" "$(vb_blockdev_of a)" "block node of a after sector size change"
vb_assert_eq 4096 "$(blockdev --getss "$a_bd")" "logical sector size of a"

vb_log "bad options from a D-Bus caller that is not vbmgr"
vb_snapshot
# gdbus prints "GDBus.Error:org.vblk.VBlk1.Error.X: msg"; vb_expect_fail wants ": X:"
mgr () { vb_manager_call CreateDevice "$@"; }
refuse InvalidArgument mgr b file "{}" "['$T/b.img']" "{'start': <'yes'>}"
vb_assert_contains "$VB_ERR" "option 'start': expected type 'b', got 's'" "option type message"
refuse InvalidArgument mgr b file "{}" "['$T/b.img']" "{'colour': <true>}"
vb_assert_contains "$VB_ERR" "option 'colour': unknown" "unknown option message"
refuse InvalidArgument vb_manager_call ListDevices "{'colour': <true>}"
vb_assert_contains "$VB_ERR" "option 'colour': unknown" "unknown option of ListDevices"
refuse InvalidArgument mgr b file "{}" "['relative.img']" "{}"
vb_assert_contains "$VB_ERR" "component 'relative.img': not an absolute path" "relative path message"
refuse InvalidArgument mgr b file "{}" "['$T/b.img', '$T/b.img']" "{}"
vb_assert_contains "$VB_ERR" "given twice" "duplicate component message"

# refused before the superblocks are written: the same components serve
# the next try, and would be Busy ("carries the vblk superblock") otherwise
vb_log "backends this kernel lacks (ublk, nbd on the development machines)"
for b in ublk nbd; do
  case $b in
    ublk) [ ! -e /dev/ublk-control ] || continue; want="no /dev/ublk-control" ;;
    nbd) [ ! -d /sys/module/nbd ] || continue; want="no kernel nbd client" ;;
  esac
  refuse NotSupported vbmgr create "on$b" --driver raid1 --backend $b --start "$T/m.img" "$T/other.img"
  vb_assert_contains "$VB_ERR" "backend '$b' is not available here: $want" "$b missing message"
done

vb_log "the longest allowed name (64) is accepted"
name64=$(printf 'n%.0s' {1..64})
vbmgr create "$name64" --driver file "$T/b.img"
vb_assert_eq "$name64" "$(vb_json "$name64" .name)" "64-character name"

vb_stop_daemon
