#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A spare rule gives a device one spare, however many blank disks come in
# one batch (found by the torture test, seed 2, raid10, 120-s runs): after
# a restart, the coldplug probes every blank disk against the same state
# and decided "spare" for each; every one of them was added. The addition
# now checks again, against the state it changes.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup

mkdir -p "$T/policy"
# 39 MiB singles out this test's blank disks
cat > "$T/policy/50-test.rules" <<'EOF2'
[rule blank-spares]
match.metadata=none
match.size==39M
action=spare
devices=r1
EOF2
export VB_DAEMON_ARGS="--policy-dir $T/policy"
vb_start_daemon

for f in a0 a1; do vb_mkimg "$T/$f.img" 64M; done
vbmgr create r1 --driver raid1 --attr bitmap_chunk=1M --start "$T/a0.img" "$T/a1.img"
vbmgr wait r1 > /dev/null || vb_fail "initial resync"
vb_stop_daemon

vb_log "three blank disks attached while vblkd is away; it comes back"
blanks=()
for i in 1 2 3; do
  vb_mkimg "$T/blank$i.img" 39M
  b=$(losetup --show -f "$T/blank$i.img")
  vb_on_cleanup "losetup -d $b"
  blanks+=("$b")
done
udevadm settle --timeout=30
vb_start_daemon
spares () { vb_json r1 '[.components[] | select(.role == "spare")] | length'; }
vb_wait_until 20 eval '[ "$(spares)" -ge 1 ]' ||
  vb_fail "no blank disk became r1's spare: $(grep 'policy: ' "$VB_LOG")"
udevadm settle --timeout=30
sleep 3   # every decision of the coldplug's batch has been carried out
vb_assert_eq 1 "$(spares)" "r1's spares after the coldplug"
grep -q "has a spare now; not taken" "$VB_LOG" ||
  vb_fail "the other blank disks were not decided in one batch: $(grep 'policy: ' "$VB_LOG")"
vbmgr stop r1
vbmgr delete r1
vb_stop_daemon
