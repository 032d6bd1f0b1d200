#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The model-based torture test (DESIGN.md "Invariants of the data" and
# "Tests"; issue 15 part 3): seeded random sequences of writes, leg
# failures, stop/start, stale snapshots put back, spares, re-adds,
# reconfigurations, SIGKILL and restart, hotplug removals and returns, on
# raid1 and raid10 with and without a bitmap, each step checked against a
# reference model by torture.py. This script gives it a private bus,
# polkitd, udevd and vblkd (lib.sh) and kills, stops and starts vblkd when
# torture.py asks, over two FIFOs.
#
#   TORTURE_RUNS="SEED:KIND:BITMAP:LEGS[:WEIGHTS[:STEPS]] ..."  exactly these
#                          runs (a replay; WEIGHTS as in TORTURE_WEIGHTS,
#                          comma-separated; STEPS ends the run after that many
#                          steps if its time has not ended it first)
#   TORTURE_DURATION=S     random runs until S seconds have passed (default:
#                          one random run), after the fixed seeds
#   TORTURE_RUN_SECONDS=S  length of each run (25; 120 when TORTURE_DURATION is set)
#   TORTURE_FIXED=0        leave out the fixed seeds of tests/torture/seeds
#   TORTURE_KINDS, TORTURE_BITMAPS, TORTURE_LEGS  what random runs pick from
#                          (raid1 raid10 / internal none / file loop)
#   TORTURE_SKIP="KIND..." step or check kinds to leave out (torture.py WEIGHTS,
#                          CLAIMS, CHECKS, VARIANTS)
#   TORTURE_WEIGHTS="KIND=N ..."  change how often step kinds come (0: never)
#   TORTURE_SAVE=DIR       on failure, keep the step log and vblkd's log there
source "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"

TORTURE_DIR=$VB_SRCDIR/tests/torture
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "SKIP: the torture test needs /usr/bin/python3" >&2; exit 77; }

# on failure: logs kept if asked, and the FUSE connections of this test's
# engine mounts aborted first, so that a vblkd blocked on its own node
# (defect C) can be killed and reaped
torture_cleanup () {
  local rc=$? target dev
  set +e
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
    if [ -n "${TORTURE_SAVE:-}" ]; then
      local keep
      keep=$TORTURE_SAVE/torture-$(date +%Y%m%d-%H%M%S)-$$
      mkdir -p "$keep"
      cp "$VB_LOG" "$keep/vblkd.log" 2> /dev/null
      for dev in "$T"/run-*/steps.log; do
        [ -e "$dev" ] && cp "$dev" "$keep/$(basename "$(dirname "$dev")")-steps.log"
      done
      echo "torture: logs kept in $keep" >&2
    fi
    # the FUSE control filesystem, mounted under $T (the cleanup unmounts it)
    local ctl=$T/fusectl
    mkdir -p "$ctl" && mount -t fusectl fusectl "$ctl" 2> /dev/null
    while read -r target; do
      dev=$(mountpoint -d "$target" 2> /dev/null) || continue
      [ -e "$ctl/${dev#*:}/abort" ] && echo 1 > "$ctl/${dev#*:}/abort"
    done < <(findmnt --raw --noheadings --output TARGET,FSTYPE |
               awk -v t="$T/" 'index($1, t) == 1 && $2 ~ /^fuse/ { print $1 }')
  fi
  (exit "$rc")
  vb_cleanup
}
trap torture_cleanup EXIT

fixed=${TORTURE_FIXED:-1}
total=${TORTURE_DURATION:-0}
if [ "$total" -gt 0 ]; then
  run_seconds=${TORTURE_RUN_SECONDS:-120}
else
  run_seconds=${TORTURE_RUN_SECONDS:-25}
fi
read -r -a kinds <<< "${TORTURE_KINDS:-raid1 raid10}"
read -r -a bitmaps <<< "${TORTURE_BITMAPS:-internal none}"
read -r -a legs <<< "${TORTURE_LEGS:-file loop}"
skip=${TORTURE_SKIP:-}

runs=()
if [ -n "${TORTURE_RUNS:-}" ]; then
  read -r -a runs <<< "$TORTURE_RUNS"
  total=-1
elif [ "$fixed" != 0 ]; then
  while read -r seed kind bitmap leg weights steps _; do
    case $seed in '#'* | '') continue ;; esac
    case $weights in '#'* | '-') weights= ;; esac
    case $steps in '#'* | '-') steps= ;; esac
    runs+=("$seed:$kind:$bitmap:$leg:$weights${steps:+:$steps}")
  done < "$TORTURE_DIR/seeds"
fi

random_run () {
  local seed
  seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
  echo "$seed:${kinds[seed % ${#kinds[@]}]}:${bitmaps[seed / 2 % ${#bitmaps[@]}]}:${legs[seed / 4 % ${#legs[@]}]}"
}

