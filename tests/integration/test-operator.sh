#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The operator's commands (issue 21): vbmgr status and its exit statuses
# for ok, degraded and failed devices; vbmgr drivers and backends; vbmgr
# monitor --program running a command with the event's fields, also as
# vblk-monitor.service runs it; the monthly
# check's service (vblk-check.service) starting a check of every redundant
# device; the systemd units pass systemd-analyze verify.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

# status_rc ARGS... — vbmgr status's exit status; its output in $T/status.out
status_rc () {
  local rc=0
  vbmgr status "$@" > "$T/status.out" 2>&1 || rc=$?
  echo "$rc"
}
line_of () { grep "^$1 " "$T/status.out" | tr -s ' '; }

vb_log "no device: ok"
vb_assert_eq 0 "$(status_rc)" "status with no device"

vb_log "drivers and backends"
drivers=$(vbmgr drivers --json)
vb_assert_eq true "$(jq 'has("raid1") and has("linear") and has("file")' <<< "$drivers")" "drivers listed"
vb_assert_eq true "$(jq '[.raid1[] | select(.name == "bitmap")] | length == 1' <<< "$drivers")" \
  "raid1's bitmap attribute"
text=$(vbmgr drivers)
vb_assert_contains "$text" "raid1" "vbmgr drivers"
vb_assert_contains "$(grep -A30 '^raid1$' <<< "$text")" "bitmap" "raid1's attributes in the table"
backends=$(vbmgr backends --json)
vb_assert_eq true "$(jq '.loop.available' <<< "$backends")" "loop available here"
# this machine has no ublk_drv: said, with the reason
if [ ! -e /dev/ublk-control ]; then
  vb_assert_eq false "$(jq '.ublk.available' <<< "$backends")" "ublk without /dev/ublk-control"
  [ -n "$(jq -r '.ublk.reason' <<< "$backends")" ] || vb_fail "no reason given for ublk"
  vb_assert_contains "$(vbmgr backends | grep '^ublk ')" " no " "ublk's row"
fi

for f in a b c d; do vb_mkimg "$T/$f.img" 24M; done
vbmgr create r1 --driver raid1 --start "$T/a.img" "$T/b.img"
vbmgr wait r1 > /dev/null || vb_fail "r1's resync"
vbmgr create lin --driver linear --start "$T/c.img"
vbmgr create lin2 --driver linear --start "$T/d.img"

vb_log "every device ok: exit 0"
vb_assert_eq 0 "$(status_rc)" "status, all ok"
vb_assert_eq "r1 active ok" "$(line_of r1)" "r1's line"
vb_assert_eq "lin active ok" "$(line_of lin)" "lin's line"

vb_log "a leg failed: exit 3, the leg named"
vbmgr fail r1 "$T/a.img"
vb_wait_state r1 degraded 10
vb_assert_eq 3 "$(status_rc)" "status with r1 degraded"
vb_assert_contains "$(line_of r1)" "r1 degraded degraded $T/a.img (0) faulty" "r1's line"
vb_assert_eq 0 "$(status_rc lin)" "status of lin alone"
vb_assert_eq degraded "$(vbmgr status --json r1 | jq -r '.[0].health')" "r1's health in JSON"
vb_assert_eq 1 "$(status_rc nosuch)" "status of an unknown device"
vb_assert_contains "$(cat "$T/status.out")" "NotFound" "status of an unknown device"
vb_assert_eq 2 "$(status_rc --bogus)" "status with a bad option"

vb_log "a device that cannot start: exit 4"
vbmgr stop lin
rm "$T/c.img"
vbmgr start lin > /dev/null 2>&1 && vb_fail "lin started without its component"
vb_assert_eq 4 "$(status_rc)" "status with lin failed"
vb_assert_contains "$(line_of lin)" "failed" "lin's line"
vb_assert_eq 4 "$(status_rc lin r1)" "status of lin and r1"
vb_assert_eq 3 "$(status_rc r1)" "status of r1 alone"

