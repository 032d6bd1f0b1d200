#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# bench-nbd-tls.sh: what TLS costs an NBD export (not a test). In one run,
# with the same client (nbdcopy, one connection and 16 requests in flight,
# and four connections where the server offers multi-conn), on image files
# on the real disk: vblk's export in plaintext and with TLS (PSK), against
# qemu-nbd in plaintext and with TLS (PSK, its own in-process GnuTLS), on
# TCP over the loopback. Prints MiB/s of reading the whole export and of
# writing it whole (the median of BENCH_REPEAT runs), the server's CPU
# seconds per GiB, and the ratios TLS/plaintext and vblk/qemu-nbd.
# Usage: bash bench/bench-nbd-tls.sh   (as root; builds first; BENCH_SIZE_MB, 512)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
size_mb=${BENCH_SIZE_MB:-512}
repeat=${BENCH_REPEAT:-3}

bash "$repo/tools/install-deps.sh" > /dev/null
[ -d "$repo/build/meson-private" ] || meson setup "$repo/build" "$repo" > /dev/null
ninja -C "$repo/build" > /dev/null

export VBLKD=$repo/build/src/daemon/vblkd VBMGR=$repo/build/client/vbmgr VB_SRCDIR=$repo
# the test harness brings a private bus, polkitd, udevd and cleans up
source "$repo/tests/integration/lib.sh"
vb_setup
vb_start_daemon

img_dir=$T/img
mkdir -p "$img_dir"
for f in vblk qemu; do
  fallocate -l "${size_mb}M" "$img_dir/$f.img"
  dd if=/dev/urandom of="$img_dir/$f.img" bs=1M count="$size_mb" conv=notrunc status=none
done
head -c "${size_mb}M" /dev/urandom > "$img_dir/source"
sync

mkdir -m 700 "$T/psk"
psktool -u alice -p "$T/psk/keys.psk" > /dev/null
chmod 600 "$T/psk/keys.psk"

qemu_pids=()
cleanup_extra () {
  local p
  for p in "${qemu_pids[@]}"; do kill "$p" 2> /dev/null || true; done
}
trap 'cleanup_extra; vb_cleanup' EXIT

vbmgr create bench --driver linear --attr metadata=none --start "$img_dir/vblk.img"
vbmgr export bench --nbd --listen tcp:127.0.0.1:10941 --tls off
vbmgr export bench --nbd --listen tcp:127.0.0.1:10942 --tls-psk "$T/psk/keys.psk"
qemu-nbd -f raw -x bench -b 127.0.0.1 -p 10943 --cache=none -e 4 -t "$img_dir/qemu.img" &
qemu_pids+=($!)
qemu_plain_pid=$!
qemu-nbd -f raw -x bench -b 127.0.0.1 -p 10944 --cache=none -e 4 -t \
  --object "tls-creds-psk,id=tls0,endpoint=server,dir=$T/psk" --tls-creds tls0 "$img_dir/qemu.img" &
qemu_pids+=($!)
qemu_tls_pid=$!
vb_wait_until 10 nbdinfo --size nbd://127.0.0.1:10943/bench > /dev/null
vb_wait_until 10 nbdinfo --size "nbds://alice@127.0.0.1:10944/bench?tls-psk-file=$T/psk/keys.psk" > /dev/null

cpu_of () { awk '{ print $14 + $15 }' "/proc/$1/stat"; }   # utime + stime, clock ticks
ticks=$(getconf CLK_TCK)

# run_copy URI PID DIRECTION CONNECTIONS: prints "MIB_PER_S CPU_S_PER_GIB", the median run
run_copy () {
  local uri=$1 pid=$2 dir=$3 conns=$4 i t0 t1 c0 c1 out=()
  for ((i = 0; i < repeat; i++)); do
    c0=$(cpu_of "$pid")
    t0=$(date +%s%N)
    if [ "$dir" = read ]; then
      nbdcopy --connections="$conns" --requests=16 "$uri" null:
    else
      nbdcopy --connections="$conns" --requests=16 "$img_dir/source" "$uri"
    fi
    t1=$(date +%s%N)
    c1=$(cpu_of "$pid")
    out+=("$(awk -v mb="$size_mb" -v ns=$((t1 - t0)) -v c=$((c1 - c0)) -v hz="$ticks" \
      'BEGIN { printf "%.1f %.2f", mb / (ns / 1e9), (c / hz) / (mb / 1024) }')")
  done
  printf '%s\n' "${out[@]}" | sort -n | sed -n "$(((repeat + 1) / 2))p"
}

psk=$T/psk/keys.psk
declare -A uri=(
  [vblk-plain]=nbd://127.0.0.1:10941/bench
  [vblk-tls]="nbds://alice@127.0.0.1:10942/bench?tls-psk-file=$psk"
  [qemu-plain]=nbd://127.0.0.1:10943/bench
  [qemu-tls]="nbds://alice@127.0.0.1:10944/bench?tls-psk-file=$psk"
)
declare -A pid=([vblk-plain]=$VBLKD_PID [vblk-tls]=$VBLKD_PID
                [qemu-plain]=$qemu_plain_pid [qemu-tls]=$qemu_tls_pid)
declare -A res
for conns in 1 4; do
  for dir in read write; do
    for s in vblk-plain vblk-tls qemu-plain qemu-tls; do
      res[$s,$dir,$conns]=$(run_copy "${uri[$s]}" "${pid[$s]}" "$dir" "$conns")
    done
  done
done

echo
echo "NBD over TCP (loopback), ${size_mb} MiB, nbdcopy 16 requests per connection, median of $repeat"
printf '%-12s %-6s %-6s %10s %12s\n' server job conns MiB/s "CPU s/GiB"
for conns in 1 4; do
  for dir in read write; do
    for s in vblk-plain vblk-tls qemu-plain qemu-tls; do
      read -r mbs cpu <<< "${res[$s,$dir,$conns]}"
      printf '%-12s %-6s %-6s %10s %12s\n' "$s" "$dir" "$conns" "$mbs" "$cpu"
    done
  done
done
echo
echo "ratios of throughput"
printf '%-6s %-6s %16s %16s %18s %18s\n' job conns "vblk tls/plain" "qemu tls/plain" "plain vblk/qemu" "tls vblk/qemu"
ratio () { awk -v a="${1%% *}" -v b="${2%% *}" 'BEGIN { printf "%.2f", a / b }'; }
for conns in 1 4; do
  for dir in read write; do
    printf '%-6s %-6s %16s %16s %18s %18s\n' "$dir" "$conns" \
      "$(ratio "${res[vblk-tls,$dir,$conns]}" "${res[vblk-plain,$dir,$conns]}")" \
      "$(ratio "${res[qemu-tls,$dir,$conns]}" "${res[qemu-plain,$dir,$conns]}")" \
      "$(ratio "${res[vblk-plain,$dir,$conns]}" "${res[qemu-plain,$dir,$conns]}")" \
      "$(ratio "${res[vblk-tls,$dir,$conns]}" "${res[qemu-tls,$dir,$conns]}")"
  done
done
vbmgr stop bench
vb_stop_daemon
