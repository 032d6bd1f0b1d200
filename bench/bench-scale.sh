#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# bench-scale.sh: the management plane at scale (issue 22, point 4; not a
# test). N file devices on sparse files, not started, created through
# D-Bus (bench/scale-client.py: plain Gio, one connection per client):
#  1. from one client: creates per second overall and over the last 100;
#  2. at that size: GetManagedObjects, `vbmgr list`, `vbmgr show NAME`,
#     one more create and one delete, the sizes of state.json and its
#     journal, vblkd's RSS;
#  3. vblkd restarted on that state: start-up until it owns its bus name,
#     RSS after it (against RSS after the creates: what grows per change);
#  4. the same N created by CLIENTS clients at once (a fresh state);
#  5. STARTED=S (default 0): S of them marked started in state.json and
#     vblkd restarted on it (it starts them), then the same figures with S
#     running, start-up adopting them, and 100 more starts and stops.
# Prints a table with the issue's targets beside each figure (for 10,000
# devices). Usage: [STARTED=S] bash bench/bench-scale.sh [N] [CLIENTS]  (as root; builds;
# CLIENTS=0 leaves out step 4)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
n=${1:-1000}
clients=${2:-16}

bash "$repo/tools/install-deps.sh" > /dev/null
[ -d "$repo/build/meson-private" ] || meson setup "$repo/build" "$repo" > /dev/null
ninja -C "$repo/build" > /dev/null

export VBLKD=$repo/build/src/daemon/vblkd VBMGR=$repo/build/client/vbmgr VB_SRCDIR=$repo
export VB_REFMODEL=$repo/build/tests/tools/vb-refmodel
# the tests' check that shared device configs stay unchanged costs O(N) a change
export VBLK_TEST_FROZEN=0
# the test harness brings a private bus, polkitd, udevd and cleans up
source "$repo/tests/integration/lib.sh"
vb_setup
client () { /usr/bin/python3 "$repo/bench/scale-client.py" "$@"; }
ms_since () { echo $((($(date +%s%N) - $1) / 1000000)); }
rss_mib () { awk '/^VmRSS/ { printf "%d", $2 / 1024 }' "/proc/$VBLKD_PID/status"; }
# median3 CMD... — the middle of three timings of CMD, in ms
median3 () {
  local t a=()
  for _ in 1 2 3; do
    t=$(date +%s%N)
    "$@" > /dev/null
    a+=("$(ms_since "$t")")
  done
  printf '%s\n' "${a[@]}" | sort -n | sed -n 2p
}

# objects3 — the middle of three GetManagedObjects (by their time), as
# scale-client.py prints it: OBJECTS MS WRITE_MS READ_MS BYTES
objects3 () {
  for _ in 1 2 3; do client objects; done | sort -n -k2 | sed -n 2p
}
# one_more K I — K more creates of device sI and its delete: the means, in ms
one_more () {
  for ((k = 0; k < $1; k++)); do client one "$T/img" "$2"; done |
    awk '{ c += $1; d += $2 } END { printf "%.1f %.1f\n", c / NR, d / NR }'
}

# restart_ready — vblkd stopped (if it runs) and started again: restart_ms
# until it owns its name, ready_ms until it said "ready" (its start-up op:
# every device's status and object, the starts of those marked started)
restart_ready () {
  local t starts
  if [ -n "$VBLKD_PID" ]; then vb_stop_daemon; fi
  t=$(date +%s%N)
  vb_start_daemon
  restart_ms=$(ms_since "$t")
  starts=$(grep -c '^=== vblkd start' "$VB_LOG")
  vb_wait_until 120 eval '[ "$(grep -c "vblk: ready: " "$VB_LOG")" -ge "$starts" ]' ||
    vb_fail "vblkd did not say it is ready"
  ready_ms=$(ms_since "$t")
  sleep 0.5
}