# the loop devices torture.py numbered itself (tests/torture/torture_loops.py)
# are removed once the cleanup detached them, unless another took the number
torture_remove_loops () {
  local n
  sort -un "$T"/run-*/loops 2> /dev/null | while read -r n; do
    [ -e "/sys/block/loop$n/loop/backing_file" ] ||
      "$PY" -c 'import fcntl, os, sys
fd = os.open("/dev/loop-control", os.O_RDWR)
fcntl.ioctl(fd, 0x4C81, int(sys.argv[1]))' "$n" 2> /dev/null
  done
}
vb_on_cleanup torture_remove_loops

vb_setup
mkdir -p "$T/policy"
export VB_DAEMON_ARGS="--policy-dir $T/policy"
vb_start_daemon

# vb_start_daemon's start, but a vblkd that does not come up is an answer
# to torture.py (which prints the steps that led there), not an exit here
torture_start_daemon () {
  local i
  echo "=== vblkd start $(date +%T.%N)" >> "$VB_LOG"
  # shellcheck disable=SC2086 # VB_DAEMON_ARGS is split on purpose
  env G_DEBUG=fatal-criticals "$VBLKD" --state-dir "$VB_STATE_DIR" --run-dir "$VB_RUN_DIR" \
    --dev-dir "$VB_DEV_DIR" --debug ${VB_DAEMON_ARGS:-} >> "$VB_LOG" 2>&1 &
  VBLKD_PID=$!
  for ((i = 0; i < 100; i++)); do
    vb_name_has_owner "$VB_BUS_NAME" && return 0
    vb_pid_alive "$VBLKD_PID" || break
    sleep 0.1
  done
  return 1
}

# torture.py's requests, one a line: pid, kill, term, start; answers "ok ..."
serve () {
  local py=$1 line part=
  while :; do
    # a timeout in the middle of a line keeps what was read of it
    if IFS= read -r -t 1 -u 3 line; then
      line=$part$line
      part=
      case $line in
        pid) echo "ok ${VBLKD_PID:-0}" >&4 ;;
        kill) vb_kill_daemon; echo "ok" >&4 ;;
        term) vb_stop_daemon || true; echo "ok" >&4 ;;
        start)
          if torture_start_daemon; then
            echo "ok $VBLKD_PID" >&4
          else
            echo "error: vblkd did not start: $(grep -v -e '-DEBUG' -e '^$' "$VB_LOG" | tail -n 3 | tr '\n' ' ')" >&4
          fi ;;
        *) echo "error: unknown request '$line'" >&4 ;;
      esac
    else
      part+=$line
      vb_pid_alive "$py" || return 0
    fi
  done
}

n=0
start_time=$SECONDS
run_one () {
  local seed kind bitmap leg weights steps dir py rc=0
  IFS=: read -r seed kind bitmap leg weights steps <<< "$1"
  weights=${weights:-${TORTURE_WEIGHTS:-}}
  steps=${steps:-0}
  n=$((n + 1))
  dir=$T/run-$n
  mkdir -p "$dir"
  mkfifo "$dir/req" "$dir/rep"
  # read-write opens of the FIFOs do not wait for torture.py
  exec 3<> "$dir/req" 4<> "$dir/rep"
  vb_log "run $n: seed $seed, $kind, bitmap $bitmap, legs $leg, ${run_seconds}s$([ "$steps" = 0 ] || echo " or $steps steps")${skip:+, skipping: $skip}"
  "$PY" -B "$TORTURE_DIR/torture.py" --seed "$seed" --kind "$kind" --bitmap "$bitmap" --legs "$leg" \
    --duration "$run_seconds" --steps "$steps" --skip "$skip" --weights "$weights" --dir "$dir" --dev-dir "$VB_DEV_DIR" \
    --state-dir "$VB_STATE_DIR" --policy-dir "$T/policy" --vbmgr "$VBMGR" --vblkd "$VBLKD" \
    --req "$dir/req" --rep "$dir/rep" 2> >(tee "$dir/report" >&2) &
  py=$!
  VB_BG_PIDS+=("$py")
  serve "$py"
  wait "$py" || rc=$?
  exec 3>&- 4>&-
  if [ "$rc" -ne 0 ]; then
    # why, said again after the vblkd log (vb_fail): torture.py's verdict
    # or the harness's error (once tee wrote it)
    sleep 0.5
    vb_fail "torture run $n (seed $seed, $kind, bitmap $bitmap, legs $leg) failed" \
      "(status $rc: $(grep -m1 -e 'TORTURE FAILED' -e 'Error' "$dir/report" || tail -n 1 "$dir/report"))" \
      "; replay:" \
      "TORTURE_RUNS='$1'${skip:+ TORTURE_SKIP='$skip'} bash tests/torture/test-torture.sh"
  fi
}

for r in "${runs[@]}"; do
  run_one "$r"
done
if [ "$total" -eq 0 ]; then
  r=$(random_run)
  vb_log "random run: $r (replay: TORTURE_RUNS='$r')"
  run_one "$r"
elif [ "$total" -gt 0 ]; then
  while [ $((SECONDS - start_time)) -lt "$total" ]; do
    r=$(random_run)
    vb_log "random run: $r (replay: TORTURE_RUNS='$r')"
    run_one "$r"
  done
fi
vb_log "torture: $n run(s) passed in $((SECONDS - start_time)) s"
vb_stop_daemon
