#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Power loss, replayed. A vblk raid1 over two legs, each under the kernel's
# dm-log-writes, which logs every write that a flush made durable (and
# nothing that was still in a volatile cache): ext4 on the array, a
# workload of creates, appends, overwrites, renames and unlinks, each
# fsync'ed and followed by a mark on both logs. Then the power is cut at
# many points: each leg's log is replayed (tests/tools/vb-log-replay) to
# a mark, or to a flush or FUA between two marks (paired by their order on
# the two legs, and one leg a flush ahead of the other); the array is
# adopted from the replayed copies (vbmgr scan --adopt) and started, it
# does the resync its metadata asks for; the filesystem mounts (its
# journal replayed), every file fsync'ed before the last mark both legs
# passed holds what it held (one the next step was changing is not
# checked), e2fsck -fn is clean and the two legs hold the same data once
# the array is stopped. A control cut first: at mark s0, checked against
# step 1's files, the check must find step 1's file missing.
# Twice: the engine on ublk, and kernel md with vblk's metadata (vblkd as
# its mdmon). VB_PL_CUTS (default 6): the cuts checked per array, spread
# over all with a seeded offset (VB_PL_SEED), the last always; all: every
# one. VB_PL_STEPS (16): the workload's steps. VB_PL_BACKENDS ("ublk
# kernel"). VB_PL_KEEP=DIR: where a failed cut leaves the logs, their
# listings, the workload's records and the legs. Needs dm-log-writes, md
# and ublk_drv: runs in the VM (tests/vm), skips elsewhere.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
modprobe dm-log-writes 2> /dev/null || true
modprobe ublk_drv 2> /dev/null || true
if ! dmsetup targets 2> /dev/null | grep -q '^log-writes' || [ ! -e /dev/ublk-control ] ||
   ! modprobe raid1 2> /dev/null; then
  echo "SKIP: needs dm-log-writes, md raid1 and ublk_drv (run it in the VM: tests/vm)" >&2
  exit 77
fi
: "${VB_LOG_REPLAY:?}"
seed=${VB_PL_SEED:-$RANDOM}
cuts_wanted=${VB_PL_CUTS:-6}
steps=${VB_PL_STEPS:-16}
vb_log "seed $seed (VB_PL_SEED), $steps steps, cuts: $cuts_wanted"

mkdir -p "$T/policy"
export VB_DAEMON_ARGS="--policy-dir $T/policy"   # nothing assembles on its own
vb_setup
vb_start_daemon
vb_on_cleanup 'dmsetup remove --retry pl-a; dmsetup remove --retry pl-b'
# a node left by a failed run: a ublk device whose server is gone would hold
# the unmount, an md array the loop devices
PL_NODES=()
pl_track () {
  local bd
  bd=$("$VBMGR" show pl --json 2> /dev/null | jq -r '.block_device // empty') || true
  [ -z "$bd" ] || PL_NODES+=("$bd")
}
vb_on_cleanup_early 'for n in "${PL_NODES[@]}"; do
  [[ "$n" != /dev/ublkb* ]] || "$VB_UBLK_CTL" delete "${n#/dev/ublkb}"; done'
vb_on_cleanup 'for n in "${PL_NODES[@]}"; do
  [[ "$n" != /dev/md* ]] || mdadm --stop "$n"; done'

leg_size=$((32 << 20))
leg_sectors=$((leg_size / 512))

# pl_table LEG linear|log-writes: (re)load pl-LEG's table over its loop
pl_table () {
  local leg=$1 kind=$2 table
  if [ "$kind" = linear ]; then
    table="0 $leg_sectors linear ${PL_LOOP[$leg]} 0"
  else
    table="0 $leg_sectors log-writes ${PL_LOOP[$leg]} ${PL_LOG[$leg]}"
  fi
  if [ -e "/dev/mapper/pl-$leg" ]; then
    dmsetup suspend "pl-$leg"
    dmsetup load "pl-$leg" --table "$table"
    dmsetup resume "pl-$leg"
  else
    dmsetup create "pl-$leg" --table "$table"
  fi
}
pl_mark () { dmsetup message pl-a 0 mark "$1"; dmsetup message pl-b 0 mark "$1"; }

