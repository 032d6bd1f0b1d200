#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A component that is gone when its device starts: a raid1 starts degraded,
# the survivor's superblock records the slot missing, writes go on; when
# the component is back, `vbmgr add` re-adds it by copying only the chunks
# written meanwhile. A device with no copy of its data left does not start.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

examine () { vbmgr examine --json "$1"; }

vb_mkimg "$T/a.img" 32M
vb_mkimg "$T/b.img" 32M
vbmgr create r --driver raid1 --attr bitmap_chunk=1M --start "$T/a.img" "$T/b.img"
vbmgr wait r > /dev/null || vb_fail "initial resync"
dd if=/dev/urandom of="$(vb_blockdev_of r)" bs=1M count=31 oflag=direct status=none
vbmgr stop r

vb_log "b is gone: r starts degraded"
mv "$T/b.img" "$T/b.away"
vbmgr start r
vb_assert_eq degraded "$(vb_state_of r)" "state without b"
vb_assert_eq "in-sync missing" "$(vb_json r '[.components[].state] | join(" ")')" "component states"
vb_assert_eq missing "$(examine "$T/a.img" | jq -r '.roles[1].state')" "a records slot 1 missing"
bd=$(vb_blockdev_of r)
dd if=/dev/urandom of="$T/pattern" bs=1M count=2 status=none
dd if="$T/pattern" of="$bd" bs=1M seek=4 oflag=direct status=none
cp "$bd" "$T/expected.img"

vb_log "b is back: re-added with only the chunks written meanwhile"
mv "$T/b.away" "$T/b.img"
vbmgr add r "$T/b.img"
vbmgr wait r > /dev/null || vb_fail "re-add of b"
job=$(vbmgr jobs --json | jq -c '[.[] | select(.device == "r" and .operation == "rebuild")] | last')
vb_assert_eq finished "$(jq -r .state <<< "$job")" "re-add finished"
vb_assert_eq $((2 << 20)) "$(jq -r .bytes <<< "$job")" "re-add copied the 2 chunks written while b was gone"
vb_assert_eq active "$(vb_state_of r)" "active again"
cmp "$T/expected.img" "$bd" || vb_fail "data after the re-add"
vbmgr stop r
cmp -i 1M:1M "$T/a.img" "$T/b.img" || vb_fail "legs differ after the re-add"

vb_log "both gone: the start is refused, and says why"
mv "$T/a.img" "$T/a.away"
mv "$T/b.img" "$T/b.away"
vb_expect_fail NotFound vbmgr start r
vb_assert_contains "$VB_ERR" "none of its components is there" "message"
mv "$T/a.away" "$T/a.img"
mv "$T/b.away" "$T/b.img"
vbmgr start r
vb_assert_eq active "$(vb_state_of r)" "starts again with both"
vbmgr stop r
vbmgr delete r
vb_stop_daemon
