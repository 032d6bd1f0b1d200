#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# test-vm-boot-root, the guest booted into a real systemd from the vblk
# root (boot-root-setup.sh installed the units): run by
# vblk-boot-test.service once the boot reached it. vblkd.service (early,
# --takeover) took over from the initramfs's vblkd before the root went
# read-write; the system bus came and vblkd owns its name. A file is
# written, the result goes to the harness's share, and the system powers
# off: the rest (vblkd staying for the root, spared by systemd's last
# killing spree, vblk.shutdown settling it after the root went read-only)
# shows on the console, which test-vm-boot-root.sh reads.
set -uo pipefail
backend=${VB_BOOT_BACKEND:-kernel}
fail () {
  echo "FAIL: systemd ($backend): $*"
  journalctl -b -p warning -o cat | grep -v '^$' | tail -40 | sed 's/^/  journal: /'
  echo 1 > /srv/rc
  systemctl --no-block poweroff
  exit 1
}
log () { echo "# systemd ($backend): $*"; }

src=$(findmnt -n -o SOURCE /) || fail "no root"
node=$(readlink -f "$src")
[ "$(readlink -f /dev/vblk/root)" = "$node" ] || fail "/ is on $node, not on /dev/vblk/root"
findmnt -n -o OPTIONS / | grep -q '^rw' || fail "the root is not read-write: $(findmnt -n -o OPTIONS /)"
[ "$(systemctl is-active vblkd.service)" = active ] || fail "vblkd.service: $(systemctl status vblkd.service)"
main=$(systemctl show -p MainPID --value vblkd.service)
[ "$(cat /run/vblk/vblkd.pid)" = "$main" ] || fail "vblkd.pid $(cat /run/vblk/vblkd.pid) is not vblkd.service's $main"
journal=$(journalctl -b -u vblkd.service -o cat)
grep -q "taking over from vblkd" <<< "$journal" || fail "no takeover: $journal"
grep -q "ready: 1 device(s), 1 running" <<< "$journal" || fail "vblkd not ready: $journal"
# the takeover came before the root went read-write: vblkd.service ready
# (Type=notify) before systemd-remount-fs.service started
took=$(systemctl show -p ActiveEnterTimestampMonotonic --value vblkd.service)
rw=$(systemctl show -p InactiveExitTimestampMonotonic --value systemd-remount-fs.service)
log "vblkd.service ready at ${took} µs, systemd-remount-fs started at ${rw} µs (monotonic)"
[ "${took:-0}" -gt 0 ] && [ "${rw:-0}" -gt 0 ] && [ "$took" -le "$rw" ] ||
  fail "vblkd was not ready before systemd-remount-fs ($took, $rw)"
[ "$(systemctl is-active dbus.service)" = active ] || fail "no system bus"
for i in $(seq 50); do
  busctl status org.vblk.VBlk1 > /dev/null 2>&1 && break
  sleep 0.2
done
busctl status org.vblk.VBlk1 > /dev/null 2>&1 || fail "vblkd does not own org.vblk.VBlk1 on the system bus"
state=$(/opt/vblk/vbmgr show root 2>&1) || fail "vbmgr show root: $state"
log "vbmgr over the system bus: $(grep -m1 '^State' <<< "$state")"

head -c $((8 << 20)) /dev/urandom > /data
sha256sum < /data > /mnt/data.sha
echo more > /after-term
sync
log "data written; powering off"
echo 0 > /srv/rc
systemctl --no-block poweroff
