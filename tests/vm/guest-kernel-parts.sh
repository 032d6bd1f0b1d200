#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Inside the VM (tests/vm/run): Debian's own kernel with the parts the
# development machines lack — md (linear, raid0/1/10/456), device-mapper
# (linear, flakey, log-writes), nbd — loaded and used for real with mdadm and dmsetup,
# and ublk_drv (built by build-cache.sh for 6.1, Debian's own in the newer
# kernel) loaded, so that the harness is
# known to give the backends what they need.
set -euo pipefail
fail () { echo "FAIL: $*" >&2; exit 1; }
log () { echo "# $*"; }

[ "${VB_IN_VM:-}" = 1 ] || fail "run me with tests/vm/run"
kver=$(uname -r)
[ -d "/lib/modules/$kver/kernel/drivers/md" ] || fail "no modules for $kver"
log "kernel $kver"
for m in md-mod raid0 raid1 raid10 raid456 dm-mod dm-flakey dm-log-writes nbd loop fuse; do
  modprobe "$m" || fail "modprobe $m"
done
# md's linear personality: Linux removed it in 6.8 (it came back as
# md-linear in 6.14, which Debian's newer kernels do not build)
personalities="raid0 raid1 raid10 raid6 raid5 raid4"
if modprobe linear 2> /dev/null || modprobe md-linear 2> /dev/null; then
  personalities="linear $personalities"
elif [ "$(printf '%s\n' "$kver" 6.8 | sort -V | head -1)" = 6.8 ]; then
  log "no md linear personality in $kver (removed in 6.8)"
else
  fail "modprobe linear"
fi
for p in $personalities; do
  grep -q "\[$p\]" /proc/mdstat || fail "md personality $p missing: $(head -1 /proc/mdstat)"
done
[ -e /dev/mapper/control ] || fail "no /dev/mapper/control"
[ -e /sys/block/nbd0 ] || fail "no nbd devices"
log "$(head -1 /proc/mdstat)"

# not in Debian 12's kernel: build-cache.sh builds it into extra/
modprobe ublk_drv || fail "modprobe ublk_drv (tests/vm/build-cache.sh builds it)"
[ "$(modinfo -F vermagic ublk_drv | cut -d' ' -f1)" = "$kver" ] || fail "ublk_drv not built for $kver"
[ -c /dev/ublk-control ] || fail "no /dev/ublk-control"
grep -q ' ublk-char$' /proc/devices || fail "ublk_drv registered no ublk-char major"
[ -d /sys/class/ublk-char ] || fail "no /sys/class/ublk-char"
[ -z "$(ls /sys/class/ublk-char)" ] || fail "ublk devices before any was added: $(ls /sys/class/ublk-char)"
: <> /dev/ublk-control || fail "cannot open /dev/ublk-control"
log "ublk_drv $(modinfo -F filename ublk_drv | sed 's|.*/lib/modules/[^/]*/||'): /dev/ublk-control $(stat -c '%Hr:%Lr' /dev/ublk-control)"

work=$(mktemp -d)
loops=()
cleanup () {
  set +e
  mdadm --stop /dev/md/vmtest 2> /dev/null
  dmsetup remove vmflakey 2> /dev/null
  dmsetup remove vmlog 2> /dev/null
  for l in "${loops[@]}"; do losetup -d "$l"; done
  rm -rf "$work"
}
trap cleanup EXIT
for i in 0 1 2 3; do
  truncate -s 64M "$work/d$i.img"
  loops+=("$(losetup --find --show "$work/d$i.img")")
done

log "md raid1 by mdadm: create, mkfs, fsck, examine"
mdadm --create /dev/md/vmtest --run --level=1 --raid-devices=2 --metadata=1.2 \
  --assume-clean "${loops[0]}" "${loops[1]}" > /dev/null 2>&1 || fail "mdadm --create"
md=$(readlink -f /dev/md/vmtest)
mkfs.ext4 -q -F "$md" || fail "mkfs on $md"
fsck.ext4 -n -f "$md" > /dev/null 2>&1 || fail "fsck on $md"
mdadm --examine "${loops[0]}" | grep -q "Version : 1.2" || fail "mdadm --examine: $(mdadm --examine "${loops[0]}")"
state=$(cat "/sys/block/${md#/dev/}/md/array_state")
case $state in clean|active) ;; *) fail "array_state $state" ;; esac
log "$md: $(cat "/sys/block/${md#/dev/}/md/level") $state, metadata $(cat "/sys/block/${md#/dev/}/md/metadata_version")"
mdadm --stop /dev/md/vmtest > /dev/null 2>&1 || fail "mdadm --stop"

log "device-mapper: flakey over a loop device fails writes on demand"
# no udevd in this test: libdevmapper makes the /dev/mapper nodes itself
export DM_DISABLE_UDEV=1
size=$(blockdev --getsz "${loops[2]}")
dmsetup create vmflakey --table "0 $size flakey ${loops[2]} 0 1 0" || fail "dmsetup create"
dd if=/dev/zero of=/dev/mapper/vmflakey bs=4k count=16 oflag=direct status=none || fail "write through flakey (up)"
dmsetup suspend vmflakey
dmsetup load vmflakey --table "0 $size flakey ${loops[2]} 0 0 1 1 error_writes"
dmsetup resume vmflakey
if dd if=/dev/zero of=/dev/mapper/vmflakey bs=4k count=1 oflag=direct status=none 2> /dev/null; then
  fail "a write through flakey with error_writes succeeded"
fi
dmsetup remove vmflakey || fail "dmsetup remove"

log "device-mapper: log-writes logs a flushed write and a mark (test-power-loss)"
dmsetup create vmlog --table "0 $size log-writes ${loops[2]} ${loops[3]}" || fail "dmsetup create log-writes"
dd if=/dev/zero of=/dev/mapper/vmlog bs=4k count=1 oflag=direct conv=fsync status=none ||
  fail "write through log-writes"
dmsetup message vmlog 0 mark m1 || fail "dmsetup message mark"
# "0 SECTORS log-writes ENTRIES HIGHEST": the write, its flush and the mark
# at least, once the target's thread has logged them
for ((i = 0; i < 50; i++)); do
  status=$(dmsetup status vmlog)
  entries=$(awk '{ print $4 }' <<< "$status")
  [ "${entries:-0}" -lt 3 ] || break
  sleep 0.1
done
[ "${entries:-0}" -ge 3 ] || fail "log-writes: status '$status', not 3 entries or more in 5 s"
dmsetup remove vmlog || fail "dmsetup remove vmlog"
log "all kernel parts present and working"
