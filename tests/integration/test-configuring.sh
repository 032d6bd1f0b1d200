#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A device is configured before it has a block node: created without its
# component it is 'configuring' and Start is refused; once the component is
# added it is 'ready' and starts.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

img=$T/disk.img
vb_mkimg "$img" 8M
vb_mkimg "$T/other.img" 8M
vbmgr create disk --driver window --attr offset=1M
vb_assert_eq configuring "$(vb_state_of disk)" "state without components"
vb_assert_eq 0 "$(vb_json disk .size)" "size without components"

vb_snapshot
vb_expect_fail InvalidArgument vbmgr start disk
vb_assert_contains "$VB_ERR" "components: driver 'window' takes exactly 1, 0 given" "start message"
vb_assert_unchanged "after the refused start"
[ ! -L "$VB_DEV_DIR/disk" ] || vb_fail "link of a device that could not start"

vbmgr add disk "$img"
vb_assert_eq ready "$(vb_state_of disk)" "state with its component"
vb_assert_eq $((7 << 20)) "$(vb_json disk .size)" "size with its component"
vb_assert_eq "$img" "$(vb_json disk '.components[0].source')" "component source"
vb_expect_fail InvalidArgument vbmgr add disk "$T/other.img"
vb_assert_contains "$VB_ERR" "components: driver 'window' takes exactly 1, 2 given" "second add message"
vb_assert_eq 1 "$(vb_json disk '.components | length')" "components after the refused add"

vbmgr start disk
vb_assert_eq active "$(vb_state_of disk)" "state after start"
vb_assert_eq $((7 << 20)) "$(blockdev --getsize64 "$(vb_blockdev_of disk)")" "size of the node"
vb_expect_fail NotSupported vbmgr add disk "$T/other.img"
vbmgr stop disk

vb_log "a component file that goes away shows as missing"
mv "$img" "$T/moved.img"
vb_expect_fail NotFound vbmgr start disk   # the refused start still shows what it saw
vb_assert_eq missing "$(vb_json disk '.components[0].state')" "state of the vanished component"
mv "$T/moved.img" "$img"
vbmgr start disk
vb_assert_eq in-sync "$(vb_json disk '.components[0].state')" "state of the component back"
vbmgr stop disk
vb_stop_daemon
