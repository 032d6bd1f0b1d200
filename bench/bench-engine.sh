#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# bench-engine.sh: the engine's benchmark (not a test). In one run, on the
# same image files on the real disk, with the same client:
#  1. NBD: vblk's export vs nbdkit's file plugin vs qemu-storage-daemon,
#     fio's nbd engine: sequential 1 MiB read/write, 4 KiB random read/write
#     at queue depth 1 and 32, and 4 connections at once (multi-conn);
#  2. the vblk block node (FUSE + loop) vs a plain kernel loop device on the
#     same file, fio io_uring O_DIRECT;
#  3. raid0 over two components vs one component, sequential reads
#     (O_DIRECT everywhere: nothing comes from the page cache);
#  4. raid1 writes with the write-intent bitmap (64M and 1M chunks) vs
#     without on-component metadata, and the initial resync's speed.
# Prints tables of throughput, ratios, CPU seconds of the server per GiB and
# per million requests, and where vblkd's time goes on the block node's 4 KiB
# random jobs (perf's top functions; BENCH_PROFILE=0 leaves it out).
# Usage: bash bench/bench-engine.sh [SECONDS_PER_JOB]   (as root; builds first)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
runtime=${1:-5}
size_mb=${BENCH_SIZE_MB:-1024}

bash "$repo/tools/install-deps.sh" > /dev/null
for p in nbdkit qemu-system-common; do
  dpkg-query -W -f='${db:Status-Status}' "$p" 2> /dev/null | grep -qx installed ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$p" > /dev/null
done
[ -d "$repo/build/meson-private" ] || meson setup "$repo/build" "$repo" > /dev/null
ninja -C "$repo/build" > /dev/null

export VBLKD=$repo/build/src/daemon/vblkd VBMGR=$repo/build/client/vbmgr VB_SRCDIR=$repo
export VB_REFMODEL=$repo/build/tests/tools/vb-refmodel
# the test harness brings a private bus, polkitd, udevd and cleans up
source "$repo/tests/integration/lib.sh"
vb_setup
vb_start_daemon

# images on the real disk, not tmpfs
img_dir=$T/img
mkdir -p "$img_dir"
for f in one a b; do
  fallocate -l "${size_mb}M" "$img_dir/$f.img"
  dd if=/dev/urandom of="$img_dir/$f.img" bs=1M count="$size_mb" conv=notrunc status=none
done
sync

extra_pids=()
cg=
cleanup_extra () {
  local p
  for p in "${extra_pids[@]}"; do kill "$p" 2> /dev/null || true; done
  if [ -n "$cg" ] && [ -d "$cg" ]; then
    echo "$VBLKD_PID" > /sys/fs/cgroup/blkio/cgroup.procs 2> /dev/null || true
    rmdir "$cg" 2> /dev/null || true
  fi
}
trap 'cleanup_extra; vb_cleanup' EXIT

cpu_of () { awk '{ print $14 + $15 }' "/proc/$1/stat"; }   # utime + stime, clock ticks
hz=$(getconf CLK_TCK)

# run_fio NAME PID ARGS... — prints "MiB/s cpu_s_per_GiB cpu_s_per_million_requests"
run_fio () {
  local name=$1 pid=$2 json c0 c1 bytes ios
  shift 2
  c0=$(cpu_of "$pid")
  fio --name="$name" --output-format=json --output="$T/fio.json" --time_based \
      --runtime="$runtime" --ramp_time=1 --group_reporting "$@" > /dev/null ||
    vb_fail "fio $name: $(cat "$T/fio.json")"
  c1=$(cpu_of "$pid")
  # fio may print notes before the JSON document
  json=$(sed -n '/^{/,$p' "$T/fio.json")
  bytes=$(jq '[.jobs[0].read.io_bytes, .jobs[0].write.io_bytes] | add' <<< "$json")
  ios=$(jq '[.jobs[0].read.total_ios, .jobs[0].write.total_ios] | add' <<< "$json")
  jq -r --argjson c "$((c1 - c0))" --argjson hz "$hz" --argjson b "$bytes" --argjson n "$ios" \
    '((.jobs[0].read.bw_bytes + .jobs[0].write.bw_bytes) / 1048576) as $mib
     | "\($mib) \(if $b > 0 then ($c / $hz) / ($b / 1073741824) else 0 end) \(if $n > 0 then ($c / $hz) / ($n / 1000000) else 0 end)"' <<< "$json"
}

