#!/bin/bash
# A device grows with its components only when every slot holds its own
# component, in sync (found by the torture test, seed 2 raid10): with a
# slot failed, larger disks in the others must not grow the device, or the
# spare that then takes the failed slot — no larger than the data was —
# cannot hold its copy (ENOSPC in its rebuild, the slot failed again).
# With every slot in sync the device still grows, as before.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

for f in a b c; do vb_mkimg "$T/$f.img" 64M; done
vbmgr create r1 --driver raid1 --attr bitmap_chunk=1M --start "$T/a.img" "$T/b.img"
vbmgr wait r1 > /dev/null || vb_fail "initial resync"
size=$(vb_json r1 .size)
head -c $((32 << 20)) /dev/urandom > "$T/expected"
dd if="$T/expected" of="$(vb_blockdev_of r1)" bs=1M oflag=direct status=none
vbmgr fail r1 "$T/b.img"
vb_wait_state r1 degraded 10
vbmgr stop r1

vb_log "a.img and the failed b.img grow; c.img stays 64M and becomes a spare"
truncate -s 96M "$T/a.img" "$T/b.img"
vbmgr add r1 "$T/c.img" --spare
vbmgr start r1
vbmgr wait r1 > /dev/null || vb_fail "rebuild onto the spare: $(vbmgr show r1)"
vb_assert_eq "$size" "$(vb_json r1 .size)" "size with a slot out"
vb_assert_eq "$size" "$(blockdev --getsize64 "$(vb_blockdev_of r1)")" "node size with a slot out"
vb_assert_eq "in-sync in-sync" \
  "$(vb_json r1 '[.components[] | select(.role != "faulty") | .state] | join(" ")')" \
  "the spare took the failed slot and is in sync"
vb_assert_eq 0 "$(vb_json r1 "[.components[] | select(.source == \"$T/c.img\") | .errors] | add")" \
  "errors of the spare"
cmp -n $((32 << 20)) "$T/expected" "$(vb_blockdev_of r1)" || vb_fail "data differs"
vbmgr stop r1

vb_log "every slot in sync: the device grows with its components"
truncate -s 96M "$T/c.img"
vbmgr start r1
vbmgr wait r1 > /dev/null || vb_fail "resync after growing"
grown=$(vb_json r1 .size)
[ "$grown" -gt "$size" ] || vb_fail "the device did not grow: $grown bytes (was $size)"
cmp -n $((32 << 20)) "$T/expected" "$(vb_blockdev_of r1)" || vb_fail "data differs after growing"
vbmgr stop r1
vbmgr delete r1
vb_stop_daemon
