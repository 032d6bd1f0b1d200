#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A start goes after the block events vblkd has been told of (found by the
# torture test, seed 3, 120-s runs, step 242): a stopped raid1's leg is
# unplugged, another disk takes its loop number, the leg comes back at a
# new number, and the device is started at once. The start used to find the
# old number taken by another disk and start degraded, and a spare took the
# slot, before the policy recorded where the leg was now; it waits for
# vblkd's pending udev events first (no longer than a few seconds).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup

vb_policy_assemble
vb_start_daemon

for f in a b spare; do vb_mkimg "$T/$f.img" 45M; done
vb_mkimg "$T/other.img" 13M
la=$(losetup --show -f "$T/a.img")
lb=$(losetup --show -f "$T/b.img")
ls=$(losetup --show -f "$T/spare.img")
vbmgr create r1 --driver raid1 --start "$la" "$lb"
vbmgr wait r1 > /dev/null || vb_fail "initial resync"
vbmgr add r1 "$ls" --spare
dd if=/dev/urandom of="$T/expected" bs=1M count=8 status=none
dd if="$T/expected" of="$(vb_blockdev_of r1)" bs=1M oflag=direct status=none
# the component's UUID and where it is: the desired state's
saved () { vb_state | jq -r ".devices[] | select(.name == \"r1\") | .components[] | $1"; }
ub=$(saved "select(.source == \"$lb\") | .uuid")
[ -n "$ub" ] || vb_fail "no UUID recorded for b"

for round in 1 2 3; do
  vb_log "round $round: b unplugged, another disk at its number, b back elsewhere, start at once"
  vbmgr stop r1
  old=$(saved "select(.uuid == \"$ub\") | .source")
  losetup -d "$old"
  vb_wait_until 10 bash -c "! losetup '$old' > /dev/null 2>&1"
  other=$(losetup --show -f "$T/other.img")
  [ "$other" = "$old" ] || vb_log "(the other disk is at $other, not $old)"
  lb=$(losetup --show -f "$T/b.img")
  udevadm settle
  vbmgr start r1
  vbmgr wait r1 > /dev/null || vb_fail "round $round: not in sync: $(vbmgr show r1)"
  vb_assert_eq "$lb" "$(saved "select(.uuid == \"$ub\") | .source")" "round $round: where b is now"
  vb_assert_eq "1 in-sync" "$(vb_json r1 ".components[] | select(.source == \"$lb\") | \"\(.role) \(.state)\"")" \
    "round $round: b in its slot"
  vb_assert_eq spare "$(vb_json r1 ".components[] | select(.source == \"$ls\") | .role")" \
    "round $round: the spare stays a spare"
  cmp -n $((8 << 20)) "$T/expected" "$(vb_blockdev_of r1)" || vb_fail "round $round: data differs"
  losetup -d "$other"
done
vbmgr stop r1
vbmgr delete r1
vb_stop_daemon
