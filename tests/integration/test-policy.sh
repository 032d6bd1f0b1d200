#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The policy rules on D-Bus and in vbmgr: `policy list` shows the rules of
# --policy-dir; `policy test` decides on given properties and on real loop
# devices probed by vblkd (blank -> metadata none, ext4 -> unknown -> ignored
# by the shipped defaults, a raid1 component -> vblk -> assemble, with its
# device UUID); a broken file makes `policy reload` fail naming FILE:LINE
# and the old rules stay; SIGHUP loads a good file; nobody may test but not
# reload; `vbmgr monitor --json` streams device-appeared.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup

defaults=$VB_SRCDIR/data/policy/00-defaults.rules
[ -r "$defaults" ] || vb_fail "missing $defaults (the shipped default rules)"
mkdir -p "$T/policy"
cp "$defaults" "$T/policy/00-defaults.rules"
cat > "$T/policy/50-test.rules" << 'EOF'
# big blank ATA disks become spares of data or backup
[rule spare-pool]
match.ID_BUS=ata
match.size=>=100G
match.metadata=none
action=spare
devices=data,backup
domain=pool

# other ATA disks are left alone
[rule small-ata]
match.ID_BUS=ata
action=ignore
EOF
export VB_DAEMON_ARGS="--policy-dir $T/policy"
vb_start_daemon

# decide ARGS... — `vbmgr policy test --json ARGS...`
decide () { vbmgr policy test --json "$@" || vb_fail "vbmgr policy test $*"; }
rule_names () { vbmgr policy list --json | jq -r '[.rules[] | split(" ")[0]] | join(" ")'; }

vb_log "policy list shows the rules, in order, and the directory"
out=$(vbmgr policy list --json) || vb_fail "policy list --json"
vb_assert_eq "$T/policy" "$(jq -r .directory <<< "$out")" "the rules directory"
n_defaults=$(grep -c '^\[rule ' "$defaults")
vb_assert_eq $((n_defaults + 2)) "$(jq -r '.rules | length' <<< "$out")" "number of rules"
vb_assert_contains "$(jq -r '.rules[-2]' <<< "$out")" "spare-pool ($T/policy/50-test.rules:2)" "the spare rule"
vb_assert_contains "$(jq -r '.rules[-2]' <<< "$out")" "action=spare" "the spare rule"
text=$(vbmgr policy list) || vb_fail "policy list"
vb_assert_contains "$text" "$T/policy" "policy list text"
vb_assert_contains "$text" "small-ata" "policy list text"
old_rules=$(rule_names)

vb_log "policy test on given properties: each rule decides its own case"
out=$(decide --prop ID_BUS=ata --size 200G --metadata none)
vb_assert_eq "spare-pool spare" "$(jq -r '"\(.rule) \(.action)"' <<< "$out")" "a big blank ATA disk"
vb_assert_eq '["data","backup"] pool' "$(jq -c -r '"\(.devices | tojson) \(.domain)"' <<< "$out")" "devices and domain"
vb_assert_eq "$T/policy/50-test.rules 2" "$(jq -r '"\(.file) \(.line)"' <<< "$out")" "where the rule is"
vb_assert_eq $((200 << 30)) "$(jq -r .input.size <<< "$out")" "--size 200G"
out=$(decide --prop ID_BUS=ata --size 50G --metadata none)
vb_assert_eq "small-ata ignore" "$(jq -r '"\(.rule) \(.action)"' <<< "$out")" "a small ATA disk"
out=$(decide --prop ID_BUS=usb --size 200G --metadata none)
vb_assert_eq "null none" "$(jq -r '"\(.rule) \(.action)"' <<< "$out")" "a USB disk: no rule"
[ -n "$(jq -r .why <<< "$out")" ] || vb_fail "no rule matched, and no why"
out=$(decide --prop ID_BUS=ata --prop ID_FS_TYPE=xfs --size 200G)
vb_assert_eq "unknown ignore" "$(jq -r '"\(.input.metadata) \(.action)"' <<< "$out")" "ID_FS_TYPE: another signature"
text=$(vbmgr policy test --prop ID_BUS=ata --size 200G --metadata none) || vb_fail "policy test (text)"
vb_assert_contains "$text" "spare-pool" "policy test text"
vb_assert_contains "$text" "data, backup" "policy test text"
rc=0; vbmgr policy test --size lots 2> /dev/null || rc=$?
vb_assert_eq 2 "$rc" "--size lots is bad usage"
rc=0; vbmgr policy test 2> /dev/null || rc=$?
vb_assert_eq 2 "$rc" "policy test with nothing to test"
vb_expect_fail InvalidArgument vbmgr policy test --prop ID_BUS=ata --metadata maybe
vb_assert_contains "$VB_ERR" "metadata" "the bad option is named"
vb_expect_fail InvalidArgument vbmgr policy test "$T/policy/50-test.rules"
vb_assert_contains "$VB_ERR" "not a block device" "a regular file is not a block device"