# pl_workload DIR: the steps; after step K, $T/w/state.K holds every file
# fsync'ed so far with its SHA-256 ("-" once unlinked) and touched.K the
# files step K changed; mark sK follows on both logs
pl_workload () {
  local dir=$1 k op f n victim seek
  local -A sum=()
  local -a names=() ops=(create append overwrite replace unlink)
  rm -rf "$T/w"
  mkdir -p "$T/w"
  : > "$T/w/state.0"
  : > "$T/w/touched.0"
  pl_mark s0
  # (every draw in this shell: a subshell's RANDOM is seeded afresh)
  RANDOM=$seed
  for ((k = 1; k <= steps; k++)); do
    n=$(( (RANDOM % 64 + 1) * 4096 + RANDOM % 4096 ))
    seek=$((RANDOM % 16))
    op=create
    [ "${#names[@]}" -le 2 ] || op=${ops[$((RANDOM % 5))]}
    victim=${names[$((RANDOM % (${#names[@]} > 0 ? ${#names[@]} : 1)))]:-}
    case $op in
      create)
        f=f$k
        head -c "$n" /dev/urandom > "$dir/$f"
        names+=("$f") ;;
      append)
        f=$victim
        head -c "$n" /dev/urandom >> "$dir/$f" ;;
      overwrite)
        f=$victim
        head -c "$n" /dev/urandom |
          dd of="$dir/$f" bs=4096 seek="$seek" conv=notrunc status=none ;;
      replace)
        f=$victim
        head -c "$n" /dev/urandom > "$dir/.$f.tmp"
        sync "$dir/.$f.tmp"
        mv "$dir/.$f.tmp" "$dir/$f" ;;
      unlink)
        f=$victim
        rm "$dir/$f"
        mapfile -t names < <(printf '%s\n' "${names[@]}" | grep -vx "$f") ;;
    esac
    # a file nobody fsyncs: whatever of it survives is fine
    n=$((RANDOM % 65536))
    head -c "$n" /dev/urandom > "$dir/junk$((k % 3))"
    if [ -e "$dir/$f" ]; then
      sync "$dir/$f"
      sum[$f]=$(sha256sum < "$dir/$f" | cut -d' ' -f1)
    else
      sum[$f]=-
    fi
    sync "$dir"
    for n in "${!sum[@]}"; do echo "$n ${sum[$n]}"; done | sort > "$T/w/state.$k"
    echo "$f" > "$T/w/touched.$k"
    pl_mark "s$k"
  done
  : > "$T/w/touched.$((steps + 1))"
}

# pl_check_files DIR K: every file of state.K not touched by step K+1;
# PL_BAD says what is wrong (the caller unmounts before it fails)
pl_check_files () {
  local dir=$1 k=$2 f want got checked=0
  PL_BAD=
  while read -r f want; do
    if grep -qx "$f" "$T/w/touched.$((k + 1))" 2> /dev/null; then
      continue
    fi
    if [ "$want" = - ]; then
      [ ! -e "$dir/$f" ] || PL_BAD+="$f was unlinked and fsync'ed by step $k, it is back; "
    elif [ ! -f "$dir/$f" ]; then
      PL_BAD+="$f (fsync'ed by step $k) is missing; "
    else
      got=$(sha256sum < "$dir/$f" | cut -d' ' -f1)
      [ "$got" = "$want" ] || PL_BAD+="$f does not hold what was fsync'ed by step $k; "
    fi
    checked=$((checked + 1))
  done < "$T/w/state.$k"
  PL_FILES_CHECKED=$((PL_FILES_CHECKED + checked))
}

# pl_cuts: from the two logs' listings, the cuts as "K INDEX_A INDEX_B KIND",
# both indices never going back: every mark sK on both legs, and between
# two marks (or after the last) the flushes/FUAs of each leg paired by
# order, one leg a flush ahead of the other first (a at even K, b at odd)
pl_cuts () {
  awk -v steps="$steps" '
    FNR == 1 { leg++ }
    /^#/ { next }
    {
      idx = $1; flags = $2
      if (flags ~ /M/) {
        if ($5 ~ /^s[0-9]+$/) { k = substr($5, 2) + 0; mark[leg, k] = idx; cur[leg] = k; seen[leg] = 1 }
        next
      }
      if (!seen[leg]) next
      if (flags ~ /[FU]/) { n = ++nf[leg, cur[leg]]; fl[leg, cur[leg], n] = idx }
    }
    END {
      for (k = 0; k <= steps; k++) {
        if (!((1, k) in mark) || !((2, k) in mark)) { print "missing mark s" k > "/dev/stderr"; exit 1 }
        a = mark[1, k]; b = mark[2, k]
        print k, a, b, "mark"
        na = nf[1, k]; nb = nf[2, k]
        if (na != nb) print "# between s" k " and the next: " na " flushes on a, " nb " on b"
        m = na > nb ? na : nb
        for (j = 1; j <= m; j++) {
          ja = j <= na ? fl[1, k, j] : (na ? fl[1, k, na] : a)
          jb = j <= nb ? fl[2, k, j] : (nb ? fl[2, k, nb] : b)
          # (only where both legs move: else it is the next pair itself)
          if (k % 2 == 0 && ja != a && jb != b) print k, ja, b, "a-ahead"
          if (k % 2 == 1 && ja != a && jb != b) print k, a, jb, "b-ahead"
          print k, ja, jb, "flush"
          a = ja; b = jb
        }
      }
    }' "$T/la.list" "$T/lb.list"
}

# pl_keep: with VB_PL_KEEP=DIR, what a failed cut needs to be looked at
# again: the logs, their listings, the workload's records, the legs before
# the logs and the legs of the cut
pl_keep () {
  [ -n "${VB_PL_KEEP:-}" ] || return 0
  mkdir -p "$VB_PL_KEEP"
  cp -r --sparse=always "$T/w" "$T"/l?.list "$T"/l?.log "$T"/base?.img "$T"/c?.img \
    "$T/cuts" "$VB_PL_KEEP/" || true
  vb_log "kept in $VB_PL_KEEP"
}

pl_fail () { pl_keep; vb_fail "$@"; }

# pl_cut K IA IB KIND: the power cut there; replays the working copies on
pl_cut () {
  local k=$1 ia=$2 ib=$3 kind=$4 leg idx state la lb bd synced start=$SECONDS log_lines rc
  PL_CUT="$k/$ia/$ib ($kind)"
  for leg in a b; do
    idx=$ia
    [ "$leg" = a ] || idx=$ib
    if [ "$idx" -gt "${PL_AT[$leg]}" ]; then
      "$VB_LOG_REPLAY" replay "$T/l$leg.log" "$T/w$leg.img" $((PL_AT[$leg] + 1)) "$idx" ||
        pl_fail "cut $PL_CUT: replaying leg $leg"
      PL_AT[$leg]=$idx
    fi
    cp --sparse=always "$T/w$leg.img" "$T/c$leg.img"
  done
  la=$(losetup --find --show "$T/ca.img")
  lb=$(losetup --find --show "$T/cb.img")
  log_lines=$(wc -l < "$VB_LOG")
  vbmgr scan --adopt "$la" "$lb" > /dev/null || pl_fail "cut $PL_CUT: adopting the legs"
  [ "$(vb_json pl .backend)" = "$PL_BACKEND" ] || vbmgr reconfigure pl --backend "$PL_BACKEND"
  rc=0
  vbmgr start pl || rc=$?
  pl_track
  [ "$rc" = 0 ] || pl_fail "cut $PL_CUT: the array does not start"
  vbmgr wait pl > /dev/null 2>&1 || pl_fail "cut $PL_CUT: the resync"
  state=$(vb_state_of pl)
  [ "$state" = active ] || pl_fail "cut $PL_CUT: the array is $state after its resync"
  # what the jobs of this cut copied, as vblkd logs them when they end
  synced=$(tail -n +$((log_lines + 1)) "$VB_LOG" |
    sed -En 's/.*pl: job [0-9]+ \((resync|rebuild|recovery)\) finished: [a-z]+: ([0-9]+) bytes.*/\2/p' |
    awk '{ s += $1 } END { print s + 0 }')
  PL_SYNCED=$((PL_SYNCED + synced))
  bd=$(vb_blockdev_of pl)
  mount "$bd" "$T/mnt" || pl_fail "cut $PL_CUT: ext4 does not mount"
  if [ "$kind" = control ]; then
    # the check itself: at mark s0, step 1's file is not there yet, and
    # checked against step 1's state it must be found missing
    local checked=$PL_FILES_CHECKED
    pl_check_files "$T/mnt" 1
    PL_FILES_CHECKED=$checked
    umount "$T/mnt"
    [[ "$PL_BAD" == *"f1 (fsync'ed by step 1) is missing"* ]] ||
      pl_fail "cut $PL_CUT: checked against step 1, the check says '${PL_BAD:-nothing}'"
  else
    pl_check_files "$T/mnt" "$k"
    umount "$T/mnt"
    [ -z "$PL_BAD" ] || pl_fail "cut $PL_CUT: ${PL_BAD%; }"
  fi
  e2fsck -fn "$bd" > "$T/fsck.log" 2>&1 || pl_fail "cut $PL_CUT: e2fsck -fn: $(cat "$T/fsck.log")"
  vbmgr stop pl
  cmp -i 1M:1M "$la" "$lb" > /dev/null || pl_fail "cut $PL_CUT: the legs differ after the resync"
  vbmgr delete pl
  losetup -d "$la" "$lb"
  vb_log "cut $PL_CUT: $((synced >> 10)) KiB resynced, checked in $((SECONDS - start)) s"
}

# pl_run BACKEND: build the array, log the workload, check the cuts
pl_run () {
  PL_BACKEND=$1
  local leg total picked step offset i bd line
  declare -gA PL_LOOP=() PL_LOG=() PL_AT=()
  for leg in a b; do
    vb_mkimg "$T/$leg.img" "$leg_size"
    vb_mkimg "$T/l$leg.log" 256M
    PL_LOOP[$leg]=$(losetup --find --show "$T/$leg.img")
    PL_LOG[$leg]=$(losetup --find --show "$T/l$leg.log")
    pl_table "$leg" linear
  done
  vbmgr create pl --driver raid1 --backend "$PL_BACKEND" --attr bitmap_chunk=1M --start \
    /dev/mapper/pl-a /dev/mapper/pl-b || { pl_track; vb_fail "$PL_BACKEND: creating the array"; }
  pl_track
  vbmgr wait pl > /dev/null
  bd=$(vb_blockdev_of pl)
  mkfs.ext4 -q -F -b 4096 -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "$bd"
  vbmgr stop pl
  # the legs as they are before anything is logged are where the replays
  # start; then the logs start
  for leg in a b; do
    cp --sparse=always "$T/$leg.img" "$T/w$leg.img"
    [ -z "${VB_PL_KEEP:-}" ] || cp --sparse=always "$T/w$leg.img" "$T/base$leg.img"
    [ "$(cat "/sys/block/$(basename "$(readlink -f "/dev/mapper/pl-$leg")")/queue/write_cache")" = \
      "write back" ] || vb_fail "pl-$leg: no volatile cache, no flush would be logged"
    pl_table "$leg" log-writes
  done
  vbmgr start pl || { pl_track; vb_fail "$PL_BACKEND: starting the array over the logs"; }
  pl_track
  bd=$(vb_blockdev_of pl)
  mkdir -p "$T/mnt"
  mount "$bd" "$T/mnt"
  pl_workload "$T/mnt"
  umount "$T/mnt"
  vbmgr stop pl
  for leg in a b; do
    dmsetup status "pl-$leg" | grep -qv logging_disabled || vb_fail "pl-$leg: its log overflowed"
    # the entry count is final only once the target is gone
    dmsetup remove --retry "pl-$leg"
    losetup -d "${PL_LOG[$leg]}"
    "$VB_LOG_REPLAY" list "$T/l$leg.log" > "$T/l$leg.list"
    vb_log "$PL_BACKEND: leg $leg: $(head -n1 "$T/l$leg.list")"
  done
  vbmgr delete pl
  losetup -d "${PL_LOOP[a]}" "${PL_LOOP[b]}"
  PL_AT=([a]=-1 [b]=-1)

  pl_cuts > "$T/cuts.all" || vb_fail "$PL_BACKEND: a mark is missing from a log"
  grep '^#' "$T/cuts.all" >&2 || true
  grep -v '^#' "$T/cuts.all" > "$T/cuts"
  total=$(wc -l < "$T/cuts")
  if [ "$cuts_wanted" = all ] || [ "$cuts_wanted" -ge "$total" ]; then
    cp "$T/cuts" "$T/cuts.picked"
  else
    # evenly spread, from a seeded offset; the last (a clean stop) always
    step=$(( total / cuts_wanted ))
    offset=$(( seed % step ))
    awk -v s="$step" -v o="$offset" -v n="$total" '(NR - 1) % s == o || NR == n' "$T/cuts" \
      > "$T/cuts.picked"
  fi
  # first the control: a cut whose check must fail
  sed -n '1s/ mark$/ control/p' "$T/cuts" > "$T/cuts.control"
  [ -s "$T/cuts.control" ] || vb_fail "$PL_BACKEND: the first cut is not mark s0"
  cat "$T/cuts.control" "$T/cuts.picked" > "$T/cuts.run"
  picked=$(wc -l < "$T/cuts.picked")
  PL_FILES_CHECKED=0 PL_SYNCED=0
  i=0
  while read -r line <&3; do
    # shellcheck disable=SC2086 # the four fields of a cut
    pl_cut $line
    i=$((i + 1))
  done 3< "$T/cuts.run"
  vb_log "power-loss ($PL_BACKEND): $picked of $total cuts checked" \
         "($(grep -c ' mark$' "$T/cuts.picked") at marks," \
         "$(grep -c ' flush$' "$T/cuts.picked") at paired flushes," \
         "$(grep -c 'ahead$' "$T/cuts.picked") with one leg a flush ahead)," \
         "$PL_FILES_CHECKED file checks, $((PL_SYNCED >> 20)) MiB resynced;" \
         "the control cut's check found what it must"
  [ "$i" -eq $((picked + 1)) ] || vb_fail "$PL_BACKEND: $i cuts of $picked and the control checked"
  rm -f "$T"/?.img "$T"/w?.img "$T"/c?.img "$T"/l?.log "$T"/base?.img
}

for backend in ${VB_PL_BACKENDS:-ublk kernel}; do
  pl_run "$backend"
done