# profile NAME PID ARGS... — fio as run_fio, with perf sampling PID meanwhile;
# the top functions of PID's samples go to $T/profile-NAME.txt
profile () {
  local name=$1 pid=$2 perf_pid
  shift 2
  perf record -q -F 999 -g -p "$pid" -o "$T/perf-$name.data" -- sleep "$((runtime + 1))" \
    > /dev/null 2>&1 &
  perf_pid=$!
  run_fio "$name" "$pid" "$@" > /dev/null
  wait "$perf_pid" || true
  perf report -q -i "$T/perf-$name.data" --stdio --no-children --sort symbol 2> /dev/null |
    grep -E '^ +[0-9.]+%' | head -12 > "$T/profile-$name.txt" || true
}

declare -A result
workloads=("seq-read-1M:--rw=read --bs=1M --iodepth=8"
           "seq-write-1M:--rw=write --bs=1M --iodepth=8"
           "rand-read-4K-qd1:--rw=randread --bs=4k --iodepth=1"
           "rand-read-4K-qd32:--rw=randread --bs=4k --iodepth=32"
           "rand-write-4K-qd1:--rw=randwrite --bs=4k --iodepth=1"
           "rand-write-4K-qd32:--rw=randwrite --bs=4k --iodepth=32"
           "multi-conn-4x-rand-read-4K-qd8:--rw=randread --bs=4k --iodepth=8 --numjobs=4"
           "multi-conn-4x-rand-write-4K-qd8:--rw=randwrite --bs=4k --iodepth=8 --numjobs=4")

# --- 1. NBD servers on the same file ---------------------------------------
vbmgr create one --driver linear --start "$img_dir/one.img"
vbmgr export one --nbd --listen "unix:$T/vblk.sock"
vblk_uri="nbd+unix:///one?socket=$T/vblk.sock"

nbdkit --foreground --exit-with-parent --unix "$T/nbdkit.sock" --threads 16 \
  file "$img_dir/one.img" cache=none fadvise=random > "$T/nbdkit.log" 2>&1 &
nbdkit_pid=$!
extra_pids+=("$nbdkit_pid")
qemu-storage-daemon \
  --blockdev "driver=file,node-name=f,filename=$img_dir/one.img,cache.direct=on,aio=io_uring" \
  --nbd-server "addr.type=unix,addr.path=$T/qsd.sock,max-connections=16" \
  --export "type=nbd,id=e,node-name=f,name=one,writable=on" > "$T/qsd.log" 2>&1 &
qsd_pid=$!
extra_pids+=("$qsd_pid")
vb_wait_until 10 test -S "$T/nbdkit.sock" || vb_fail "nbdkit did not start: $(cat "$T/nbdkit.log")"
vb_wait_until 10 test -S "$T/qsd.sock" || vb_fail "qemu-storage-daemon did not start: $(cat "$T/qsd.log")"

