#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The engine's block node on this machine (backend loop: a loop device on
# the FUSE file vblkd serves) under queue depth 128 and fio verify while a
# leg fails and the engine is swapped (backend-engine.sh's eb_stress; the
# VM runs it on ublk and nbd).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/backend-engine.sh"
# shellcheck disable=SC2034 # read by backend-engine.sh
EB_BACKEND=loop
# shellcheck disable=SC2034
EB_NODE_PREFIX=/dev/loop
eb_node_live () { [ -e "/sys/block/${1#/dev/}/loop/backing_file" ]; }
eb_cleanup_node () { :; }
vb_setup
vb_start_daemon

vb_log "QD 128 under fio verify on the loop backend, a leg failed, the engine swapped"
eb_stress
vb_stop_daemon