vb_log "policy test DEVICE: vblkd probes a blank loop device"
vb_mkimg "$T/blank.img" 40M
blank=$(losetup --find --show "$T/blank.img")
udevadm settle --timeout=30
out=$(decide "$blank")
vb_assert_eq "none $((40 << 20)) $blank" "$(jq -r '"\(.input.metadata) \(.input.size) \(.input.devnode)"' <<< "$out")" "a blank loop device"
vb_assert_eq "$blank" "$(jq -r .input.properties.DEVNAME <<< "$out")" "udev properties of $blank"
vb_assert_eq "null" "$(jq -r .rule <<< "$out")" "no rule for a blank loop device"
cmp -s <(head -c 2M "$T/blank.img") <(head -c 2M /dev/zero) || vb_fail "probing wrote to $blank"
losetup -d "$blank"

vb_log "policy test DEVICE: an ext4 file system is an unknown signature, ignored by the defaults"
vb_mkimg "$T/ext4.img" 40M
mkfs.ext4 -q -F "$T/ext4.img"
ext4=$(losetup --find --show "$T/ext4.img")
udevadm settle --timeout=30
out=$(decide "$ext4")
vb_assert_eq "ext4" "$(jq -r .input.properties.ID_FS_TYPE <<< "$out")" "udev's ID_FS_TYPE of $ext4"
vb_assert_eq "unknown ignore" "$(jq -r '"\(.input.metadata) \(.action)"' <<< "$out")" "an ext4 loop device"
losetup -d "$ext4"

vb_log "policy test DEVICE: a raid1 component carries vblk metadata: assemble"
# The device is deleted first (its superblocks stay): for a device vblkd
# knows, the loop device would be a new path of its component, and the
# hotplug code would act on it.
vb_mkimg "$T/m0.img" 40M
vb_mkimg "$T/m1.img" 40M
vbmgr create gone --driver raid1 --start "$T/m0.img" "$T/m1.img"
vbmgr wait gone > /dev/null || vb_fail "resync of gone"
uuid=$(vb_json gone .uuid)
vbmgr stop gone
vbmgr delete gone
component=$(losetup --find --show --read-only "$T/m1.img")
udevadm settle --timeout=30
out=$(decide "$component")
vb_assert_eq "vblk $uuid gone" "$(jq -r '"\(.input.metadata) \(.input.device_uuid) \(.input.device_name)"' <<< "$out")" "a raid1 component"
vb_assert_eq "assemble" "$(jq -r .action <<< "$out")" "the defaults assemble vblk components"
out=$(decide "$component" --metadata none --prop ID_BUS=ata --size 1T)
vb_assert_eq "spare-pool none" "$(jq -r '"\(.rule) \(.input.metadata)"' <<< "$out")" "options take precedence over the probe"
losetup -d "$component"

vb_log "nobody may test, but not reload"
out=$(vb_as_nobody "$VBMGR" policy test --json --prop ID_BUS=ata --size 200G --metadata none) ||
  vb_fail "nobody: policy test"
vb_assert_eq "spare-pool" "$(jq -r .rule <<< "$out")" "nobody's policy test"
vb_expect_fail NotAuthorized vb_as_nobody "$VBMGR" policy reload