for w in "${workloads[@]}"; do
  name=${w%%:*}; args=${w#*:}
  # shellcheck disable=SC2086
  result[vblk,$name]=$(run_fio "$name" "$VBLKD_PID" --ioengine=nbd --uri="$vblk_uri" $args)
  # shellcheck disable=SC2086
  result[nbdkit,$name]=$(run_fio "$name" "$nbdkit_pid" --ioengine=nbd \
    --uri="nbd+unix:///?socket=$T/nbdkit.sock" $args)
  # shellcheck disable=SC2086
  result[qsd,$name]=$(run_fio "$name" "$qsd_pid" --ioengine=nbd \
    --uri="nbd+unix:///one?socket=$T/qsd.sock" $args)
done
kill "$nbdkit_pid" "$qsd_pid" 2> /dev/null || true

# --- 2. block node vs plain loop on the same file -----------------------------
node=$(vb_blockdev_of one)
plain=$(losetup --show -f --direct-io=on "$img_dir/one.img")
node_workloads=("seq-read-1M:--rw=read --bs=1M --iodepth=8"
                "seq-write-1M:--rw=write --bs=1M --iodepth=8"
                "rand-read-4K-qd32:--rw=randread --bs=4k --iodepth=32"
                "rand-write-4K-qd32:--rw=randwrite --bs=4k --iodepth=32")
for w in "${node_workloads[@]}"; do
  name=${w%%:*}; args=${w#*:}
  # shellcheck disable=SC2086
  result[node,$name]=$(run_fio "$name" "$VBLKD_PID" --ioengine=io_uring --direct=1 --filename="$node" $args)
  # shellcheck disable=SC2086
  result[loop,$name]=$(run_fio "$name" "$VBLKD_PID" --ioengine=io_uring --direct=1 --filename="$plain" $args)
done
if [ "${BENCH_PROFILE:-1}" != 0 ] && command -v perf > /dev/null; then
  for name in rand-read-4K-qd32 rand-write-4K-qd32; do
    rw=${name%%-4K*}; rw=${rw/rand-/rand}
    profile "$name" "$VBLKD_PID" --ioengine=io_uring --direct=1 --filename="$node" \
      --rw="$rw" --bs=4k --iodepth=32
  done
fi
losetup -d "$plain"

# --- 3. raid0 over two components vs one ----------------------------------------
# Here every image sits on the same virtual disk, whose reads the host may
# cache, so each component is put behind a loop device of its own whose
# reads the kernel's block throttle (cgroup blkio) holds at DISK_MBPS, as if
# each were a disk of that speed. The same limit for the single component.
disk_mbps=${BENCH_DISK_MBPS:-200}
loop_a=$(losetup --show -f --direct-io=on "$img_dir/a.img")
loop_b=$(losetup --show -f --direct-io=on "$img_dir/b.img")
loop_o=$(losetup --show -f --direct-io=on "$img_dir/one.img")
cg=/sys/fs/cgroup/blkio/vblk-bench-$$
mkdir "$cg"
for l in "$loop_a" "$loop_b" "$loop_o"; do
  echo "$(lsblk -dno MAJ:MIN "$l" | tr -d ' ') $((disk_mbps << 20))" > "$cg/blkio.throttle.read_bps_device"
done
echo "$VBLKD_PID" > "$cg/cgroup.procs"
vbmgr create stripe --driver raid0 --attr chunk_size=512K --start "$loop_a" "$loop_b"
vbmgr create single --driver linear --start "$loop_o"
for dev in single stripe; do
  result[$dev,seq-read]=$(run_fio seq-read "$VBLKD_PID" --ioengine=io_uring --direct=1 \
    --filename="$(vb_blockdev_of "$dev")" --rw=read --bs=1M --iodepth=16)
done
vbmgr stop stripe
vbmgr stop single
echo "$VBLKD_PID" > /sys/fs/cgroup/blkio/cgroup.procs
rmdir "$cg"
losetup -d "$loop_a" "$loop_b" "$loop_o"

# --- 4. the write-intent bitmap's cost ------------------------------------------
# raid1 over two images with on-component metadata and the bitmap (64M and 1M
# chunks: a 1M chunk is set, and flushed, far more often) vs without any
# metadata; writes through the block node, after the initial resync.
bitmap_workloads=("seq-write-1M:--rw=write --bs=1M --iodepth=8"
                  "rand-write-4K-qd32:--rw=randwrite --bs=4k --iodepth=32")
# a device's superblocks stay on its components after delete: wiped between runs
wipe_superblock () { local f; for f in "$@"; do dd if=/dev/zero of="$f" bs=4k seek=1 count=1 conv=notrunc status=none; done; }
for cfg in "m-64m:" "m-1m:--attr bitmap_chunk=1M" "m-none:--attr metadata=none --attr bitmap=none"; do
  dev=${cfg%%:*}; attrs=${cfg#*:}
  wipe_superblock "$img_dir/a.img" "$img_dir/b.img"
  # shellcheck disable=SC2086
  vbmgr create "$dev" --driver raid1 $attrs --start "$img_dir/a.img" "$img_dir/b.img"
  t0=$(date +%s.%N)
  vbmgr wait "$dev" > /dev/null
  t1=$(date +%s.%N)
  result[$dev,resync]=$(awk -v s="$size_mb" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (s - 1) / (b - a) }')
  for w in "${bitmap_workloads[@]}"; do
    name=${w%%:*}; args=${w#*:}
    # shellcheck disable=SC2086
    result[$dev,$name]=$(run_fio "$name" "$VBLKD_PID" --ioengine=io_uring --direct=1 \
      --filename="$(vb_blockdev_of "$dev")" $args)
  done
  vbmgr delete "$dev"
done

# --- tables ---------------------------------------------------------------
mib () { echo "${1%% *}"; }
cpu () { local r=${1#* }; echo "${r%% *}"; }
cpu_mreq () { echo "${1##* }"; }
ratio () { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

echo
echo "NBD export, fio nbd engine, ${runtime}s per job (MiB/s; ratio = vblk / peer; CPU s/GiB of the server)"
printf '%-34s %9s %9s %9s %11s %9s %9s %9s %9s\n' workload vblk nbdkit qsd vblk/nbdkit vblk/qsd \
  cpu-vblk cpu-nbdkit cpu-qsd
for w in "${workloads[@]}"; do
  name=${w%%:*}
  v=${result[vblk,$name]} k=${result[nbdkit,$name]} q=${result[qsd,$name]}
  printf '%-34s %9.1f %9.1f %9.1f %11s %9s %9.2f %9.2f %9.2f\n' "$name" "$(mib "$v")" "$(mib "$k")" \
    "$(mib "$q")" "$(ratio "$(mib "$v")" "$(mib "$k")")" "$(ratio "$(mib "$v")" "$(mib "$q")")" \
    "$(cpu "$v")" "$(cpu "$k")" "$(cpu "$q")"
done
echo "CPU seconds per million requests of the server:"
printf '%-34s %9s %9s %9s\n' workload vblk nbdkit qsd
for w in "${workloads[@]}"; do
  name=${w%%:*}
  printf '%-34s %9.1f %9.1f %9.1f\n' "$name" "$(cpu_mreq "${result[vblk,$name]}")" \
    "$(cpu_mreq "${result[nbdkit,$name]}")" "$(cpu_mreq "${result[qsd,$name]}")"
done

echo
echo "Block node (FUSE + loop, direct I/O) vs plain loop --direct-io on the same file, fio io_uring O_DIRECT (MiB/s)"
printf '%-22s %9s %9s %9s %12s %12s\n' workload vblk-node loop ratio cpu-s/GiB cpu-s/Mreq
for w in "${node_workloads[@]}"; do
  name=${w%%:*}
  n=${result[node,$name]} l=${result[loop,$name]}
  printf '%-22s %9.1f %9.1f %9s %12.2f %12.1f\n' "$name" "$(mib "$n")" "$(mib "$l")" \
    "$(ratio "$(mib "$n")" "$(mib "$l")")" "$(cpu "$n")" "$(cpu_mreq "$n")"
done
for f in "$T"/profile-*.txt; do
  [ -s "$f" ] || continue
  name=${f##*/profile-}
  echo "where vblkd's time goes, block node, ${name%.txt} (perf, share of vblkd's samples):"
  sed 's/^/  /' "$f"
done

echo
echo "raid0 over two components vs one component, each a loop device read-throttled to ${disk_mbps} MiB/s, sequential 1 MiB reads, QD16, block node (MiB/s)"
printf '%-22s %9s %9s %9s\n' workload raid0-x2 single ratio
s=${result[stripe,seq-read]} o=${result[single,seq-read]}
printf '%-22s %9.1f %9.1f %9s\n' seq-read-1M "$(mib "$s")" "$(mib "$o")" "$(ratio "$(mib "$s")" "$(mib "$o")")"

vbmgr stop one
vb_stop_daemon
echo
echo "raid1 write-intent bitmap, block node, ${runtime}s per job (MiB/s; ratio = with / without metadata)"
printf '%-22s %9s %9s %9s %9s %9s\n' workload bitmap-64M bitmap-1M none ratio-64M ratio-1M
for w in "${bitmap_workloads[@]}"; do
  name=${w%%:*}
  a=${result[m-64m,$name]}; b=${result[m-1m,$name]}; n=${result[m-none,$name]}
  printf '%-22s %9.1f %9.1f %9.1f %9s %9s\n' "$name" "$(mib "$a")" "$(mib "$b")" "$(mib "$n")" \
    "$(ratio "$(mib "$a")" "$(mib "$n")")" "$(ratio "$(mib "$b")" "$(mib "$n")")"
done
printf 'initial resync of %s MiB: %s MiB/s (64M chunks), %s MiB/s (1M chunks)\n' "$((size_mb - 1))" \
  "${result[m-64m,resync]}" "${result[m-1m,resync]}"
