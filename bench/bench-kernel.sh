#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# bench-kernel.sh: the kernel paths to one raid1, side by side (a benchmark,
# not a test). Boots the VM harness (Debian's kernel under qemu) and, in one
# run there, puts the same fio jobs (io_uring, O_DIRECT, through the block
# node) on:
#   - md: a vblk raid1 of two image files on backend kernel (an md array,
#     vblk's superblocks as external metadata, vblkd as its mdmon),
#   - ublk: the same raid1 on the engine, backend ublk (ublk_drv, which the
#     harness builds; io_uring queues in vblkd),
#   - nbd: the same raid1 on the engine, backend nbd (kernel nbd client,
#     socketpairs to vblk's NBD server),
#   - fuse-loop: the same raid1 on the engine, backend loop (loop device,
#     FUSE file, engine),
#   - leg: one image alone on a plain loop device (what each copy costs).
# Jobs: 4 KiB random read and random write at queue depth 8, 1 MiB
# sequential write at depth 4, each for SECONDS. Prints IOPS / MiB/s and p99
# per device and job, and the ratios against the md array. The harness
# prints its accelerator first (KVM only where a probe boot with it answered;
# VB_VM_ACCEL forces one): under TCG the absolute figures mean little; the
# ratios rank the paths. Then perf's profile of the guest during the 4 KiB
# random writes on ublk, nbd and md: by thread, the top functions, vblkd's
# (BENCH_PROFILE=0 leaves it out). Asserts nothing.
# Usage: bash bench/bench-kernel.sh [SECONDS]   (as root; builds first)
# Environment: BENCH_BUILD_DIR (default build/ in the checkout), BENCH_MB
#   (size of each image, 256); VB_VM_KERNEL=newer (the harness's newer
#   kernel, Debian 13's backports: ublk with zero copy); BENCH_DISK=1 (the
#   images on ext4 on a virtio disk instead of the guest's tmpfs: files
#   that take O_DIRECT and nonblocking writes, as on a real host);
#   BENCH_UBLK_COPY=1 (ublk through vblkd's buffers even where the driver
#   offers zero copy: VBLK_UBLK_COPY=1 for vblkd).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-15}
build=${BENCH_BUILD_DIR:-$repo/build}
mb=${BENCH_MB:-256}
disk_mode=${BENCH_DISK:-0}
copy_mode=${BENCH_UBLK_COPY:-0}

if [ "${BENCH_IN_VM:-}" != 1 ]; then
  bash "$repo/tools/install-deps.sh" > /dev/null
  [ -d "$build/meson-private" ] || meson setup "$build" "$repo" > /dev/null
  ninja -C "$build" > /dev/null
  # (VB_VM_KERNEL picks the cache it builds)
  bash "$repo/tests/vm/build-cache.sh" > /dev/null
  [ "${VB_VM_KERNEL:-debian12}" != newer ] || export VB_VM_CACHE=${VB_VM_CACHE:-/var/cache/vblk-vm}/newer
  disk_args=()
  if [ "$disk_mode" = 1 ]; then
    # 9 images and ext4's own room, sparse on the host
    disk=$(mktemp /var/tmp/vblk-bench-disk.XXXXXX)
    trap 'rm -f "$disk"' EXIT
    truncate -s $((mb * 9 + 1024))M "$disk"
    disk_args=(--disk "$disk")
  fi
  # 9 images on the guest's tmpfs (75% of its memory), or on the disk
  "$repo/tests/vm/run" --memory 4096 --timeout $((seconds * 20 + 600)) "${disk_args[@]}" \
    "BENCH_IN_VM=1 BENCH_BUILD_DIR=$build BENCH_MB=$mb BENCH_DISK=$disk_mode BENCH_UBLK_COPY=$copy_mode bash $repo/bench/bench-kernel.sh $seconds"
  exit
fi

for m in loop fuse dm-mod md-mod raid1 nbd ublk_drv; do modprobe "$m"; done
export VBLKD=$build/src/daemon/vblkd VBMGR=$build/client/vbmgr VB_SRCDIR=$repo
source "$repo/tests/integration/lib.sh"
vb_setup
[ "$copy_mode" != 1 ] || export VBLK_UBLK_COPY=1
vb_start_daemon

images=$T
where="the guest's tmpfs"
if [ "$disk_mode" = 1 ]; then
  images=$T/disk
  mkdir -p "$images"
  # (the harness's initramfs loads only what the 9p root takes)
  modprobe virtio_blk
  modprobe ext4
  for _ in $(seq 50); do [ -b /dev/vda ] && break; sleep 0.1; done
  mkfs.ext4 -q -F /dev/vda
  mount /dev/vda "$images"
  vb_on_cleanup "umount $images"
  where="ext4 on a virtio disk"
