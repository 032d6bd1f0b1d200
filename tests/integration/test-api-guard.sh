#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The API guarded method by method (issue 22): vb-api-guard.py reads the
# D-Bus XML and calls every method; each one that changes anything must
# answer NotAuthorized, each reading one must answer, and a method not
# classified fails. Three callers: nobody, whose polkit answer is a
# challenge (auth_admin) there is no agent to answer, with and without
# interactive authorization; and user daemon, whom a polkit rule answers
# "no". Nothing changes.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import gi' 2> /dev/null ||
  { echo "SKIP: /usr/bin/python3 lacks python3-gi" >&2; exit 77; }

VB_POLKIT_RULES=$T/polkit-rules
mkdir -p "$VB_POLKIT_RULES"
cat > "$VB_POLKIT_RULES/10-vblk-guard.rules" << 'EOF'
polkit.addRule(function (action, subject) {
  if (action.id.indexOf("org.vblk.") === 0 && subject.user === "daemon")
    return polkit.Result.NO;
});
EOF
chmod -R a+rX "$VB_POLKIT_RULES"
vb_setup
vb_start_daemon

# pkcheck's exit status for the caller's own process: 1 no, 2 challenge
answer_of () {
  local rc=0
  "$@" sh -c 'exec pkcheck --action-id org.vblk.manage --process $$' > /dev/null 2>&1 || rc=$?
  echo "$rc"
}
vb_log "polkit's answers: a challenge for nobody, no for daemon, yes for root"
vb_assert_eq 2 "$(answer_of vb_as_nobody)" "pkcheck org.vblk.manage as nobody"
vb_assert_eq 1 "$(answer_of vb_as_daemon)" "pkcheck org.vblk.manage as daemon"
vb_assert_eq 0 "$(answer_of env)" "pkcheck org.vblk.manage as root"

vb_mkimg "$T/a.img" 16M
vb_mkimg "$T/b.img" 16M
vb_mkimg "$T/m0.img" 32M
vb_mkimg "$T/m1.img" 32M
vb_mkimg "$T/spare.img" 32M
vbmgr create alpha --driver file "$T/a.img"
vbmgr create beta --driver file --start "$T/b.img"
vbmgr create m --driver raid1 --backend loop --start "$T/m0.img" "$T/m1.img"
# a stopped raid1 whose components keep superblocks: what Wipe would erase
vb_mkimg "$T/w0.img" 32M
vb_mkimg "$T/w1.img" 32M
vbmgr create w --driver raid1 --backend loop --start "$T/w0.img" "$T/w1.img"
vbmgr stop w
vbmgr examine "$T/w0.img" > /dev/null || vb_fail "w0.img has no superblock for Wipe to erase"
resync=$(vbmgr jobs --json | jq -r '[.[] | select(.device == "m")] | last | .path // empty')
[ -z "$resync" ] || vbmgr wait "$resync" > /dev/null || vb_fail "the resync of m failed"
job=$(vbmgr check m)
vbmgr wait "$job" > /dev/null || vb_fail "the check of m failed"
chmod a+r "$T"/*.img
cat > "$T/fixtures.json" << EOF
{"device": "alpha", "started": "beta", "raid1": "m", "component": 1, "job": "$job",
 "image": "$T/spare.img", "socket": "$T/guard.sock", "wipe": "$T/w0.img"}
EOF
# a mark in the spare image: anything written to it changes its sum
head -c 4096 /dev/urandom | dd of="$T/spare.img" bs=4096 seek=2000 conv=notrunc status=none
sums_before=$(cd "$T" && sha256sum spare.img w0.img w1.img)
vb_snapshot
loops_before=$(losetup -nl -O NAME | sort)

guard () {
  "$@" /usr/bin/python3 "$VB_SRCDIR/tests/integration/vb-api-guard.py" \
    "$VB_SRCDIR/data/dbus/org.vblk.VBlk1.xml" "$T/fixtures.json" "${extra[@]}" > "$T/guard.out" ||
    { cat "$T/guard.out" >&2; vb_fail "$*: a method answered wrongly"; }
  tail -1 "$T/guard.out"
  vb_assert_contains "$(tail -1 "$T/guard.out")" " 0 wrong" "guard's count"
}
extra=()
vb_log "nobody (challenge, no agent)"
guard vb_as_nobody
extra=(--interactive)
vb_log "nobody asking for interactive authorization (no agent to ask)"
guard vb_as_nobody
extra=()
vb_log "daemon (polkit says no)"
guard vb_as_daemon

vb_log "nothing changed"
vb_assert_unchanged "refused calls"
vb_assert_eq "$loops_before" "$(losetup -nl -O NAME | sort)" "loop devices"
[ ! -e "$T/guard.sock" ] || vb_fail "an export's socket appeared"
vb_assert_eq "$sums_before" "$(cd "$T" && sha256sum spare.img w0.img w1.img)" \
  "the spare image and the superblocks Wipe would erase"

vb_log "the guard's own check can fail: root is allowed a check of m"
/usr/bin/python3 "$VB_SRCDIR/tests/integration/vb-api-guard.py" \
  "$VB_SRCDIR/data/dbus/org.vblk.VBlk1.xml" "$T/fixtures.json" --only Device.Check \
  > "$T/root.out" 2> "$T/root.err" && vb_fail "the guard passed for root, who may check"
vb_assert_contains "$(cat "$T/root.err")" "Device.Check" "the guard's complaint as root"
vb_log "a method the guard does not know fails it"
sed 's|<method name="Dump">|<method name="Frobnicate"><arg name="options" type="a{sv}" direction="in"/></method>&|' \
  "$VB_SRCDIR/data/dbus/org.vblk.VBlk1.xml" > "$T/more.xml"
vb_as_nobody /usr/bin/python3 "$VB_SRCDIR/tests/integration/vb-api-guard.py" "$T/more.xml" \
  "$T/fixtures.json" --only Manager.Frobnicate > "$T/more.out" 2> "$T/more.err" &&
  vb_fail "the guard passed an XML with a method it does not classify"
vb_assert_contains "$(cat "$T/more.err")" "Manager.Frobnicate: not classified" "the guard's complaint"
vb_log "ListDevices, read by nobody, says what the Device properties say, started or not"
vb_as_nobody /usr/bin/python3 - > "$T/list.out" << 'EOF' || vb_fail "ListDevices disagrees with the Device properties"
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
N, R = "org.vblk.VBlk1", "/org/vblk/VBlk1"
rows = bus.call_sync(N, R + "/Manager", N + ".Manager", "ListDevices",
                     GLib.Variant("(a{sv})", ({},)), None, 0, -1, None).unpack()[0]
objs = bus.call_sync(N, R, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects", None, None,
                     0, -1, None).unpack()[0]
want = [(p["Name"], p["Driver"], p["Backend"], p["State"], p["Size"], p["BlockDevice"], path)
        for path, ifaces in objs.items() for i, p in ifaces.items() if i == N + ".Device"]
assert sorted(rows) == sorted(want), (rows, want)
print(" ".join(sorted("%s:%s" % (r[0], r[3]) for r in rows)))
EOF
vb_assert_eq "alpha:ready beta:active m:active w:stopped" "$(cat "$T/list.out")" \
  "the devices ListDevices gave, with their states"

# root's calls started jobs on m: they end before vblkd does
for j in $(vbmgr jobs --json | jq -r '.[] | select(.state == "running") | .path'); do
  vbmgr wait "$j" > /dev/null || true
done

vb_stop_daemon