vb_log "monitor --program: the event's fields, in order"
prog='env | grep "^VBLK_" | sort > "$EVDIR/env.$VBLK_EVENT"; echo "$@" > "$EVDIR/args.$VBLK_EVENT"'
mkdir "$T/ev"
EVDIR=$T/ev vb_bg vbmgr monitor --program "$prog" 2> "$T/monitor.err" > "$T/monitor.out"
monitor=$VB_BG_PID
vb_wait_until 10 grep -q "listening" "$T/monitor.err" || vb_fail "monitor did not start"
vbmgr add r1 "$T/a.img"
vbmgr wait r1 > /dev/null || vb_fail "a's re-add"
vbmgr fail r1 "$T/b.img"
vb_wait_until 10 test -s "$T/ev/args.component-failed" || vb_fail "no program run for component-failed"
vb_assert_eq "component-failed r1 $T/b.img" "$(cat "$T/ev/args.component-failed")" "the program's arguments"
env_cf=$(cat "$T/ev/env.component-failed")
vb_assert_contains "$env_cf" "VBLK_DEVICE=r1" "the program's environment"
vb_assert_contains "$env_cf" "VBLK_SOURCE=$T/b.img" "the program's environment"
vb_assert_contains "$env_cf" "VBLK_COMPONENT=1" "the program's environment"
vb_assert_contains "$env_cf" "VBLK_LINE=" "the program's environment"
[ -s "$T/ev/args.rebuild-finished" ] || vb_fail "no program run for the re-add's rebuild-finished"
vb_assert_contains "$(cat "$T/monitor.out")" "component-failed r1" "monitor's own line"
kill "$monitor"
wait "$monitor" || vb_fail "monitor's exit status after SIGTERM"

vb_log "vblk-monitor.service's command, with VBLK_MONITOR_PROGRAM as /etc/default/vblk sets it"
unit=$(dirname "$VBMGR")/../data/vblk-monitor.service
# the unit's shell script ($$ is systemd's $), with this build's vbmgr
script=$(sed -n "s/^ExecStart=\/bin\/sh -c '\(.*\)'\$/\1/p" "$unit" | sed 's/\$\$/$/g' |
  sed "s|exec [^ ]*/vbmgr |exec $VBMGR |")
vb_assert_contains "$script" "monitor \${VBLK_MONITOR_PROGRAM:+--program" "the unit's command"
vb_bg env VBLK_MONITOR_PROGRAM='echo "$VBLK_EVENT $VBLK_DEVICE" >> '"$T/service.log" \
  /bin/sh -c "$script" 2> "$T/service.err"
service=$VB_BG_PID
vb_wait_until 10 grep -q "listening" "$T/service.err" || vb_fail "the service's monitor did not start"

vb_log "the monthly check's service: a check of every redundant device"
vbmgr add r1 "$T/b.img"
vbmgr wait r1 > /dev/null || vb_fail "b's re-add"
vb_wait_until 10 grep -qx "rebuild-finished r1" "$T/service.log" ||
  vb_fail "the service's program did not run for rebuild-finished: $(cat "$T/service.log" 2> /dev/null)"
kill "$service"
wait "$service" || vb_fail "the service's monitor after SIGTERM"
unit=$(dirname "$VBMGR")/../data/vblk-check.service
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
vb_assert_eq "vbmgr check --all" "$(basename "${exec_start%% *}") ${exec_start#* }" "the service's command"
# shellcheck disable=SC2086 # the unit's arguments, split as systemd does
out=$(vbmgr ${exec_start#* })
job=$(sed -n 's/^r1: //p' <<< "$out")
[ -n "$job" ] || vb_fail "no check of r1: $out"
vb_assert_contains "$out" "lin2: skipped: " "the linear device's line"
vb_assert_not_contains "$out" "lin:" "the check of a device not running"
vbmgr wait "$job" > /dev/null || vb_fail "the check job"
vb_assert_eq 0 "$(vbmgr jobs --json | jq --arg j "$job" '.[] | select(.path == $j) | .mismatches')" \
  "the check's mismatches"

vb_log "the units pass systemd-analyze verify"
if command -v systemd-analyze > /dev/null; then
  d=$(dirname "$VBMGR")/../data
  out=$(systemd-analyze verify --man=no "$d/vblk-check.service" "$d/vblk-monitor.service" \
    "$VB_SRCDIR/data/systemd/vblk-check.timer" 2>&1 | grep -v "vblkd.service" |
    grep -v "Command .*/vbmgr is not executable" || true)
  vb_assert_eq "" "$out" "systemd-analyze verify"
fi

for d in r1 lin lin2; do vbmgr stop "$d" || true; vbmgr delete "$d"; done
vb_stop_daemon
