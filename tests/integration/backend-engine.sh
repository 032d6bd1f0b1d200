# SPDX-License-Identifier: LGPL-2.1-or-later
# Shared by test-backend-nbd.sh, test-backend-ublk.sh and test-engine-stress.sh (sourced after
# lib.sh): the checks every engine backend on a kernel path must pass.
# The test sets EB_BACKEND (nbd, ublk), EB_NODE_PREFIX (/dev/nbd) and
# defines eb_node_live BD (the kernel's device for BD is configured and
# carries this vblkd's tag for the device of the UUID given as $2) and
# eb_cleanup_node BD (ends a node whose vblkd was killed, so that an
# unmount does not hang on it).
EB_NODES=()
vb_on_cleanup_early 'for n in "${EB_NODES[@]}"; do eb_cleanup_node "$n"; done'

# eb_node_of NAME: EB_BD becomes the device's node, which the cleanup ends
eb_node_of () {
  EB_BD=$(vb_blockdev_of "$1")
  [[ "$EB_BD" == "$EB_NODE_PREFIX"* ]] || vb_fail "$1: node '$EB_BD' is not a $EB_BACKEND device"
  EB_NODES+=("$EB_BD")
}
eb_refmodel () {
  local out
  out=$("$VB_REFMODEL" --device "$(vb_blockdev_of "$1")" --ops 300 --chunk "$2" --seed "$RANDOM") ||
    vb_fail "$1: reference model: $out"
  vb_log "$1: $out"
}
eb_ext4_round () {
  mkfs.ext4 -q -F "$1" || vb_fail "mkfs.ext4 on $1"
  fsck.ext4 -n -f "$1" > "$T/fsck.log" 2>&1 || vb_fail "fsck on $1: $(cat "$T/fsck.log")"
}

