#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# bench-reconfigure.sh: online reconfiguration's benchmark (not a test).
# In one run, on image files on the real disk, through the block node
# (fio io_uring, O_DIRECT, 4 KiB random read/write at queue depth 4):
#  1. the pause a running workload sees when the engine is swapped: fio logs
#     every I/O's latency with its completion time (--write_lat_log,
#     --log_avg_msec=0, Unix timestamps) while SWAPS swaps are made on a
#     schedule, alternately plain file -> raid1 (a second leg added, whose
#     rebuild starts at once, unthrottled) and raid1 -> plain file (that
#     leg removed again). The I/Os that completed within WINDOW ms of a
#     swap (from the start of `vbmgr reconfigure` to WINDOW ms after it
#     returned, and WINDOW ms before it) give p50/p99/p99.9/max latency and
#     the longest gap between two completions; the same figures for the
#     same fio job, as long, with no swap (the baseline, run first on the
#     plain device) and for the swap run's I/Os outside every window.
#     Ratios are against the baseline. Also the time vblkd reports it held
#     requests for each swap ("requests held N us" in its log);
#  2. the rebuild of a new leg (file -> raid1 of a 256 MiB device): its
#     throughput idle and under the same fio workload, unthrottled
#     (sync_speed_min=0, sync_speed_max=0) and with sync_speed_min (the rate
#     a rebuild keeps while the device is busy) at SYNC_MIN MiB/s, and the
#     workload's IOPS and p99 before the reconfiguration (plain device),
#     during the rebuild and after it (mirror in sync). The rebuild's time
#     is its job's own start and end (`vbmgr jobs --json`: start_time and,
#     once ended, expected_end_time).
# Prints tables; asserts nothing about timing. Takes about a minute and a half.
# Where the images share a filesystem with vblkd's state directory (the
# default), the pause also holds the journal commit that vblkd's fsync of
# the reconfiguration's intent, just before the swap, forces on that
# filesystem: the images' O_DIRECT writes wait for it, outside what vblkd
# reports as held. BENCH_IMG_DIR=/dev/shm (tmpfs) takes the images off it.
# Usage: bash bench/bench-reconfigure.sh [SWAPS] [WINDOW_MS]   (as root; builds first)
# Environment: BENCH_BUILD_DIR (default build/ in the checkout),
#   BENCH_PAUSE_MB (64: size of the device swapped), BENCH_REBUILD_MB (256),
#   BENCH_SYNC_MIN_MB (32), BENCH_SWAP_INTERVAL_MS (2500), BENCH_IMG_DIR
#   (where the image files go; default: vblkd's temporary directory);
#   VBLKD and VBMGR override the binaries.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
swaps=${1:-10}
window_ms=${2:-500}
build=${BENCH_BUILD_DIR:-$repo/build}
pause_mb=${BENCH_PAUSE_MB:-64}
rebuild_mb=${BENCH_REBUILD_MB:-256}
sync_min_mb=${BENCH_SYNC_MIN_MB:-32}
interval_ms=${BENCH_SWAP_INTERVAL_MS:-2500}
lead_ms=3000   # fio runs this long before the first swap
tail_ms=2500   # and this long after the last one is due

bash "$repo/tools/install-deps.sh" > /dev/null
[ -d "$build/meson-private" ] || meson setup "$build" "$repo" > /dev/null
ninja -C "$build" > /dev/null

export VBLKD=${VBLKD:-$build/src/daemon/vblkd} VBMGR=${VBMGR:-$build/client/vbmgr} VB_SRCDIR=$repo
# the test harness brings a private bus, polkitd, udevd and cleans up
source "$repo/tests/integration/lib.sh"
vb_setup
vb_start_daemon

# the images: on the real disk with vblkd's state directory by default, not
# tmpfs; BENCH_IMG_DIR puts them on another filesystem (a directory made in it)
if [ -n "${BENCH_IMG_DIR:-}" ]; then
  img_dir=$(mktemp -d "$BENCH_IMG_DIR/vblk-bench.XXXXXXXX")
  # shellcheck disable=SC2154 # bench_rc is set when the trap runs
  trap 'bench_rc=$?; set +e; rm -rf "$img_dir"; (exit "$bench_rc"); vb_cleanup' EXIT
