#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The policy engine never takes vblk's own block nodes for blank disks
# (issue 15, defect C): with a rule that makes every blank disk of a size a
# spare, creating devices whose nodes have that size gives them no spare
# (a device rebuilt onto its own node deadlocks; one rebuilt onto another
# device's node overwrites it), `vbmgr policy test` says why, and a real
# blank disk of that size still becomes a spare and takes a failed leg's
# place. Sizes single out this test's loop devices.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup

mkdir -p "$T/policy"
# legs of 38 MiB give nodes of 37 MiB (the superblock area is 1 MiB): the
# first rule matches every node, the second the blank disk of a leg's size
cat > "$T/policy/50-test.rules" <<'EOF'
[rule node-sized]
match.metadata=none
match.size==37M
action=spare
devices=r1,r2,r3

[rule leg-sized]
match.metadata=none
match.size==38M
action=spare
devices=r1
EOF
export VB_DAEMON_ARGS="--policy-dir $T/policy"
vb_start_daemon

for f in a0 a1 b0 b1 c0 c1; do vb_mkimg "$T/$f.img" 38M; done
vbmgr create r1 --driver raid1 --attr bitmap_chunk=1M --start "$T/a0.img" "$T/a1.img"
vbmgr create r2 --driver raid1 --attr bitmap_chunk=1M --start "$T/b0.img" "$T/b1.img"
vbmgr create r3 --driver raid1 --attr bitmap_chunk=1M --start "$T/c0.img" "$T/c1.img"
for d in r1 r2 r3; do
  vbmgr wait "$d" > /dev/null
  vb_assert_eq $((37 << 20)) "$(vb_json "$d" .size)" "$d's size (the rule's)"
  dd if=/dev/urandom of="$T/$d.bin" bs=1M count=37 status=none
  dd if="$T/$d.bin" of="$(vb_blockdev_of "$d")" bs=1M oflag=direct status=none
done
udevadm settle --timeout=30
sleep 1.5   # the policy's coalescing delay and probe

spares () { vb_json "$1" '[.components[] | select(.role == "spare")] | length'; }
for d in r1 r2 r3; do
  vb_assert_eq 0 "$(spares "$d")" "spares of $d (vblk's own nodes are no blank disks)"
  out=$(vbmgr policy test "$(vb_blockdev_of "$d")" --json)
  vb_assert_eq none "$(jq -r .action <<< "$out")" "policy test of $d's node"
  vb_assert_contains "$(jq -r .why <<< "$out")" "a block node vblk made" "policy test of $d's node"
done
grep -q "policy: .*: spare" "$VB_LOG" && vb_fail "the policy took a disk as a spare: $(grep 'policy: ' "$VB_LOG")"

vb_log "a real blank disk of that size is still taken, and replaces a failed leg"
vb_mkimg "$T/blank.img" 38M
blank=$(losetup --show -f "$T/blank.img")
vb_on_cleanup "losetup -d $blank"
vb_wait_until 15 eval '[ "$(spares r1)" = 1 ]' ||
  vb_fail "the blank disk $blank did not become r1's spare: $(grep 'policy: ' "$VB_LOG")"
vb_assert_eq "$blank" "$(vb_json r1 '.components[] | select(.role == "spare") | .source')" "r1's spare"
vbmgr fail r1 "$T/a0.img"
timeout 60 "$VBMGR" wait r1 > /dev/null || vb_fail "the rebuild onto the spare did not end"
vb_assert_eq "in-sync" "$(vb_json r1 '.components[] | select(.source == "'"$blank"'") | .state')" \
  "the spare after its rebuild"
for d in r1 r2 r3; do
  cmp "$T/$d.bin" <(dd if="$(vb_blockdev_of "$d")" bs=1M count=37 iflag=direct status=none) ||
    vb_fail "$d's data changed"
done
vbmgr stop r1
vbmgr stop r2
vbmgr stop r3
vb_log "ok"
