#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A component the administrator failed comes back only through an explicit
# re-add (vbmgr add of its own path), never as a side effect (issue 15,
# defect E): a reconfiguration that adds a leg keeps it faulty, with its
# error count, not read and not written; so does a stop and a start; then
# `vbmgr add` re-adds it through the bitmap (only the chunks written while
# it was out) and every leg ends equal.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

dev=r1
states () { vb_json "$dev" '[.components[].state] | join(" ")'; }
errors_of () { vb_json "$dev" ".components[] | select(.source == \"$1\") | .errors"; }
# every 64 KiB block of the node read 4 times in a row (consecutive reads go
# to different legs) equals $1
check_reads () {
  python3 - "$(vb_blockdev_of "$dev")" "$1" <<'PY' || vb_fail "reads differ from $1"
import mmap, os, sys
node, expected = sys.argv[1], sys.argv[2]
block = 64 << 10
fd = os.open(node, os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, block)
bad = 0
with open(expected, "rb") as f:
    for off in range(0, os.path.getsize(expected), block):
        want = f.read(block)
        for _ in range(4):
            if os.preadv(fd, [buf], off) != len(want) or buf[:len(want)] != want:
                bad += 1
os.close(fd)
sys.exit(1 if bad else 0)
PY
}

for f in a b c; do vb_mkimg "$T/$f.img" 64M; done
vbmgr create r1 --driver raid1 --attr bitmap_chunk=1M --start "$T/a.img" "$T/b.img"
vbmgr wait r1 > /dev/null || vb_fail "initial resync"
head -c $((63 << 20)) /dev/urandom > "$T/expected"
dd if="$T/expected" of="$(vb_blockdev_of r1)" bs=1M oflag=direct status=none
# a clean stop clears the bitmap: what follows is all it records
vbmgr stop r1
vbmgr start r1

vb_log "a.img failed by the administrator"
vbmgr fail r1 "$T/a.img"
vb_wait_state r1 degraded 10
vb_assert_eq "faulty in-sync" "$(states)" "states after the failure"
vb_assert_eq 1 "$(errors_of "$T/a.img")" "errors of a.img"
head -c $((4 << 20)) /dev/urandom > "$T/more"
dd if="$T/more" of="$(vb_blockdev_of r1)" bs=1M seek=8 oflag=direct status=none
dd if="$T/more" of="$T/expected" bs=1M seek=8 conv=notrunc status=none
sum_a=$(sha256sum < "$T/a.img")

vb_log "reconfigure --add c.img: a.img stays faulty"
vbmgr reconfigure r1 --add "$T/c.img"
vb_wait_jobs r1 || vb_fail "rebuild of c.img"
vb_assert_eq "faulty in-sync in-sync" "$(states)" "states after the reconfiguration"
vb_assert_eq 1 "$(errors_of "$T/a.img")" "errors of a.img after the reconfiguration"
vb_assert_eq degraded "$(vb_state_of r1)" "device state"
vb_assert_eq "faulty in-sync in-sync" \
  "$(vbmgr examine --json "$T/b.img" | jq -r '[.roles[].state] | join(" ")')" "b.img's role table"
check_reads "$T/expected"
dd if="$T/more" of="$(vb_blockdev_of r1)" bs=1M seek=20 oflag=direct status=none
dd if="$T/more" of="$T/expected" bs=1M seek=20 conv=notrunc status=none
vb_assert_eq "$sum_a" "$(sha256sum < "$T/a.img")" "a.img written while faulty"

vb_log "stop and start: a.img still faulty"
vbmgr stop r1
vbmgr start r1
vb_assert_eq "faulty in-sync in-sync" "$(states)" "states after the restart"
vb_assert_eq degraded "$(vb_state_of r1)" "device state after the restart"
check_reads "$T/expected"
vb_assert_eq "$sum_a" "$(sha256sum < "$T/a.img")" "a.img written by the restart"

vb_log "the explicit re-add brings it back through the bitmap"
vbmgr add r1 "$T/a.img"
vbmgr wait r1 > /dev/null || vb_fail "re-add of a.img"
job=$(vbmgr jobs --json | jq -c '[.[] | select(.device == "r1" and .operation == "rebuild")] | last')
vb_assert_eq finished "$(jq -r .state <<< "$job")" "re-add finished"
vb_assert_eq $((8 << 20)) "$(jq -r .bytes <<< "$job")" "re-add copied the 8 chunks written meanwhile"
vb_assert_eq "in-sync in-sync in-sync" "$(states)" "states after the re-add"
vb_assert_eq active "$(vb_state_of r1)" "device state after the re-add"
check_reads "$T/expected"
vbmgr stop r1
cmp -i 1M:1M "$T/a.img" "$T/b.img" || vb_fail "a.img and b.img differ"
cmp -i 1M:1M "$T/c.img" "$T/b.img" || vb_fail "c.img and b.img differ"
vbmgr delete r1

vb_log "metadata=none: the desired state keeps a failed leg faulty the same way"
dev=m1
for f in a b c; do vb_mkimg "$T/$f.img" 64M; done
vbmgr create m1 --driver raid1 --attr metadata=none --attr bitmap=none --start "$T/a.img" "$T/b.img"
vbmgr wait m1 > /dev/null || vb_fail "initial resync of m1"
head -c $((64 << 20)) /dev/urandom > "$T/expected"
dd if="$T/expected" of="$(vb_blockdev_of m1)" bs=1M oflag=direct status=none
vbmgr fail m1 "$T/a.img"
vb_wait_state m1 degraded 10
faulty_in_state () { vb_state | jq -r '.devices[] | select(.name == "m1") | .components[] |
  select(.source == "'"$1"'") | .faulty // false'; }
vb_wait_until 10 eval '[ "$(faulty_in_state "$T/a.img")" = true ]' ||
  vb_fail "state.json does not record a.img faulty: $(vb_state)"
dd if="$T/more" of="$(vb_blockdev_of m1)" bs=1M seek=8 oflag=direct status=none
dd if="$T/more" of="$T/expected" bs=1M seek=8 conv=notrunc status=none
sum_a=$(sha256sum < "$T/a.img")
vbmgr reconfigure m1 --add "$T/c.img"
vb_wait_jobs m1 || vb_fail "rebuild of c.img on m1"
vb_assert_eq "faulty in-sync in-sync" "$(states)" "m1's states after the reconfiguration"
vb_assert_eq 1 "$(errors_of "$T/a.img")" "errors of a.img on m1 after the reconfiguration"
vbmgr stop m1
vbmgr start m1
vb_assert_eq "faulty in-sync in-sync" "$(states)" "m1's states after the restart"
check_reads "$T/expected"
vb_assert_eq "$sum_a" "$(sha256sum < "$T/a.img")" "a.img of m1 written while faulty"
vb_log "metadata=none: the re-add copies every byte"
vbmgr add m1 "$T/a.img"
vbmgr wait m1 > /dev/null || vb_fail "re-add of a.img on m1"
vb_assert_eq "in-sync in-sync in-sync" "$(states)" "m1's states after the re-add"
vb_assert_eq false "$(faulty_in_state "$T/a.img")" "state.json after the re-add"
check_reads "$T/expected"
vbmgr stop m1
cmp "$T/a.img" "$T/b.img" || vb_fail "m1: a.img and b.img differ"
vbmgr delete m1
vb_stop_daemon
