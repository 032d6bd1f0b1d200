#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# vbmgr wait NAME as an mdadm user means it, and wait --state, and cancel
# (issue 19, parts 3 and 4): a resync superseded by the rebuild onto a
# spare is no failure, the wait follows the device's jobs until none runs
# and the device is whole; a device left degraded fails the wait, saying
# so; --state waits for a state without polling; a job is cancelled by
# root but not by an unprivileged user; Start, Stop and Delete are jobs.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

for f in a b s c d e; do vb_mkimg "$T/$f.img" 128M; done
fails () { # fails STATUS CMD... — CMD exits with STATUS; its stderr in VB_ERR
  local want=$1 rc=0
  shift
  "$@" > /dev/null 2> "$T/err" || rc=$?
  VB_ERR=$(cat "$T/err")
  [ "$rc" -eq "$want" ] || vb_fail "'$*': exit status $rc, expected $want: $VB_ERR"
}
vb_log "a resync superseded by a rebuild onto a spare: wait follows it"
vbmgr create r --driver raid1 --attr sync_speed_max=16M --start "$T/a.img" "$T/b.img"
vb_wait_until 10 eval '[ "$(vbmgr jobs --json | jq -r "[.[] | select(.device == \"r\" and .operation == \"resync\")][0].state")" = running ]' ||
  vb_fail "no resync of r running"
vbmgr fail r "$T/b.img"
vbmgr add r "$T/s.img" --spare
rc=0
vbmgr wait r > "$T/wait.out" 2> "$T/wait.err" || rc=$?
vb_assert_eq 0 "$rc" "exit status of wait (stderr: $(cat "$T/wait.err"))"
vb_assert_eq active "$(vb_state_of r)" "r after the wait"
vb_assert_eq "in-sync in-sync faulty" "$(vb_json r '[.components[].state] | join(" ")')" "r's components"
ops=$(vbmgr jobs --json | jq -r '[.[] | select(.device == "r") | "\(.operation):\(.state)"] | join(" ")')
vb_assert_contains "$ops" "resync:cancelled" "r's jobs"
vb_assert_contains "$ops" "rebuild:finished" "r's jobs"

vb_log "a device left degraded: wait says so"
vbmgr remove r "$T/b.img"
vbmgr fail r "$T/s.img"
fails 1 vbmgr wait r
vb_assert_contains "$VB_ERR" "no job runs, and the device is degraded" "wait on a degraded device"

vb_log "wait --state: reached, or timed out naming the state"
vbmgr wait r --state degraded --timeout 5 || vb_fail "wait --state degraded"
fails 1 vbmgr wait r --state active --timeout 0.5
vb_assert_contains "$VB_ERR" "timed out after 0.5 s: the device is degraded, not active" "the timeout"
fails 2 vbmgr wait r --state sleeping
vb_bg vbmgr wait r --state stopped --timeout 20
waiter=$VB_BG_PID
sleep 0.5
vb_pid_alive "$waiter" || vb_fail "wait --state stopped returned before the stop"
vbmgr stop r
wait "$waiter" || vb_fail "wait --state stopped after the stop"

vb_log "Device.WaitState on D-Bus: at once, after the change, timed out, refused"
wait_state () { # wait_state DEVICE STATE [TIMEOUT_MS] — as vbmgr shows errors
  local out rc=0 opts="{}"
  [ -z "${3:-}" ] || opts="{'timeout': <uint32 $3>}"
  out=$(gdbus call --system --dest org.vblk.VBlk1 --timeout 60 \
          --object-path "/org/vblk/VBlk1/devices/$1" \
          --method org.vblk.VBlk1.Device.WaitState "$2" "$opts" 2>&1) || rc=$?
  [ "$rc" -eq 0 ] ||
    { sed -E 's/.*org\.vblk\.VBlk1\.Error\.([A-Za-z]+): /gdbus: \1: /' <<< "$out" >&2; return 1; }
}
wait_state r stopped || vb_fail "WaitState of the state it is in"
vb_bg wait_state r degraded 20000
waiter=$VB_BG_PID
sleep 0.5
vb_pid_alive "$waiter" || vb_fail "WaitState degraded returned while r was stopped"
vbmgr start r
wait "$waiter" || vb_fail "WaitState degraded after the start"
vb_expect_fail Failed wait_state r active 300
vb_assert_contains "$VB_ERR" "timed out after 300 ms: device 'r' is degraded, not active" "WaitState's timeout"
vb_expect_fail InvalidArgument wait_state r sleeping
out=$(gdbus call --system --dest org.vblk.VBlk1 --object-path /org/vblk/VBlk1/devices/r \
        --method org.vblk.VBlk1.Device.WaitState active "{'timeout': <'x'>}" 2>&1) &&
  vb_fail "WaitState took a string timeout"
vb_assert_contains "$out" "InvalidArgument: option 'timeout': expected type 'u', got 's'" \
  "a string timeout"
vbmgr stop r

vb_log "cancel: not by an unprivileged user, by root"
vbmgr create c --driver raid1 --attr sync_speed_max=4M --start "$T/c.img" "$T/d.img"
job=$(vbmgr jobs --json | jq -r '[.[] | select(.device == "c" and .operation == "resync")][0].path')
number=${job##*/}
vb_expect_fail NotAuthorized vb_as_nobody "$VBMGR" cancel "$number"
vb_assert_eq running "$(vbmgr jobs --json | jq -r --arg p "$job" '.[] | select(.path == $p) | .state')" \
  "the job after nobody's cancel"
out=$(vbmgr cancel "$number")
vb_assert_contains "$out" "job $number (resync): asked to stop" "cancel"
vb_wait_until 10 eval '[ "$(vbmgr jobs --json | jq -r --arg p "$job" ".[] | select(.path == \$p) | .state")" = cancelled ]' ||
  vb_fail "the resync was not cancelled"
vb_expect_fail Busy vbmgr cancel "$number"
vb_expect_fail NotFound vbmgr cancel 999
fails 2 vbmgr cancel x1
vbmgr stop c
vbmgr delete c
vbmgr create e --driver linear "$T/e.img"
vbmgr start e
ops=$(vbmgr jobs --json | jq -r '[.[] | select(.device == "c" or .device == "e") |
  "\(.operation):\(.state):\(.cancelable):\(.started_by_uid)"] | join(" ")')
vb_assert_eq "resync:cancelled:true:0 stop:finished:false:0 delete:finished:false:0 start:finished:false:0" \
  "$ops" "the jobs of c and e"
vb_log "ok"
