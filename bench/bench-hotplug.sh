#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# bench-hotplug.sh: the policy engine's benchmark (not a test). Prints:
#  1. decisions per second: N blank loop devices attached in one burst, each
#     decided by a rule (ignore); from the first attach to the last
#     policy-decision event on the bus;
#  2. D-Bus latency during that burst: vbmgr list round trips (the issue's
#     target: under 100 ms);
#  3. from the udev event of a device's last component to the device
#     running: a raid1 whose two loop devices are re-attached with vblkd
#     running, repeated; median and worst.
# Usage: bash bench/bench-hotplug.sh [N_DEVICES] [ROUNDS]   (as root; builds first)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
n=${1:-300}
rounds=${2:-5}

bash "$repo/tools/install-deps.sh" > /dev/null
[ -d "$repo/build/meson-private" ] || meson setup "$repo/build" "$repo" > /dev/null
ninja -C "$repo/build" > /dev/null

export VBLKD=$repo/build/src/daemon/vblkd VBMGR=$repo/build/client/vbmgr VB_SRCDIR=$repo
export VB_REFMODEL=$repo/build/tests/tools/vb-refmodel
# the test harness brings a private bus, polkitd, udevd and cleans up
source "$repo/tests/integration/lib.sh"
vb_setup
mkdir -p "$T/policy" "$T/burst"
cat > "$T/policy/50-bench.rules" <<'EOF'
[rule bench-blank]
match.size==3M
match.metadata=none
action=ignore

[rule components]
match.metadata=vblk
action=assemble
EOF
export VB_DAEMON_ARGS="--policy-dir $T/policy"
vb_start_daemon

now_ms () { echo $(($(date +%s%N) / 1000000)); }

# --- 1 and 2: a burst ------------------------------------------------------
for ((i = 0; i < n; i++)); do truncate -s 3M "$T/burst/$i.img"; done
gdbus monitor --system --dest org.vblk.VBlk1 > "$T/monitor.log" 2>&1 &
monitor=$!
sleep 0.5
start=$(now_ms)
(for ((i = 0; i < n; i++)); do losetup -f "$T/burst/$i.img"; done) &
attacher=$!
lat=()
while vb_pid_alive "$attacher"; do
  t0=$(date +%s%N)
  vbmgr list > /dev/null
  lat+=($((($(date +%s%N) - t0) / 1000000)))
  sleep 0.02
done
attached=$(now_ms)
decided () { [ "$(grep -c "'policy-decision'" "$T/monitor.log")" -ge "$n" ]; }
vb_wait_until 120 decided || vb_fail "only $(grep -c "'policy-decision'" "$T/monitor.log") of $n decisions"
done_at=$(now_ms)
kill "$monitor"; wait "$monitor" 2> /dev/null || true
sorted=$(printf '%s\n' "${lat[@]}" | sort -n)
median=$(sed -n "$(((${#lat[@]} + 1) / 2))p" <<< "$sorted")
worst=$(tail -1 <<< "$sorted")

# --- 1b: the same devices present when vblkd starts (coldplug): the engine's
# own rate, not the attach rate of losetup ----------------------------------
vb_stop_daemon
mark=$(wc -l < "$VB_LOG")
cold_start=$(now_ms)
vb_start_daemon
cold_decided () { [ "$(tail -n +"$mark" "$VB_LOG" | grep -c 'policy: /dev/loop.*bench-blank')" -ge "$n" ]; }
vb_wait_until 120 cold_decided || vb_fail "coldplug: not every device was decided"
cold_done=$(now_ms)

# --- 3: last component -> device running ------------------------------------
vb_mkimg "$T/a.img" 64M
vb_mkimg "$T/b.img" 64M
la=$(losetup --show -f "$T/a.img")
lb=$(losetup --show -f "$T/b.img")
vbmgr create m --driver raid1 --start "$la" "$lb"
vbmgr wait m > /dev/null
times=()
for ((r = 0; r < rounds; r++)); do
  vb_stop_daemon
  losetup -d "$la" "$lb"
  vb_start_daemon
  la=$(losetup --show -f "$T/a.img")
  sleep 1
  t0=$(date +%s%N)
  lb=$(losetup --show -f "$T/b.img")
  vb_wait_until 30 eval '[ "$(vb_json m .state)" = active ]' || vb_fail "m did not start"
  times+=($((($(date +%s%N) - t0) / 1000000)))
done
tsorted=$(printf '%s\n' "${times[@]}" | sort -n)
tmedian=$(sed -n "$(((${#times[@]} + 1) / 2))p" <<< "$tsorted")
tworst=$(tail -1 <<< "$tsorted")
vbmgr stop m

echo
echo "Policy engine and hotplug ($(nproc) cores, kernel $(uname -r))"
printf '%-58s %12s\n' measure value
printf '%-58s %12s\n' "loop devices attached in the burst" "$n"
printf '%-58s %12s\n' "attach time, first to last losetup (ms)" "$((attached - start))"
printf '%-58s %12s\n' "first attach to last decision (ms)" "$((done_at - start))"
printf '%-58s %12.1f\n' "decisions per second (whole burst)" "$(awk -v n="$n" -v t="$((done_at - start))" 'BEGIN { print n * 1000 / t }')"
printf '%-58s %12s\n' "vblkd start with them present -> all decided (ms)" "$((cold_done - cold_start))"
printf '%-58s %12.1f\n' "decisions per second (coldplug, incl. vblkd start)" "$(awk -v n="$n" -v t="$((cold_done - cold_start))" 'BEGIN { print n * 1000 / t }')"
printf '%-58s %12s\n' "vbmgr list during the burst: calls" "${#lat[@]}"
printf '%-58s %12s\n' "vbmgr list during the burst: median / worst (ms)" "$median / $worst"
printf '%-58s %12s\n' "last component attached -> raid1 active: median / worst (ms)" "$tmedian / $tworst"
vb_stop_daemon
