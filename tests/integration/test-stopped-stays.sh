#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A device the administrator stopped stays stopped when its components
# come and go (found by the torture test, seed 2087922013 at 120 s, step
# 171): the policy armed its degraded start for a stopped device seeing
# one of its components, and started it 3 s later — after an explicit
# stop, too. The policy starts only what the desired state wants running.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
mkdir -p "$T/policy"
printf '[rule components]\nmatch.metadata=vblk\naction=assemble\nstart-degraded-after=1s\n' \
  > "$T/policy/50-test.rules"
export VB_DAEMON_ARGS="--policy-dir $T/policy"
vb_start_daemon
# stopped: 'stopped', or 'ready'/'configuring' once the policy recorded where
# a component is or that one is missing — anything but running
stopped () {
  case "$(vb_state_of r1)" in
    active | degraded) vb_fail "$1: r1 is $(vb_state_of r1)" ;;
  esac
}

for f in a b; do vb_mkimg "$T/$f.img" 35M; done
la=$(losetup --show -f "$T/a.img")
lb=$(losetup --show -f "$T/b.img")
vbmgr create r1 --driver raid1 --start "$la" "$lb"
vbmgr wait r1 > /dev/null || vb_fail "initial resync"

vb_log "stopped, b unplugged, vblkd restarted: the coldplug sees a; r1 stays stopped"
vbmgr stop r1
vb_stop_daemon
losetup -d "$lb"
vb_start_daemon
sleep 4
stopped "after the coldplug and start-degraded-after"

vb_log "a plugged again while r1 is stopped: it stays stopped"
losetup -d "$la"
la=$(losetup --show -f "$T/a.img")
udevadm settle
sleep 3
stopped "after a came back"

vb_log "started and stopped again within the degraded wait: stopped"
udevadm trigger --action=change --settle "$la"
vbmgr start r1
vbmgr stop r1
sleep 3
stopped "after an explicit stop in the degraded wait"

vb_log "wanted running: the degraded start still comes"
vbmgr start r1
vb_assert_eq degraded "$(vb_state_of r1)" "r1 started by the administrator without b"
vbmgr stop r1
vbmgr delete r1
vb_stop_daemon