# Every engine driver on the backend: the node, its size, the reference
# model, mkfs + fsck; a stop removes the kernel's device; a raid1 started
# again still holds its filesystem.
eb_each_driver () {
  local spec name bd
  local -a head comps drivers
  for f in l0 l1 z0 z1 m0 m1 t0 t1 t2 w f q; do vb_mkimg "$T/d-$f.img" 40M; done
  drivers=(
    "lin linear | $T/d-l0.img $T/d-l1.img"
    "r0 raid0 --attr chunk_size=64K | $T/d-z0.img $T/d-z1.img"
    "r1 raid1 | $T/d-m0.img $T/d-m1.img"
    "r10 raid10 --attr chunk_size=64K --attr copies=2 | $T/d-t0.img $T/d-t1.img $T/d-t2.img"
    "win window --attr offset=1M --attr size=24M --attr engine=true | $T/d-w.img"
    "fil file --attr engine=true | $T/d-f.img"
    "flt faulty | $T/d-q.img"
  )
  for spec in "${drivers[@]}"; do
    read -r -a head <<< "${spec%%|*}"
    read -r -a comps <<< "${spec#*|}"
    name=${head[0]}
    vbmgr create "$name" --driver "${head[1]}" "${head[@]:2}" --backend "$EB_BACKEND" --start \
      "${comps[@]}"
    eb_node_of "$name"
    bd=$EB_BD
    vb_assert_eq "$EB_BACKEND" "$(vb_json "$name" .backend)" "$name: backend"
    eb_node_live "$bd" "$(vb_json "$name" .uuid)" || vb_fail "$name: no tagged kernel device for $bd"
    vb_assert_eq "$(vb_json "$name" .size)" "$(blockdev --getsize64 "$bd")" "$name: size the kernel sees"
    vbmgr wait "$name" > /dev/null || vb_fail "$name: initial sync"
    eb_refmodel "$name" $((8 << 20))
    eb_ext4_round "$bd"
    vbmgr stop "$name"
    ! eb_node_live "$bd" "$(vb_json "$name" .uuid)" || vb_fail "$name: $bd still configured after the stop"
    vb_assert_eq stopped "$(vb_state_of "$name")" "$name: state after the stop"
    vb_log "$name (${head[1]}): $bd, $(cat "/sys/block/${bd#/dev/}/queue/logical_block_size" 2> /dev/null || echo gone)"
  done
  vbmgr start r1
  eb_node_of r1
  bd=$EB_BD
  fsck.ext4 -n -f "$bd" > "$T/fsck.log" 2>&1 || vb_fail "r1 started again: $(cat "$T/fsck.log")"
  vbmgr stop r1
  for spec in "${drivers[@]}"; do
    read -r name _ <<< "$spec"
    vbmgr delete "$name"
  done
}

# ext4 on a raid1 of the backend under fio verify; vblkd SIGKILLed and
# started again: the node stays, the new vblkd takes it over, fio sees no
# error, the filesystem stays mounted and its data verifies. Then the
# raid1 gains a leg online (same size) on the live node. Leaves device
# "n" stopped.
eb_kill_restart () {
  local bd uuid
  for f in n0 n1 n2; do vb_mkimg "$T/k-$f.img" 40M; done
  vbmgr create n --driver raid1 --backend "$EB_BACKEND" --start "$T/k-n0.img" "$T/k-n1.img"
  eb_node_of n
  bd=$EB_BD
  uuid=$(vb_json n .uuid)
  vbmgr wait n > /dev/null || vb_fail "initial sync of n"
  mkfs.ext4 -q -F "$bd"
  mkdir -p "$T/mnt"
  mount "$bd" "$T/mnt"
  head -c 8M /dev/urandom > "$T/keep.bin"
  cp "$T/keep.bin" "$T/mnt/keep.bin"
  fio --name=kill --directory="$T/mnt" --filename=data --size=16M --ioengine=psync --direct=1 \
      --rw=randrw --bs=4k --verify=crc32c --verify_backlog=64 --verify_fatal=1 --time_based \
      --runtime=40 --eta=never --output="$T/fio.log" &
  local fio_pid=$!
  VB_BG_PIDS+=("$fio_pid")
  sleep 5
  vb_kill_daemon
  vb_log "vblkd killed under fio"
  sleep 2
  eb_node_live "$bd" "$uuid" || vb_fail "$bd did not outlive the killed vblkd"
  vb_start_daemon
  vb_wait_until 60 eval '[ -n "$(vb_blockdev_of n)" ]' || vb_fail "n did not start again: $(vbmgr show n)"
  vb_assert_eq "$bd" "$(vb_blockdev_of n)" "the same node after the restart"
  grep -q "took over $bd" "$VB_LOG" || vb_fail "no takeover in the log"
  vb_assert_contains "$(vbmgr show n)" "Backend reason: took over the node" "reason after the takeover"
  wait "$fio_pid" || vb_fail "fio across the restart: $(tail -20 "$T/fio.log")"
  grep -q "err= 0" "$T/fio.log" || vb_fail "fio errors: $(cat "$T/fio.log")"
  vb_log "fio across the restart: $(grep -o 'WRITE: bw=[^,]*' "$T/fio.log" | head -1), no error"
  findmnt "$T/mnt" > /dev/null || vb_fail "the filesystem is no longer mounted"
  cmp "$T/keep.bin" "$T/mnt/keep.bin" || vb_fail "a file written before the kill differs"

  vb_log "online reconfiguration on the live node: n gains a leg, still mounted"
  vbmgr reconfigure n --add "$T/k-n2.img"
  vb_assert_eq "$bd" "$(vb_blockdev_of n)" "the node stays through the reconfiguration"
  vbmgr wait n > /dev/null || vb_fail "rebuild of the new leg"
  vb_assert_eq "in-sync in-sync in-sync" "$(vb_json n '[.components[].state] | join(" ")')" \
    "legs after the grow"
  cmp "$T/keep.bin" "$T/mnt/keep.bin" || vb_fail "a file differs after the reconfiguration"
  umount "$T/mnt"
  fsck.ext4 -n -f "$bd" > "$T/fsck.log" 2>&1 || vb_fail "fsck after the restart: $(cat "$T/fsck.log")"
  cmp -i 1M:1M "$T/k-n0.img" "$T/k-n2.img" || vb_fail "the new leg differs from the first"
  vbmgr stop n
}

# Auto picks the backend for a raid1 without metadata (backend kernel's md
# needs vblk's superblocks) and vbmgr show says why; an explicit backend
# says "requested".
eb_auto_reason () {
  local show reason
  for f in a0 a1 e0 e1; do vb_mkimg "$T/r-$f.img" 40M; done
  vbmgr create a --driver raid1 --attr metadata=none --attr bitmap=none --start \
    "$T/r-a0.img" "$T/r-a1.img"
  eb_node_of a
  show=$(vbmgr show a)
  vb_assert_contains "$show" "Backend: $EB_BACKEND" "vbmgr show: the backend auto picked"
  reason=$(grep '^Backend reason: ' <<< "$show") || vb_fail "vbmgr show gives no reason: $show"
  vb_assert_contains "$reason" "auto: the first that runs driver 'raid1'" "reason"
  vb_assert_contains "$reason" "kernel: driver 'raid1' on md needs metadata" "reason names what kernel lacks"
  vb_log "$reason"
  vbmgr create e --driver raid1 --backend "$EB_BACKEND" --start "$T/r-e0.img" "$T/r-e1.img"
  vb_assert_eq "requested" "$(vbmgr show e | sed -n 's/^Backend reason: //p')" "reason of an explicit backend"
  for x in a e; do
    vbmgr stop "$x"
    vbmgr delete "$x"
  done
  vb_expect_fail NotSupported vbmgr create x --driver window --attr offset=0 --attr size=8M \
    --backend "$EB_BACKEND" "$T/r-a0.img"
}

# Queue depth 128 under fio verify on a raid1 of three legs of the backend,
# while a leg fails and the engine is swapped (a fourth leg added online):
# fio sees no error and verifies the blocks it wrote as it goes; the device
# ends with the failed leg faulty, the new one in sync, and every copy in
# sync the same byte for byte. Deletes device "st".
eb_legs () { vb_json "$1" '[.components[].state] | join(" ")'; }
eb_stress () {
  local bd
  for f in s0 s1 s2 s3; do vb_mkimg "$T/s-$f.img" 64M; done
  vbmgr create st --driver raid1 --backend "$EB_BACKEND" --start "$T/s-s0.img" "$T/s-s1.img" \
    "$T/s-s2.img"
  eb_node_of st
  bd=$EB_BD
  vbmgr wait st > /dev/null || vb_fail "initial sync of st"
  fio --name=stress --filename="$bd" --ioengine=io_uring --direct=1 --rw=randwrite --bs=4k \
      --iodepth=128 --size=48M --verify=crc32c --verify_backlog=4096 --verify_fatal=1 \
      --time_based --runtime=16 --eta=never --output="$T/stress.log" &
  local fio_pid=$!
  VB_BG_PIDS+=("$fio_pid")
  sleep 4
  vbmgr fail st "$T/s-s1.img"
  vb_log "st: a leg failed under QD 128"
  sleep 3
  vbmgr reconfigure st --add "$T/s-s3.img"
  vb_log "st: the engine swapped under QD 128 (a leg added)"
  wait "$fio_pid" || vb_fail "fio under the failure and the swap: $(tail -20 "$T/stress.log")"
  grep -q "err= 0" "$T/stress.log" || vb_fail "fio errors: $(cat "$T/stress.log")"
  vb_log "st: $(grep -oE 'WRITE: bw=[^,]*' "$T/stress.log"), no error"
  # (vbmgr wait says no: a degraded device is not what it waits for)
  vb_wait_until 120 eval '[ "$(eb_legs st)" = "in-sync faulty in-sync in-sync" ]' ||
    vb_fail "st's legs after the failure and the swap: $(vbmgr show st)"
  vbmgr stop st
  # the copies in sync hold the same bytes (past the metadata's first MiB)
  for f in s2 s3; do
    cmp -i 1M "$T/s-s0.img" "$T/s-$f.img" > /dev/null ||
      vb_fail "st: legs s0 and $f differ after the failure and the swap"
  done
  vbmgr delete st
}
