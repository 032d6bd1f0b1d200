#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A failed leg and a leg that went away differ, also for a vblkd that did
# not see it happen (torture test, seed 407037325 at 120 s, step 263): a
# raid1 leg failed by the administrator was unplugged, vblkd was killed and
# started again, and the leg plugged back at another number was re-added by
# the policy — an administrator's failure lasts until an explicit re-add.
# Now the table says which: a slot whose disk went away is recorded missing
# (re-added when it comes back, by this vblkd or a later one), a failed one
# stays faulty wherever its disk is.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup

# (a restarted vblkd starts the device once the policy saw the legs)
vb_policy_assemble
printf 'start-degraded-after=2s\n' >> "$T/policy/50-test.rules"
vb_start_daemon

states () { vb_json r1 '[.components[].state] | join(" ")'; }
table () { vbmgr examine --json "$1" | jq -r '[.roles[].state] | join(" ")'; }
restart () {
  vb_kill_daemon
  vb_start_daemon
  vb_wait_state r1 degraded 30
}
# the policy has looked at node $1 since log line $2 (and what it decided
# has run)
policy_saw () {
  local node=$1 from=$2
  vb_wait_until 20 eval 'tail -n +"$from" "$VB_LOG" | grep -q "policy: $node: "' ||
    vb_fail "the policy never looked at $node"
  vb_wait_until 10 eval '[ "$(vb_state_of r1)" != configuring ]' || true
  sleep 1
}

for f in a b c; do vb_mkimg "$T/$f.img" 37M; done
la=$(losetup --show -f "$T/a.img")
lb=$(losetup --show -f "$T/b.img")
lc=$(losetup --show -f "$T/c.img")
vbmgr create r1 --driver raid1 --start "$la" "$lb" "$lc"
vbmgr wait r1 > /dev/null || vb_fail "initial resync"
head -c $((16 << 20)) /dev/urandom > "$T/expected"
dd if="$T/expected" of="$(vb_blockdev_of r1)" bs=1M oflag=direct status=none

vb_log "a failed by the administrator, unplugged; vblkd killed; a back at another number"
vbmgr fail r1 "$la"
vb_wait_state r1 degraded 10
losetup -d "$la"
udevadm settle
vb_assert_eq "faulty in-sync in-sync" "$(table "$lc")" "the table after a's failure and unplug"
restart
sum_a=$(sha256sum < "$T/a.img")
seen=$(wc -l < "$VB_LOG")
la2=$(losetup --show -f "$T/a.img")
udevadm settle
policy_saw "$la2" "$seen"
vb_assert_eq "faulty in-sync in-sync" "$(states)" "states with a back"
vb_assert_contains "$(tail -n +"$seen" "$VB_LOG" | grep "policy: $la2: ")" \
  "nothing: its slot failed; it comes back only through an explicit re-add" "the policy's word on a"
vb_assert_eq "$sum_a" "$(sha256sum < "$T/a.img")" "a written while failed"
vb_assert_eq "faulty in-sync in-sync" "$(table "$lc")" "the table with a back"
cmp -n $((16 << 20)) "$T/expected" "$(vb_blockdev_of r1)" || vb_fail "data differs (a failed)"
vb_log "the explicit re-add at a's new path (the old one is another node now)"
vbmgr add r1 "$la2"
vbmgr wait r1 > /dev/null || vb_fail "a's explicit re-add"
vb_assert_eq "in-sync in-sync in-sync" "$(states)" "states after a's explicit re-add"
vb_assert_eq "$la2" "$(vb_json r1 '.components[0].source')" "a's path after its re-add"

vb_log "b unplugged while r1 runs: recorded missing; vblkd killed; b back: re-added"
losetup -d "$lb"
udevadm settle
vb_wait_until 10 eval '[ "$(vb_json r1 ".components[1].state")" = missing ]' ||
  vb_fail "b is not shown missing: $(states)"
vb_assert_eq "in-sync missing in-sync" "$(table "$lc")" "the table after b went away"
vb_assert_contains "$(cat "$VB_LOG")" "went away; recorded as missing" "vblkd's word on b"
# stopped, with a blank disk at b's number, vblkd reads the superblocks: b
# is not shown in sync (torture seed 3 at 120 s, step 47)
vb_mkimg "$T/blank.img" 37M
vb_wait_until 10 bash -c "! losetup '$lb' > /dev/null 2>&1"
losetup "$lb" "$T/blank.img"
udevadm settle
vbmgr stop r1
vb_assert_eq "in-sync missing in-sync" "$(states)" "states of the stopped r1, a blank disk at b's path"
losetup -d "$lb"
udevadm settle
vbmgr start r1
vb_wait_state r1 degraded 10
dd if="$T/expected" of="$(vb_blockdev_of r1)" bs=1M seek=16 oflag=direct status=none
restart
vb_assert_eq "in-sync missing in-sync" "$(states)" "states after the restart without b"
seen=$(wc -l < "$VB_LOG")
lb2=$(losetup --show -f "$T/b.img")
udevadm settle
policy_saw "$lb2" "$seen"
vbmgr wait r1 > /dev/null || vb_fail "b's catch-up"
vb_assert_eq "in-sync in-sync in-sync" "$(states)" "states after b came back"
vb_assert_contains "$(vb_json r1 '[.components[].source] | join(" ")')" "$lb2" "b's new path"
cmp -n $((16 << 20)) "$T/expected" "$(vb_blockdev_of r1)" || vb_fail "data differs (b back)"

# a leg that went away and came back while its device was stopped was
# assembled with it: failed later, it is the administrator's failure (the
# policy re-added it at its next event: torture seed 2583291398, step 15)
vb_log "c unplugged while r1 runs, back while r1 is stopped; failed after the start"
losetup -d "$lc"
udevadm settle
vb_wait_until 10 eval '[ "$(vb_json r1 ".components[2].state")" = missing ]' ||
  vb_fail "c is not shown missing: $(states)"
vbmgr stop r1
seen=$(wc -l < "$VB_LOG")
lc2=$(losetup --show -f "$T/c.img")
udevadm settle
policy_saw "$lc2" "$seen"
vbmgr start r1
vbmgr wait r1 > /dev/null || vb_fail "c's catch-up after the start"
vb_assert_eq "in-sync in-sync in-sync" "$(states)" "states after c came back with the start"
vbmgr fail r1 "$lc2"
vb_wait_state r1 degraded 10
seen=$(wc -l < "$VB_LOG")
udevadm trigger --action=add "$lc2"
udevadm settle
policy_saw "$lc2" "$seen"
vb_assert_eq "in-sync in-sync faulty" "$(states)" "states after an event of the failed c"
vb_assert_contains "$(tail -n +"$seen" "$VB_LOG" | grep "policy: $lc2: ")" \
  "nothing: its slot failed; it comes back only through an explicit re-add" "the policy's word on c"
vbmgr add r1 "$lc2"
vbmgr wait r1 > /dev/null || vb_fail "c's explicit re-add"
vb_assert_eq "in-sync in-sync in-sync" "$(states)" "states after c's explicit re-add"
cmp -n $((16 << 20)) "$T/expected" "$(vb_blockdev_of r1)" || vb_fail "data differs (c back)"
vbmgr stop r1
for f in a c; do
  cmp -n $((35 << 20)) <(tail -c +$(((1 << 20) + 1)) "$T/$f.img") \
    <(tail -c +$(((1 << 20) + 1)) "$T/b.img") || vb_fail "$f.img and b.img differ"
done
vbmgr delete r1
vb_stop_daemon