mkdir -p "$T/img"
/usr/bin/python3 -c '
import os, sys
for i in range(int(sys.argv[2]) + 2):
    with open(os.path.join(sys.argv[1], "%d.img" % i), "wb") as f:
        f.truncate(1 << 20)
' "$T/img" "$n"

# --- 1 and 2: one client ---------------------------------------------------
vb_start_daemon
t=$(date +%s%N)
client create "$T/img" 0 "$n" > "$T/one.log"
one_ms=$(ms_since "$t")
last100=$(tail -2 "$T/one.log" | awk 'NR == 1 { a = $2 } NR == 2 { printf "%.1f", 100 / ($2 - a) }')
rss_created=$(rss_mib)
read -r _ gmo gmo_write gmo_read gmo_bytes <<< "$(objects3)"
# the replies' memory, given back a moment after each (vb_objects_watch_reads)
sleep 4
rss_read=$(rss_mib)
list_ms=$(median3 "$VBMGR" list)
show_ms=$(median3 "$VBMGR" show s$((n / 2)))
read -r one_create one_delete <<< "$(one_more 10 "$n")"
state_kib=$(($(stat -c %s "$VB_STATE_FILE") / 1024))
journal_kib=$(($( (stat -c %s "$VB_STATE_JOURNAL" 2> /dev/null || echo 0)) / 1024))

# --- 3: restart on that state ----------------------------------------------
restart_ready
startup_ms=$restart_ms
startup_ready_ms=$ready_ms
rss_restarted=$(rss_mib)
vb_stop_daemon

# --- 5: STARTED of them running, on that state (STARTED=0: not run) ---------
started=${STARTED:-0}
if [ "$started" -gt 0 ]; then
  # the first STARTED marked started in the state vblkd saved, which it
  # starts as it comes up (a start through D-Bus each: minutes)
  vb_state | jq --argjson s "$started" \
    '.devices |= (to_entries | map(if .key < $s then .value.started = true else . end) | map(.value))' \
    > "$T/started.json"
  rm -f "$VB_STATE_JOURNAL"
  cp "$T/started.json" "$VB_STATE_FILE"
  restart_ready
  s_startup_ms=$restart_ms
  s_ready_ms=$ready_ms
  s_ready=$(grep "vblk: ready: " "$VB_LOG" | tail -1 | sed 's/.*ready: //')
  vb_assert_eq "$started" "$("$VBMGR" list | grep -c " active ")" "devices active after start-up"
  read -r _ s_gmo _ <<< "$(objects3)"
  s_list_ms=$(median3 "$VBMGR" list)
  read -r s_create s_delete <<< "$(one_more 20 $((n + 1)))"
  s_rss=$(rss_mib)
  restart_ready
  s_adopt_ms=$restart_ms
  s_adopt_ready_ms=$ready_ms
  s_adopted=$(grep "vblk: ready: " "$VB_LOG" | tail -1 | sed 's/.*ready: //')
  s_rss_restarted=$(rss_mib)
  # 100 more started and stopped through D-Bus, one after the other
  starts_s=$(client start "$started" 100)
  stops_s=$(client stop "$started" 100)
  vb_stop_daemon
fi

# --- 4: CLIENTS clients at once, a fresh state (CLIENTS=0: not run) ---------
many_ms=
if [ "$clients" -gt 0 ]; then
  rm -f "$VB_STATE_FILE" "$VB_STATE_JOURNAL"
  vb_start_daemon
  per=$(((n + clients - 1) / clients))
  t=$(date +%s%N)
  pids=()
  for ((c = 0; c < clients; c++)); do
    first=$((c * per))
    count=$((n - first < per ? n - first : per))
    [ "$count" -gt 0 ] || break
    client create "$T/img" "$first" "$count" > "$T/c$c.log" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  many_ms=$(ms_since "$t")
  # the desired state as vblkd loads it: state.json with its journal
  vb_assert_eq "$n" "$(vb_state | jq '.devices | length')" "devices created by $clients clients"
  vb_stop_daemon