else
  img_dir=$T/img
  mkdir -p "$img_dir"
fi
now_ms () { echo $(($(date +%s%N) / 1000000)); }
# sleep_until MS — until the wall clock reaches MS (ms since the epoch)
sleep_until () {
  local left=$(($1 - $(now_ms)))
  [ "$left" -le 0 ] || sleep "$(awk -v l="$left" 'BEGIN { printf "%.3f", l / 1000 }')"
}
fill () { dd if=/dev/urandom of="$1" bs=1M count="$2" status=none; }

# the workload; every I/O's total latency (ns) logged with its completion time
fio_job=(--direct=1 --ioengine=io_uring --rw=randrw --bs=4k --iodepth=4 --time_based
         --randseed=7 --log_avg_msec=0 --log_unix_epoch=1 --output-format=json)
# fio_errors JSON_FILE — fio's error code and the I/O errors it counted
fio_errors () {
  sed -n '/^{/,$p' "$1" | jq -r '.jobs[0] | "\(.error) \(.total_err // 0)"'
}

cat > "$T/lat.py" << 'EOF'
# Latency statistics from fio latency logs written with --log_avg_msec=0 and
# --log_unix_epoch=1: "time_ms, latency_ns, direction, bs, offset[, prio]".
import bisect, math, sys

SKIP_MS = 1000   # each run's first second: fio and the device warming up

def load(path):
    out = []
    with open(path) as f:
        for line in f:
            p = line.split(",")
            if len(p) >= 2:
                out.append((int(p[0]), int(p[1]) / 1000.0))
    out.sort()
    t0 = out[0][0] if out else 0
    return [x for x in out if x[0] >= t0 + SKIP_MS]

def first_time(path):
    with open(path) as f:
        return min(int(line.split(",")[0]) for line in f if "," in line)

def pct(s, q):
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))] if s else float("nan")

def stats(samples, gap=None):
    """I/Os, p50, p99, p99.9, max (us), longest completion gap (ms): of one
    stretch of time, or given for samples gathered from several."""
    lat = sorted(l for _, l in samples)
    if gap is None:
        times = [t for t, _ in samples]
        gap = max((b - a for a, b in zip(times, times[1:])), default=0)
    return (len(lat), pct(lat, .5), pct(lat, .99), pct(lat, .999),
            lat[-1] if lat else float("nan"), gap)

def between(samples, times, a, b):
    return samples[bisect.bisect_left(times, a):bisect.bisect_right(times, b)]

def ratio(a, b):
    return "%.2f" % (a / b) if b else "-"

