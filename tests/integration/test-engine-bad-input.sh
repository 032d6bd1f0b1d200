#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Bad input to engine drivers is refused by name and changes nothing: too few
# components, components too small for a chunk, bad chunk sizes and copies.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon
for f in a b c; do vb_mkimg "$T/$f.img" 16M; done
vb_mkimg "$T/tiny.img" 4K
vb_snapshot

refuse () { vb_expect_fail "$@"; vb_assert_unchanged "after '${*:2}'"; }

refuse InvalidArgument vbmgr create x --driver raid0 --start "$T/a.img"
vb_assert_contains "$VB_ERR" "components: driver 'raid0' takes 2 to" "raid0 with one component"
refuse InvalidArgument vbmgr create x --driver raid10 --start "$T/a.img"
vb_assert_contains "$VB_ERR" "components: driver 'raid10'" "raid10 with one component"
refuse InvalidArgument vbmgr create x --driver raid10 --attr copies=3 --start "$T/a.img" "$T/b.img"
vb_assert_contains "$VB_ERR" "copies" "raid10 with more copies than components"
refuse InvalidArgument vbmgr create x --driver raid0 --attr chunk_size=1000 "$T/a.img" "$T/b.img"
vb_assert_contains "$VB_ERR" "attribute 'chunk_size'" "chunk size not a power of two"
refuse InvalidArgument vbmgr create x --driver raid0 --start "$T/a.img" "$T/tiny.img"
vb_assert_contains "$VB_ERR" "tiny.img" "a component smaller than a chunk"
refuse InvalidArgument vbmgr create x --driver linear --attr chunk_size=64K "$T/a.img"
vb_assert_contains "$VB_ERR" "attribute 'chunk_size': not an attribute of driver 'linear' (allowed: metadata)" "linear has no chunk"
vb_assert_eq "" "$(vb_loops_of "$T/a.img")" "loop devices"
vb_stop_daemon