fi
for f in m0 m1 u0 u1 n0 n1 e0 e1 p; do vb_mkimg "$images/$f.img" "${mb}M"; done
vbmgr create md --driver raid1 --backend kernel --start "$images/m0.img" "$images/m1.img"
vbmgr create ublk --driver raid1 --backend ublk --start "$images/u0.img" "$images/u1.img"
vbmgr create nbd --driver raid1 --backend nbd --start "$images/n0.img" "$images/n1.img"
vbmgr create fuse-loop --driver raid1 --backend loop --start "$images/e0.img" "$images/e1.img"
devices=(md ublk nbd fuse-loop leg)
for d in md ublk nbd fuse-loop; do vbmgr wait "$d" > /dev/null; done
ublk_mode=$(grep -o "ublk device [0-9]*: [a-z ]*" "$VB_LOG" | head -1 | sed 's/^ublk device [0-9]*: //')
# buffered, as the loop devices under an md array over image files are
plain=$(losetup --find --show "$images/p.img")
vb_on_cleanup "losetup -d $plain"

declare -A node=([md]=$(vb_blockdev_of md) [ublk]=$(vb_blockdev_of ublk) [nbd]=$(vb_blockdev_of nbd)
  [fuse-loop]=$(vb_blockdev_of fuse-loop) [leg]=$plain)
jobs=(randread randwrite seqwrite)
declare -A result p99

run_fio () { # DEVICE JOB -> "value p99_us"
  local dev=$1 job=$2 rw bs depth out
  case $job in
    randread) rw=randread bs=4k depth=8 ;;
    randwrite) rw=randwrite bs=4k depth=8 ;;
    seqwrite) rw=write bs=1M depth=4 ;;
  esac
  out=$(fio --name=b --filename="$dev" --ioengine=io_uring --direct=1 --rw=$rw --bs=$bs \
          --iodepth=$depth --time_based --runtime="$seconds" --size=$((mb - 2))M \
          --output-format=json)
  if [ "$job" = seqwrite ]; then
    jq -r '.jobs[0].write | "\(.bw / 1024) \(.clat_ns.percentile["99.000000"] / 1000)"' <<< "$out"
  else
    jq -r --arg d "${rw#rand}" '.jobs[0][$d] | "\(.iops) \(.clat_ns.percentile["99.000000"] / 1000)"' <<< "$out"
  fi
}

for job in "${jobs[@]}"; do
  for dev in "${devices[@]}"; do
    read -r v p <<< "$(run_fio "${node[$dev]}" "$job")"
    result[$dev,$job]=$v
    p99[$dev,$job]=$p
  done
done

echo
echo "raid1 of two ${mb} MiB images on $where, ${seconds} s per job, kernel $(uname -r) under the VM harness"
echo "ublk: ${ublk_mode:-?}"
printf '%-10s %-10s %14s %12s %10s\n' job device "IOPS|MiB/s" "p99 us" "vs md"
for job in "${jobs[@]}"; do
  for dev in "${devices[@]}"; do
    printf '%-10s %-10s %14.1f %12.0f %9.2fx\n' "$job" "$dev" "${result[$dev,$job]}" \
      "${p99[$dev,$job]}" "$(awk -v a="${result[$dev,$job]}" -v b="${result[md,$job]}" 'BEGIN { print (b > 0 ? a / b : 0) }')"
  done
done

# where the time goes on the write jobs the engine loses against md: the
# whole guest is sampled during 4 KiB random writes on ublk, nbd and md
# (perf's software clock: TCG has no PMU), because much of the work is not
# on vblkd's own threads (io_uring's workers, fio's submissions into the
# driver, the kernel's completions)
profile () { # DEVICE
  local dev=$1 fio_pid
  # (perf takes seconds to start under TCG: the job runs first and ends
  # after perf's sleep, which starts once perf records)
  fio --name=b --filename="${node[$dev]}" --ioengine=io_uring --direct=1 --rw=randwrite --bs=4k \
    --iodepth=8 --time_based --runtime=$((seconds + 120)) --size=$((mb - 2))M > /dev/null &
  fio_pid=$!
  sleep 2
  perf record -q -a -e cpu-clock -F 999 -g -o "$T/perf.data" -- sleep "$seconds" > "$T/perf.log" 2>&1 || true
  kill "$fio_pid"
  wait "$fio_pid" || true
  echo
  echo "where the guest's time goes, $dev raid1, randwrite (perf, share of all samples):"
  report --sort comm > "$T/perf.top"
  if [ ! -s "$T/perf.top" ]; then
    echo "  (no samples; perf said: $(head -c 300 "$T/perf.log" | tr '\n' ' '))"
    return
  fi
  head -8 "$T/perf.top"
  echo "  top functions:"
  report --sort comm,symbol | head -10
  if [ "$dev" != md ]; then
    echo "  vblkd's top functions (share of vblkd's samples, its io_uring workers included):"
    report --pid "$VBLKD_PID" --percentage relative --sort symbol | head -8
  fi
}
report () {
  perf report -q -i "$T/perf.data" --stdio --no-children -g none "$@" 2>> "$T/perf.log" |
    grep -E '^ +[0-9.]+%' | cut -c1-80 || true
}
if [ "${BENCH_PROFILE:-1}" != 0 ] && command -v perf > /dev/null; then
  for d in ublk nbd md; do profile "$d"; done
fi
for d in md ublk nbd fuse-loop; do vbmgr stop "$d"; done
vb_stop_daemon