def pause(base_log, swap_log, swaps_file, window):
    base, run = load(base_log), load(swap_log)
    times = [t for t, _ in run]
    btimes = [t for t, _ in base]
    # the baseline's clock: the same offset from the start of its run
    shift = first_time(base_log) - first_time(swap_log)
    swaps = []   # kind, t0, t1 (ms), held (us)
    with open(swaps_file) as f:
        for line in f:
            k, a, b, h = line.split()
            swaps.append((k, int(a), int(b), int(h)))
    inside = {"all": [], "add": [], "remove": [], "base": []}
    gaps = {"all": 0, "add": 0, "remove": 0, "base": 0}
    seen = set()
    per_swap = []
    for k, a, b, h in swaps:
        lo, hi = bisect.bisect_left(times, a - window), bisect.bisect_right(times, b + window)
        s = stats(run[lo:hi])
        per_swap.append((k, h, b - a, s))
        inside[k].extend(run[lo:hi])
        gaps[k] = max(gaps[k], s[5])
        gaps["all"] = max(gaps["all"], s[5])
        seen.update(range(lo, hi))
        same = between(base, btimes, a - window + shift, b + window + shift)
        inside["base"].extend(same)
        gaps["base"] = max(gaps["base"], stats(same)[5])
    inside["all"] = [run[i] for i in sorted(seen)]
    outside = [x for i, x in enumerate(run) if i not in seen]
    out_gap = max((run[i + 1][0] - run[i][0] for i in range(len(run) - 1)
                   if i not in seen and i + 1 not in seen), default=0)
    b = stats(base)
    print("\nPause around a swap: fio randrw 4k QD4, io_uring, O_DIRECT, on the block node; "
          "latency in us, gap: longest time without a completion (ratios: / baseline run)")
    fmt = "%-46s %7s %7s %8s %8s %9s %7s %6s %6s %6s"
    print(fmt % ("I/Os that completed", "I/Os", "p50", "p99", "p99.9", "max", "gap-ms",
                 "p50x", "p99x", "maxx"))
    rows = [("baseline run, no swap (plain device)", base, None),
            ("baseline run, the swaps' windows' times", inside["base"], gaps["base"]),
            ("swap run, outside every window", outside, out_gap),
            ("swap run, within %d ms of any swap" % window, inside["all"], gaps["all"]),
            ("  ... of a plain -> raid1 swap (+ rebuild)", inside["add"], gaps["add"]),
            ("  ... of a raid1 -> plain swap", inside["remove"], gaps["remove"])]
    for name, sel, gap in rows:
        s = stats(sel, gap)
        print(fmt % (name, s[0], "%.0f" % s[1], "%.0f" % s[2], "%.0f" % s[3], "%.0f" % s[4],
                     s[5], ratio(s[1], b[1]), ratio(s[2], b[2]), ratio(s[4], b[4])))
    print("\nEach swap (held: vblkd's 'requests held' for it; call: vbmgr reconfigure's "
          "round trip; latency in us of the I/Os in its window; base-max: the baseline run's "
          "max in the same window)")
    fmt = "%-4s %-14s %9s %8s %7s %7s %8s %9s %7s %9s"
    print(fmt % ("#", "swap", "held-us", "call-ms", "I/Os", "p50", "p99", "max", "gap-ms",
                 "base-max"))
    for i, (k, h, call, s) in enumerate(per_swap, 1):
        a, c = swaps[i - 1][1], swaps[i - 1][2]
        bm = stats(between(base, btimes, a - window + shift, c + window + shift))[4]
        print(fmt % (i, "plain -> raid1" if k == "add" else "raid1 -> plain", h, call, s[0],
                     "%.0f" % s[1], "%.0f" % s[2], "%.0f" % s[4], s[5], "%.0f" % bm))
    for k, name in (("all", "all swaps"), ("add", "plain -> raid1"), ("remove", "raid1 -> plain")):
        held = sorted(h for kk, _, _, h in swaps if k == "all" or kk == k)
        calls = sorted(c for kk, _, c, _ in per_swap if k == "all" or kk == k)
        mx = sorted(s[4] for kk, _, _, s in per_swap if k == "all" or kk == k)
        if held:
            print("%-15s held (us) min %5d median %5d max %5d; call (ms) median %4d; "
                  "window max latency (us) median %6.0f max %6.0f"
                  % (name + ":", held[0], pct(held, .5), held[-1], pct(calls, .5),
                     pct(mx, .5), mx[-1]))

def windows(log, spec):
    """spec: label:start_ms:end_ms,... -> one line per window:
    label seconds I/Os IOPS p50 p99 max"""
    run = load(log)
    times = [t for t, _ in run]
    for w in spec.split(","):
        label, a, b = w.split(":")
        a, b = int(a), int(b)
        s = stats(between(run, times, a, b))
        print("%s %.3f %d %.0f %.0f %.0f %.0f" % (label, (b - a) / 1000, s[0],
                                                  s[0] * 1000 / max(b - a, 1), s[1], s[2], s[4]))

