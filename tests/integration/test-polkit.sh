#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# An unprivileged caller (user nobody, no session) may read but not change:
# polkit refuses create/set/start/stop/delete with NotAuthorized and nothing changes.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

vb_mkimg "$T/a.img" 16M
vb_mkimg "$T/b.img" 16M
vb_mkimg "$T/x.img" 16M
vbmgr create alpha --driver file "$T/a.img"
vbmgr create beta --driver file "$T/b.img"
vbmgr start beta
b_bd=$(vb_blockdev_of beta)
vb_snapshot

vb_log "reading works for nobody"
out=$(vb_as_nobody "$VBMGR" list) || vb_fail "vbmgr list as nobody failed"
vb_assert_contains "$out" alpha "vbmgr list as nobody"
vb_assert_contains "$out" beta "vbmgr list as nobody"
vb_as_nobody "$VBMGR" list --json > "$T/nobody.list" || vb_fail "vbmgr list --json as nobody failed"
cmp -s "$T/snap.list" "$T/nobody.list" || vb_fail "nobody sees a different device list than root"
vb_assert_eq ready "$(vb_as_nobody "$VBMGR" show alpha --json | jq -r .state)" "show alpha as nobody"
vb_as_nobody "$VBMGR" graph > /dev/null || vb_fail "vbmgr graph as nobody failed"

vb_log "changing is refused by polkit"
vb_expect_fail NotAuthorized vb_as_nobody "$VBMGR" create x --driver file "$T/x.img"
vb_expect_fail NotAuthorized vb_as_nobody "$VBMGR" set alpha sector_size=4096
vb_expect_fail NotAuthorized vb_as_nobody "$VBMGR" start alpha
vb_expect_fail NotAuthorized vb_as_nobody "$VBMGR" stop beta
vb_expect_fail NotAuthorized vb_as_nobody "$VBMGR" delete alpha
vb_expect_fail NotAuthorized vb_as_nobody "$VBMGR" delete beta --recursive

vb_log "nothing changed"
vb_assert_unchanged "refused calls of nobody"
vb_assert_eq ready "$(vb_state_of alpha)" "state of alpha"
vb_assert_eq "" "$(vb_loops_of "$T/a.img")" "loop devices over a.img"
vb_assert_eq "" "$(vb_loops_of "$T/x.img")" "loop devices over x.img"
vb_assert_eq active "$(vb_state_of beta)" "state of beta"
vb_assert_eq "$b_bd" "$(vb_loops_of "$T/b.img")" "loop device of beta"
vb_expect_fail NotFound vbmgr show x

vb_log "root is allowed the same calls"
vbmgr start alpha
vb_assert_eq active "$(vb_state_of alpha)" "state of alpha started by root"

vb_stop_daemon