vb_log "a broken file: reload fails naming FILE:LINE, the old rules stay"
cat > "$T/policy/60-broken.rules" << 'EOF'
[rule fine]
action=ignore

[rule broken]
match.size=>=lots
action=spare
EOF
vb_expect_fail InvalidArgument vbmgr policy reload
vb_assert_contains "$VB_ERR" "$T/policy/60-broken.rules:5" "the reload error"
vb_assert_eq "$old_rules" "$(rule_names)" "the rules after a failed reload"
out=$(decide --prop ID_BUS=ata --size 200G --metadata none)
vb_assert_eq "spare-pool" "$(jq -r .rule <<< "$out")" "decisions after a failed reload"

vb_log "SIGHUP with a good file: the new rules"
cat > "$T/policy/60-broken.rules" << 'EOF'
[rule usb-spares]
match.ID_BUS=usb
action=spare
devices=backup
EOF
kill -HUP "$VBLKD_PID"
vb_wait_until 10 eval '[ "$(rule_names)" = "$old_rules usb-spares" ]' ||
  vb_fail "SIGHUP: rules $(rule_names), expected '$old_rules usb-spares'"
out=$(decide --prop ID_BUS=usb --size 200G --metadata none)
vb_assert_eq "usb-spares spare" "$(jq -r '"\(.rule) \(.action)"' <<< "$out")" "the new rule decides"
vb_pid_alive "$VBLKD_PID" || vb_fail "vblkd did not survive SIGHUP"
out=$(vbmgr policy reload) || vb_fail "policy reload of good files"
vb_assert_contains "$out" "$((n_defaults + 3)) rules" "policy reload output"

vb_log "vbmgr monitor --json streams device-appeared"
vb_bg vbmgr monitor --json > "$T/monitor.out" 2> "$T/monitor.err"
monitor=$VB_BG_PID
vb_wait_until 10 grep -q listening "$T/monitor.err" ||
  vb_fail "vbmgr monitor did not start: $(cat "$T/monitor.err")"
vb_mkimg "$T/f.img" 8M
vbmgr create plain --driver file --start "$T/f.img"
appeared () { jq -e -s --arg d "$1" '[.[] | select(.kind == "device-appeared") | .device] | index($d)' "$T/monitor.out" > /dev/null; }
vb_wait_until 10 appeared plain || vb_fail "no device-appeared for plain: $(cat "$T/monitor.out")"
jq -e -s 'all(.[]; (.time | type) == "string" and (.details | type) == "object")' "$T/monitor.out" > /dev/null ||
  vb_fail "monitor lines: $(cat "$T/monitor.out")"
kill -TERM "$monitor"
rc=0; wait "$monitor" || rc=$?
vb_assert_eq 0 "$rc" "vbmgr monitor's exit status on SIGTERM"

vb_log "vbmgr monitor (text) waits for a vblkd that went away, and goes on when it is back"
vbmgr stop plain
vb_bg vbmgr monitor > "$T/monitor.txt" 2> "$T/monitor.err"
monitor=$VB_BG_PID
vb_wait_until 10 grep -q listening "$T/monitor.err" || vb_fail "vbmgr monitor did not start"
vb_stop_daemon
vb_wait_until 10 grep -q "not running" "$T/monitor.err" ||
  vb_fail "monitor did not say vblkd went away: $(cat "$T/monitor.err")"
vb_pid_alive "$monitor" || vb_fail "vbmgr monitor exited when vblkd went away"
vb_start_daemon
vb_wait_until 10 grep -q "is back" "$T/monitor.err" || vb_fail "monitor did not see vblkd back"
vbmgr start plain
vb_wait_until 10 grep -q " device-appeared plain" "$T/monitor.txt" ||
  vb_fail "no text line for plain: $(cat "$T/monitor.txt")"
kill -INT "$monitor"
rc=0; wait "$monitor" || rc=$?
vb_assert_eq 0 "$rc" "vbmgr monitor's exit status on SIGINT"

vbmgr stop plain
vbmgr delete plain
vb_stop_daemon