fi

rate () { awk -v n="$1" -v ms="$2" 'BEGIN { printf "%.1f", n * 1000 / ms }'; }
echo
echo "vblk at scale: $n file devices (not started), $(nproc) CPUs, $(date -u +%F)"
printf '%-46s %14s %s\n' "what" "measured" "target (10,000 devices)"
printf '%-46s %14s %s\n' "creates, one client: total" "$((one_ms / 1000)) s" "< 60 s"
printf '%-46s %14s %s\n' "  creates per second, overall" "$(rate "$n" "$one_ms")" ">= 167"
printf '%-46s %14s %s\n' "  creates per second, the last 100" "$last100" ""
if [ -n "$many_ms" ]; then
  printf '%-46s %14s %s\n' "creates, $clients clients: total" "$((many_ms / 1000)) s" ""
  printf '%-46s %14s %s\n' "  creates per second" "$(rate "$n" "$many_ms")" ""
fi
printf '%-46s %14s %s\n' "one more create (mean of 10)" "$one_create ms" "< 20 ms"
printf '%-46s %14s %s\n' "its delete (mean of 10)" "$one_delete ms" "< 20 ms"
printf '%-46s %14s %s\n' "GetManagedObjects" "$gmo ms" "< 200 ms"
printf '%-46s %14s %s\n' "  GDBus alone: writing / reading that reply" "$gmo_write / $gmo_read ms" "$((gmo_bytes / 1024)) KiB"
printf '%-46s %14s %s\n' "vbmgr list" "$list_ms ms" "< 300 ms"
printf '%-46s %14s %s\n' "vbmgr show NAME" "$show_ms ms" "< 50 ms"
printf '%-46s %14s %s\n' "start-up with that state.json" "$startup_ms ms" "< 2000 ms"
printf '%-46s %14s %s\n' "  until it says ready" "$startup_ready_ms ms" ""
printf '%-46s %14s %s\n' "vblkd RSS after the creates" "$rss_created MiB" "< 200 MiB"
printf '%-46s %14s %s\n' "vblkd RSS 4 s after GetManagedObjects" "$rss_read MiB" ""
printf '%-46s %14s %s\n' "vblkd RSS after a restart" "$rss_restarted MiB" "the same"
printf '%-46s %14s %s\n' "state.json / state.journal" "$state_kib / $journal_kib KiB" ""
if [ "$started" -gt 0 ]; then
  echo
  echo "with $started of them started (loop devices)"
  printf '%-46s %14s %s\n' "start-up starting them: bus name" "$s_startup_ms ms" ""
  printf '%-46s %14s %s\n' "  ready, with $s_ready" "$s_ready_ms ms" ""
  printf '%-46s %14s %s\n' "GetManagedObjects" "$s_gmo ms" "< 200 ms"
  printf '%-46s %14s %s\n' "vbmgr list" "$s_list_ms ms" "< 300 ms"
  printf '%-46s %14s %s\n' "one more create / its delete (mean of 20)" "$s_create / $s_delete ms" "< 20 ms"
  printf '%-46s %14s %s\n' "vblkd RSS" "$s_rss MiB" "< 200 MiB"
  printf '%-46s %14s %s\n' "start-up adopting them: bus name" "$s_adopt_ms ms" "< 2000 ms"
  printf '%-46s %14s %s\n' "  ready, with $s_adopted" "$s_adopt_ready_ms ms" ""
  printf '%-46s %14s %s\n' "vblkd RSS after that restart" "$s_rss_restarted MiB" ""
  printf '%-46s %14s %s\n' "100 more starts, one client: per second" "$(rate 100 "$(awk -v s="$starts_s" 'BEGIN { printf "%d", s * 1000 }')")" ""
  printf '%-46s %14s %s\n' "their stops, one client: per second" "$(rate 100 "$(awk -v s="$stops_s" 'BEGIN { printf "%d", s * 1000 }')")" ""
fi
