#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The Debian package built from the tree: dpkg-buildpackage -us -uc -b on a
# copy of it, lintian on the result (no error), apt install of the .deb,
# then vblkd started the way the system would — by D-Bus activation, a
# vbmgr list on the private bus with no vblkd running — a short scenario
# against the installed binaries, and the package removed and purged:
# the user's images intact, the desired state kept (it describes the
# user's devices), nothing of the package left behind.
# Skipped where vblk is installed or its system directories exist: the test
# would not leave such a machine as it found it.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

for tool in dpkg-buildpackage dh lintian apt-get; do
  command -v "$tool" > /dev/null || { echo "SKIP: no $tool (tools/install-deps.sh)" >&2; exit 77; }
done
status=$(dpkg-query -W -f='${db:Status-Status}' vblk 2> /dev/null || true)
if [ -n "$status" ] && [ "$status" != not-installed ]; then
  echo "SKIP: a vblk package is on this machine" >&2
  exit 77
fi
# (where systemd runs, the package's maintainer scripts would start and
# enable vblkd.service on the real system)
if [ -d /run/systemd/system ]; then
  echo "SKIP: systemd runs here: installing the package would start the system's vblkd" >&2
  exit 77
fi
sysdirs=(/var/lib/vblk /run/vblk /dev/vblk /etc/vblk /usr/share/vblk)
for d in "${sysdirs[@]}"; do
  [ ! -e "$d" ] || { echo "SKIP: $d exists" >&2; exit 77; }
done

vb_log "dpkg-buildpackage on a copy of the tree"
mkdir -p "$T/pkg/vblk"
if git -C "$VB_SRCDIR" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  (cd "$VB_SRCDIR" && git ls-files -co --exclude-standard | grep -v '^build' | tar -cf - -T -) |
    tar -xf - -C "$T/pkg/vblk"
else
  tar -C "$VB_SRCDIR" --exclude='./build*' -cf - . | tar -xf - -C "$T/pkg/vblk"
fi
(cd "$T/pkg/vblk" && dpkg-buildpackage -us -uc -b > "$T/pkg/build.log" 2>&1) ||
  { tail -30 "$T/pkg/build.log" >&2; vb_fail "dpkg-buildpackage failed"; }
deb=$(ls "$T"/pkg/vblk_*_*.deb)
vb_log "built $(basename "$deb")"

vb_log "lintian"
rc=0
lintian --info "$deb" > "$T/pkg/lintian.log" 2>&1 || rc=$?
# (1: tags of level error found; more: lintian itself failed)
[ "$rc" -le 1 ] || { cat "$T/pkg/lintian.log" >&2; vb_fail "lintian failed (exit status $rc)"; }
grep -E '^[EWI]: ' "$T/pkg/lintian.log" >&2 || true
if grep -q '^E: ' "$T/pkg/lintian.log"; then
  vb_fail "lintian found errors: $(grep '^E: ' "$T/pkg/lintian.log" | tr '\n' ' ')"
fi

vb_log "apt install ./$(basename "$deb")"
# undone in this order, whatever failed: the activated vblkd ended (and
# waited for: it writes into /run/vblk as it leaves), the package purged,
# the system directories it made removed
# (the activated vblkd: the one the bus names, also when the test failed
# before it looked; ended early, before loop devices and mounts go)
pkg_vblkd=
bus_owner_pid () {
  gdbus call --system --dest org.freedesktop.DBus --object-path /org/freedesktop/DBus \
    --method org.freedesktop.DBus.GetConnectionUnixProcessID "$VB_BUS_NAME" 2> /dev/null |
    sed -n 's/^(uint32 \([0-9]*\),)$/\1/p'
}
pkg_end_vblkd () {
  [ -n "$pkg_vblkd" ] || pkg_vblkd=$(bus_owner_pid)
  if [ -n "$pkg_vblkd" ] && kill -TERM "$pkg_vblkd" 2> /dev/null; then
    vb_wait_until 30 bash -c "! kill -0 $pkg_vblkd 2> /dev/null" || kill -KILL "$pkg_vblkd"
  fi
}
pkg_cleanup () {
  dpkg --purge vblk > /dev/null 2>&1 || true
  rm -rf "${sysdirs[@]}"
}
vb_on_cleanup pkg_cleanup
vb_on_cleanup_early pkg_end_vblkd
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$deb" > "$T/pkg/install.log" 2>&1 ||
  { tail -20 "$T/pkg/install.log" >&2; vb_fail "apt install failed"; }
dpkg -L vblk > "$T/pkg/files"
for f in /usr/sbin/vblkd /usr/bin/vbmgr /usr/share/dbus-1/system.d/org.vblk.VBlk1.conf \
         /usr/share/dbus-1/system-services/org.vblk.VBlk1.service \
         /usr/share/polkit-1/actions/org.vblk.policy /lib/udev/rules.d/64-vblk.rules \
         /lib/systemd/system/vblkd.service /lib/systemd/system/vblk-check.timer \
         /usr/share/vblk/policy.d/00-defaults.rules /usr/share/man/man8/vbmgr.8.gz \
         /usr/share/man/man5/vblk.rules.5.gz /usr/share/bash-completion/completions/vbmgr \
         /usr/share/dbus-1/interfaces/org.vblk.VBlk1.xml /etc/default/vblk /etc/vblk/policy.d \
         /usr/share/locale/de/LC_MESSAGES/vblk.mo /lib/systemd/system/vblk-monitor.service \
         /usr/share/doc/vblk/dbus; do
  grep -qx "$f" "$T/pkg/files" || vb_fail "the package lacks $f"
  [ -e "$f" ] || vb_fail "$f is not installed"
