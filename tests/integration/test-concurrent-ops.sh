#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Ops on disjoint parts of the dependency graph run at the same time: B's
# online reconfiguration is held where its drain begins (the test hook
# VBLK_TEST_HOLD_AT holds only that op's worker), and meanwhile A's
# create, start, list, show and stop answer within the normal time, and
# udev's events about C's node (detached outside vblk) are seen; an op
# on B's own part (its stop) waits for the reconfiguration, which
# completes once let go, and state.json ends up with both devices as they
# should be.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup

NORMAL=10 # seconds: a create or start answers in well under one here
hold=$T/hold
touch "$hold"
vb_on_cleanup rm -f "$hold"
vb_start_daemon VBLK_TEST_HOLD_AT=reconfigure:intent-saved VBLK_TEST_HOLD_FILE="$hold"

for f in b1 b2 a c; do vb_mkimg "$T/$f.img" 64M; done
vbmgr create b --driver file --attr engine=true --start "$T/b1.img"

vb_bg vbmgr reconfigure b --driver raid1 --add "$T/b2.img"
reconfigure=$VB_BG_PID
vb_wait_until 20 grep -q "test hook: holding at reconfigure:intent-saved" "$VB_LOG" ||
  vb_fail "B's reconfiguration did not reach its drain"

# within SECONDS CMD... — CMD must answer (and succeed) within SECONDS
within () {
  local limit=$1
  shift
  timeout "$limit" env G_DEBUG=fatal-criticals "$VBMGR" "$@" ||
    vb_fail "'vbmgr $*' did not answer within $limit s while B's reconfiguration was held"
}

vb_log "A, another part of the graph, while B's drain is held"
within "$NORMAL" create a --driver file --attr engine=true "$T/a.img" > /dev/null
within "$NORMAL" start a
vb_assert_eq active "$(vb_state_of a)" "A's state"
names=$(within "$NORMAL" list --json | jq -r '[.[].name] | sort | join(",")')
vb_assert_eq "a,b" "$names" "the devices listed"
within "$NORMAL" show b > /dev/null
within "$NORMAL" stop a

vb_log "udev's events about C's node, detached outside vblk, are seen while B's op is held"
# (an observe op on C's part: one of the whole daemon waited for B's op)
within "$NORMAL" create c --driver file --start "$T/c.img" > /dev/null
losetup -d "$(vb_blockdev_of c)"
vb_wait_state c failed 10
within "$NORMAL" stop c
vb_pid_alive "$reconfigure" || vb_fail "B's reconfiguration ended while it was held"

vb_log "an op on B's own part waits for B's reconfiguration"
vb_bg vbmgr stop b
stopper=$VB_BG_PID
sleep 1
vb_pid_alive "$stopper" || vb_fail "a stop of B did not wait for B's reconfiguration"

rm "$hold"
wait "$reconfigure" || vb_fail "B's reconfiguration failed once let go"
wait "$stopper" || vb_fail "the stop of B after its reconfiguration failed"
vb_assert_eq raid1 "$(vb_json b .driver)" "B's driver"
vb_assert_eq stopped "$(vb_state_of b)" "B's state"
vb_assert_eq stopped "$(vb_state_of a)" "A's state"

# both ops' changes are in state.json, neither written over by the other
vb_assert_eq raid1 "$(vb_state | jq -r '.devices[] | select(.name == "b") | .driver')" \
  "B's driver in state.json"
vb_assert_eq false "$(vb_state | jq -r '.devices[] | select(.name == "a") | .started')" \
  "A in state.json"
vb_stop_daemon
vb_start_daemon
vb_assert_eq raid1 "$(vb_json b .driver)" "B's driver after a restart"
vb_assert_eq ready "$(vb_state_of a)" "A's state after a restart"
