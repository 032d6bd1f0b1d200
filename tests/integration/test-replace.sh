#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Component.Replace (issue 19, part 5): a live leg of a raid1 replaced by a
# new disk while fio writes and verifies on the device the whole time: the
# new leg joins as another copy and is rebuilt, the old leg serves until the
# new one is in sync and only then leaves; not one I/O error or mismatch
# reaches fio. A cancelled replace takes the new leg out again and the old
# stays; what Replace cannot do is refused saying why.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

for f in a b c d e f; do vb_mkimg "$T/$f.img" 128M; done
replace () { # replace DEVICE INDEX SOURCE — Component.Replace, errors as vbmgr says them
  local out rc=0
  out=$(gdbus call --system --dest org.vblk.VBlk1 --timeout 300 \
          --object-path "/org/vblk/VBlk1/devices/$1/components/$2" \
          --method org.vblk.VBlk1.Component.Replace "$3" '{}' 2>&1) || rc=$?
  [ "$rc" -eq 0 ] ||
    { sed -E 's/.*org\.vblk\.VBlk1\.Error\.([A-Za-z]+): /gdbus: \1: /' <<< "$out" >&2; return 1; }
}
legs () { vb_json r '[.components[] | "\(.source | split("/") | last):\(.state)"] | join(" ")'; }

vbmgr create r --driver raid1 --attr sync_speed_max=32M --attr bitmap_chunk=1M --start \
  "$T/a.img" "$T/b.img"
vbmgr wait r > /dev/null || vb_fail "initial resync"
node=$(vb_blockdev_of r)
fio_job=(--name=replace --filename="$node" --size=96M --ioengine=psync --direct=1 --rw=randrw
         --bs=4k --verify=crc32c --verify_backlog=256 --verify_fatal=1 --time_based --runtime=30
         --randseed=7)
fio "${fio_job[@]}" --output="$T/fio.log" &
fio_pid=$!
VB_BG_PIDS+=("$fio_pid")
sleep 2

vb_log "b.img replaced by c.img under fio: b serves until c is in sync"
replace r 1 "$T/c.img" > "$T/replace.out" 2>&1 &
replacer=$!
VB_BG_PIDS+=("$replacer")
vb_wait_until 10 eval '[ "$(legs)" = "a.img:in-sync b.img:in-sync c.img:rebuilding" ]' ||
  vb_fail "while c fills, b is not still in service: $(legs)"
job=$(vbmgr jobs --json | jq -c '[.[] | select(.operation == "replace")] | last')
vb_assert_eq "running true" "$(jq -r '"\(.state) \(.cancelable)"' <<< "$job")" "the replace job"
wait "$replacer" || vb_fail "Replace failed: $(cat "$T/replace.out")"
vb_assert_eq "a.img:in-sync c.img:in-sync" "$(legs)" "r's legs after the replace"
vb_assert_eq finished "$(vbmgr jobs --json | jq -r '[.[] | select(.operation == "replace")] | last | .state')" \
  "the replace job"
rc=0
wait "$fio_pid" || rc=$?
[ "$rc" -eq 0 ] || vb_fail "fio saw an error or a mismatch: $(tail -20 "$T/fio.log")"
vb_assert_contains "$(cat "$T/fio.log")" "err= 0" "fio's report"
vb_log "$(grep -E "READ:|WRITE:" "$T/fio.log" | tr -s ' ')"
vbmgr check r > /dev/null
vbmgr wait r > /dev/null || vb_fail "check after the replace"
vb_assert_eq 0 "$(vbmgr jobs --json | jq '[.[] | select(.operation == "check")] | last | .mismatches')" \
  "mismatches after the replace"

vb_log "a replace cancelled while d fills: d taken out again, a stays"
vbmgr set r sync_speed_max=1M
replace r 0 "$T/d.img" > "$T/cancel.out" 2>&1 &
replacer=$!
VB_BG_PIDS+=("$replacer")
vb_wait_until 10 eval '[ "$(vbmgr jobs --json | jq -r "[.[] | select(.operation == \"replace\")] | last | .state")" = running ]' ||
  vb_fail "the second replace did not start"
number=$(vbmgr jobs --json | jq -r '[.[] | select(.operation == "replace")] | last | .id')
sleep 1
vbmgr cancel "$number" > /dev/null
rc=0
wait "$replacer" || rc=$?
vb_assert_eq 1 "$rc" "Replace's exit after the cancel"
vb_assert_contains "$(cat "$T/cancel.out")" "cancelled while '$T/d.img' was being filled; '$T/a.img' stays" \
  "the answer"
vb_assert_eq cancelled "$(vbmgr jobs --json | jq -r --argjson n "$number" '.[] | select(.id == $n) | .state')" \
  "the cancelled job"
vb_assert_eq "a.img:in-sync c.img:in-sync" "$(legs)" "r's legs after the cancel"
vbmgr set r sync_speed_max=0

vb_log "what Replace cannot do, refused saying why"
vb_expect_fail InvalidArgument replace r 0 "relative.img"
vbmgr create z --driver raid0 --start "$T/e.img" "$T/f.img"
vb_expect_fail NotSupported replace z 0 "$T/d.img"
vb_assert_contains "$VB_ERR" "only raid1 has room for" "raid0"
vbmgr stop r
vb_expect_fail NotSupported replace r 0 "$T/d.img"
vb_assert_contains "$VB_ERR" "is not started" "a stopped device"
vb_log "ok"