done
# (the API reference, one page per interface; dh_compress packs the large ones)
vb_assert_eq 5 "$(find /usr/share/doc/vblk/dbus -name 'vblk-dbus-org.vblk.VBlk1.*.rst*' | wc -l)" \
  "the D-Bus reference's pages"
vb_assert_eq "/usr/sbin/vblkd" "$(sed -n 's/^Exec=//p' /usr/share/dbus-1/system-services/org.vblk.VBlk1.service)" \
  "the activation file's Exec"
vb_assert_contains "$(/usr/bin/vbmgr --version)" "vbmgr" "the installed vbmgr"

vb_log "D-Bus activation: vbmgr list with no vblkd running starts the installed one"
# (the installed activation file alone: no other system service is
# started by this bus)
mkdir -p "$T/services"
cp /usr/share/dbus-1/system-services/org.vblk.VBlk1.service "$T/services/"
export VB_BUS_SERVICEDIR=$T/services
vb_setup
vb_name_has_owner "$VB_BUS_NAME" && vb_fail "a vblkd owns the name before any call"
/usr/bin/vbmgr list > "$T/list.out" || vb_fail "vbmgr list (activation): $(cat "$T/dbus.log")"
pid=$(bus_owner_pid)
[ -n "$pid" ] || vb_fail "no process owns $VB_BUS_NAME after the call"
pkg_vblkd=$pid
vb_assert_eq /usr/sbin/vblkd "$(readlink "/proc/$pid/exe")" "the activated vblkd's binary"

vb_log "the installed catalogue: German with LANG=de_DE.UTF-8"
vb_assert_contains "$(LC_ALL=de_DE.UTF-8 /usr/bin/vbmgr show nosuch 2>&1 || true)" \
  "NotFound: kein Gerät namens 'nosuch'" "the installed vbmgr in German"

vb_log "a short scenario against the installed binaries"
for f in a b; do vb_mkimg "$T/$f.img" 40M; done
/usr/bin/vbmgr create pkgtest --driver raid1 --start "$T/a.img" "$T/b.img"
/usr/bin/vbmgr wait pkgtest > /dev/null || vb_fail "pkgtest's resync"
node=$(readlink -f /dev/vblk/pkgtest)
[ -b "$node" ] || vb_fail "/dev/vblk/pkgtest is no block node"
head -c $((8 << 20)) /dev/urandom > "$T/data"
dd if="$T/data" of=/dev/vblk/pkgtest bs=1M oflag=direct status=none
vb_assert_eq 0 "$(/usr/bin/vbmgr status > /dev/null; echo $?)" "vbmgr status"
/usr/bin/vbmgr stop pkgtest
[ -e /var/lib/vblk/state.json ] || vb_fail "no /var/lib/vblk/state.json"
kill -TERM "$pid"
vb_wait_until 30 bash -c "! kill -0 $pid 2> /dev/null" || vb_fail "the activated vblkd did not leave"
pkg_vblkd=

vb_log "remove and purge: the user's data and desired state stay"
sum_a=$(sha256sum < "$T/a.img")
DEBIAN_FRONTEND=noninteractive apt-get remove -y -q vblk > "$T/pkg/remove.log" 2>&1 ||
  { tail -20 "$T/pkg/remove.log" >&2; vb_fail "apt remove failed"; }
dpkg --purge vblk > "$T/pkg/purge.log" 2>&1 || { cat "$T/pkg/purge.log" >&2; vb_fail "dpkg --purge failed"; }
vb_assert_eq "$sum_a" "$(sha256sum < "$T/a.img")" "a.img after the purge"
cmp -n $((8 << 20)) "$T/data" <(tail -c +$(((1 << 20) + 1)) "$T/b.img") ||
  vb_fail "b.img does not hold what was written"
[ -e /var/lib/vblk/state.json ] || vb_fail "the purge removed the desired state"
"$VBLKD" --print-state --state-dir /var/lib/vblk | grep -q '"pkgtest"' ||
  vb_fail "the desired state lost pkgtest"
for f in /usr/sbin/vblkd /usr/bin/vbmgr /etc/default/vblk /usr/share/dbus-1/system.d/org.vblk.VBlk1.conf \
         /lib/udev/rules.d/64-vblk.rules /usr/share/vblk; do
  [ ! -e "$f" ] || vb_fail "$f is left after the purge"
done
[ -z "$(losetup -j "$T/a.img")" ] || vb_fail "a loop device is left on a.img"
vb_log "$(wc -l < "$T/pkg/files") paths in the package; lintian: $(grep -c '^[EW]: ' "$T/pkg/lintian.log" || true) errors and warnings"