if sys.argv[1] == "pause":
    pause(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
else:
    windows(sys.argv[2], sys.argv[3])
EOF

# --- 1. the pause around a swap ------------------------------------------------
fill "$img_dir/pa.img" "$pause_mb"
fallocate -l "${pause_mb}M" "$img_dir/pb.img"
sync
vbmgr create p --driver file --attr engine=true --start "$img_dir/pa.img"
bd=$(vb_blockdev_of p)
runtime_ms=$((lead_ms + (swaps - 1) * interval_ms + tail_ms))
runtime=$(awk -v r="$runtime_ms" 'BEGIN { printf "%.1fs", r / 1000 }')

fio --name=baseline --filename="$bd" "${fio_job[@]}" --runtime="$runtime" \
  --write_lat_log="$T/base" --output="$T/base.json"
read -r base_err base_ioerr <<< "$(fio_errors "$T/base.json")"

: > "$T/swaps"
fio --name=swaps --filename="$bd" "${fio_job[@]}" --runtime="$runtime" \
  --write_lat_log="$T/swap" --output="$T/swap.json" &
fio_pid=$!
VB_BG_PIDS+=("$fio_pid")
start=$(now_ms)
late=0
for ((i = 0; i < swaps; i++)); do
  due=$((start + lead_ms + i * interval_ms))
  [ "$(now_ms)" -le "$due" ] || late=$((late + 1))
  sleep_until "$due"
  t0=$(now_ms)
  if ((i % 2 == 0)); then
    vbmgr reconfigure p --driver raid1 --add "$img_dir/pb.img" \
      --attr sync_speed_min=0 --attr sync_speed_max=0
    kind=add
  else
    vbmgr reconfigure p --driver file --remove "$img_dir/pb.img"
    kind=remove
  fi
  t1=$(now_ms)
  echo "$kind $t0 $t1" >> "$T/swaps"
  # the new leg's rebuild ends before the next swap takes it away
  [ "$kind" = remove ] || vbmgr wait p --timeout 60 > /dev/null
done
wait "$fio_pid"
read -r swap_err swap_ioerr <<< "$(fio_errors "$T/swap.json")"
mapfile -t held < <(grep -o "p: reconfigured to .*; requests held [0-9]* us" "$VB_LOG" |
                    grep -o "[0-9]* us$" | cut -d' ' -f1)
[ "${#held[@]}" -eq "$swaps" ] ||
  vb_fail "$swaps swaps made, ${#held[@]} 'requests held' lines in the vblkd log"
paste -d' ' "$T/swaps" <(printf '%s\n' "${held[@]}") > "$T/swaps.held"
vbmgr stop p
vbmgr delete p

# --- 2. rebuild throughput, idle and under the workload ----------------------------
fill "$img_dir/ra.img" "$rebuild_mb"
for f in rb rc rd; do fallocate -l "${rebuild_mb}M" "$img_dir/$f.img"; done
sync
vbmgr create r --driver file --attr engine=true --start "$img_dir/ra.img"
rbd=$(vb_blockdev_of r)

# last_rebuild — "bytes start_ms end_ms" of r's newest rebuild job
last_rebuild () {
  vbmgr jobs --json | jq -r '[.[] | select(.device == "r" and .operation == "rebuild")] | last
    | "\(.bytes) \(.start_time / 1000 | floor) \(.expected_end_time / 1000 | floor) \(.state)"'
}
# rebuild LEG MIN_BYTES — plain -> raid1 with LEG (sync_speed_min=MIN_BYTES,
# no sync_speed_max) and wait for its rebuild; sets t_call (ms, the
# reconfigure call) and job ("bytes start_ms end_ms state" of the rebuild)
rebuild () {
  t_call=$(now_ms)
  vbmgr reconfigure r --driver raid1 --add "$1" --attr sync_speed_min="$2" --attr sync_speed_max=0
  vbmgr wait r --timeout 600 > /dev/null
  # shellcheck disable=SC2016 # expanded by eval, each time
  vb_wait_until 10 eval '[ "$(last_rebuild | cut -d" " -f4)" != running ]' ||
    vb_fail "the rebuild onto $1 still shows running"
  job=$(last_rebuild)
  [ "${job##* }" = finished ] || vb_fail "rebuild onto $1: $job"
}
declare -A rb
mibs () { awk -v b="$1" -v a="$2" -v e="$3" 'BEGIN { printf "%.1f", b / 1048576 / ((e - a) / 1000) }'; }

rebuild "$img_dir/rb.img" 0
read -r bytes js je _ <<< "$job"
rb[idle]="$(mibs "$bytes" "$js" "$je") $((je - js))"
vbmgr reconfigure r --driver file --remove "$img_dir/rb.img"

# under_load NAME LEG MIN_BYTES
under_load () {
  local name=$1 trig=$T/stop-$1
  fio --name="$name" --filename="$rbd" "${fio_job[@]}" --runtime=300s --trigger-file="$trig" \
    --write_lat_log="$T/$name" --output="$T/$name.json" &
  local pid=$!
  VB_BG_PIDS+=("$pid")
  sleep 4
  rebuild "$2" "$3"
  sleep 3
  local stop_ms
  stop_ms=$(now_ms)
  touch "$trig"
  wait "$pid"
  local bytes js je
  read -r bytes js je _ <<< "$job"
  rb[$name]="$(mibs "$bytes" "$js" "$je") $((je - js))"
  rb[$name,err]=$(fio_errors "$T/$name.json" | tr ' ' /)
  python3 "$T/lat.py" windows "$T/${name}_lat.1.log" \
    "before:$((t_call - 3000)):$((t_call - 100)),during:$js:$je,after:$((je + 200)):$((stop_ms - 200))" \
    > "$T/$name.win"
  vbmgr reconfigure r --driver file --remove "$2"
}
under_load unthrottled "$img_dir/rc.img" 0
under_load throttled "$img_dir/rd.img" $((sync_min_mb << 20))
vbmgr stop r
vbmgr delete r
vb_stop_daemon

# --- tables ---------------------------------------------------------------
echo
echo "Online reconfiguration ($(nproc) cores, kernel $(uname -r)); $swaps swaps every" \
  "${interval_ms} ms in a ${runtime} fio run, window +-${window_ms} ms, ${pause_mb} MiB device"
fs_of () { df --output=fstype,target "$1" | awk 'END { print $1 " at " $2 }'; }
echo "images on $(fs_of "$img_dir"), vblkd's state directory on $(fs_of "$VB_STATE_DIR")"
[ "$late" = 0 ] || echo "note: $late swaps started late (the previous rebuild outlasted the interval)"
python3 "$T/lat.py" pause "$T/base_lat.1.log" "$T/swap_lat.1.log" "$T/swaps.held" "$window_ms"
echo "fio errors: baseline run $base_err/$base_ioerr, swap run $swap_err/$swap_ioerr (error code/I/O errors)"

field () { awk -v w="$2" -v c="$3" '$1 == w { print $c }' "$T/$1.win"; }
echo
echo "Rebuild of a new ${rebuild_mb} MiB leg (plain file -> raid1), the same fio workload (IOPS, p99 us)"
row () { printf '%-34s %9s %8s %7s %9s %9s %9s %7s %8s %8s\n' "$@"; }
row rebuild MiB/s time-ms ratio IOPS-pre IOPS-dur IOPS-post dur/pre p99-pre p99-dur
idle_mibs=${rb[idle]% *}
row "idle, sync_speed_min/max=0/0" "$idle_mibs" "${rb[idle]#* }" 1.00 - - - - - -
for name in unthrottled throttled; do
  case $name in
    unthrottled) label="under fio, sync_speed_min/max=0/0" ;;
    throttled) label="under fio, sync_speed_min/max=${sync_min_mb}M/0" ;;
  esac
  m=${rb[$name]% *}
  row "$label" "$m" "${rb[$name]#* }" \
    "$(awk -v a="$m" -v b="$idle_mibs" 'BEGIN { printf "%.2f", a / b }')" \
    "$(field "$name" before 4)" "$(field "$name" during 4)" "$(field "$name" after 4)" \
    "$(awk -v a="$(field "$name" during 4)" -v b="$(field "$name" before 4)" 'BEGIN { printf "%.2f", a / b }')" \
    "$(field "$name" before 6)" "$(field "$name" during 6)"
done
echo "(pre: the 3 s before the reconfiguration, plain device; post: after the rebuild, mirror in sync)"
echo "fio errors: unthrottled ${rb[unthrottled,err]}, throttled ${rb[throttled,err]} (error code/I/O errors)"
grep -E "WARNING|CRITICAL|ERROR" "$VB_LOG" > "$T/warnings" || true
echo "vblkd log: $(wc -l < "$T/warnings") warnings or errors"
head -n 10 "$T/warnings"
