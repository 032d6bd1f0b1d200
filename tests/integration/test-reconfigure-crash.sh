#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# SIGKILL of vblkd at every step of a reconfiguration (the test hook stops
# it there, VBLK_TEST_STOP_AT), then a restart: the device comes up in
# either the old or the new configuration — the one the components'
# metadata says — never a mix; the superblocks agree with the desired
# state, and the data verifies.
#   raid1 (metadata=vblk) of two legs + a third: the new role table is on
#     the components from "assembled" on, so from there the new one wins;
#   file -> raid1 (metadata=none): nothing on the components says it, so
#     only a committed desired state makes it the new one;
#   raid1 (metadata=vblk) of one leg -> window over its data area: the
#     superblock is erased after the swap, and its absence says "new";
#   a leg's rebuild stopped by SIGKILL and then by a swap resumes from the
#     point the superblocks record, and the legs end up equal.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup

steps=(intent-saved suspended assembled swapped before-commit committed)
head -c 24M /dev/urandom > "$T/data.bin"

slots_in_state () { vb_state | jq -r --arg n "$1" '[.devices[] | select(.name == $n) | .components[] | select(.role | test("^[0-9]+$"))] | length'; }
driver_in_state () { vb_state | jq -r --arg n "$1" '.devices[] | select(.name == $n) | .driver'; }

# kill_at STEP CMD... — run CMD against a vblkd that stops at STEP, kill it
kill_at () {
  local step=$1
  shift
  vb_stop_daemon
  vb_start_daemon VBLK_TEST_STOP_AT="reconfigure:$step"
  vb_bg vbmgr "$@"
  local client=$VB_BG_PID
  vb_wait_stopped "$VBLKD_PID" || vb_fail "vblkd did not stop at $step"
  vb_kill_daemon
  wait "$client" 2> /dev/null && vb_fail "the reconfiguration reported success although vblkd was killed at $step"
  [ -e "$VB_STATE_DIR/reconfigure.json" ] || [ "$step" = committed ] ||
    vb_fail "no intent on disk when killed at $step"
  vb_start_daemon
}

vb_start_daemon
for step in "${steps[@]}"; do
  case $step in
    intent-saved|suspended) want=2 ;;
    *) want=3 ;;
  esac
  vb_log "raid1 + a leg, killed at $step: expecting $want legs"
  for f in a b c; do rm -f "$T/$f.img"; vb_mkimg "$T/$f.img" 48M; done
  vbmgr create r --driver raid1 --start "$T/a.img" "$T/b.img"
  vbmgr wait r > /dev/null
  dd if="$T/data.bin" of="$(vb_blockdev_of r)" bs=1M oflag=direct status=none
  kill_at "$step" reconfigure r --add "$T/c.img"
  vb_wait_state r active 30 || vb_wait_state r degraded 5 || vb_fail "r did not come back after $step"
  vb_assert_eq "$want" "$(slots_in_state r)" "legs in the desired state after $step"
  vb_assert_eq "$want" "$(vbmgr show r --json | jq '[.components[] | select(.role | test("^[0-9]+$"))] | length')" "legs shown after $step"
  [ ! -e "$VB_STATE_DIR/reconfigure.json" ] || vb_fail "intent left after the restart ($step)"
  for f in a b; do
    vb_assert_eq "$want" "$(vbmgr examine --json "$T/$f.img" | jq .n_roles)" "slots in $f.img's superblock after $step"
  done
  cmp -n 24M "$T/data.bin" "$(vb_blockdev_of r)" || vb_fail "data after $step"
  vbmgr wait r > /dev/null || vb_fail "rebuild after $step"
  vbmgr stop r
  if [ "$want" = 3 ]; then
    cmp -i 1M:1M "$T/a.img" "$T/c.img" || vb_fail "the new leg differs after its rebuild ($step)"
  fi
  vbmgr delete r
done

for step in "${steps[@]}"; do
  case $step in
    committed) want=raid1 ;;
    *) want=file ;;
  esac
  vb_log "file -> raid1, killed at $step: expecting $want"
  for f in p q; do rm -f "$T/$f.img"; vb_mkimg "$T/$f.img" 48M; done
  vbmgr create p --driver file --attr engine=true --start "$T/p.img"
  dd if="$T/data.bin" of="$(vb_blockdev_of p)" bs=1M oflag=direct status=none
  kill_at "$step" reconfigure p --driver raid1 --add "$T/q.img"
  vb_wait_state p active 30 || vb_wait_state p degraded 5 || vb_fail "p did not come back after $step"
  vb_assert_eq "$want" "$(driver_in_state p)" "driver in the desired state after $step"
  vb_assert_eq "$want" "$(vb_json p .driver)" "driver shown after $step"
  cmp -n 24M "$T/data.bin" "$(vb_blockdev_of p)" || vb_fail "data after $step"
  if [ "$want" = raid1 ]; then
    vbmgr wait p > /dev/null || vb_fail "rebuild after $step"
    vb_wait_until 10 eval '! vb_state | jq -e ".devices[] | select(.name == \"p\") | .components[1].in_sync == false" > /dev/null' ||
      vb_fail "q.img still recorded as behind after its rebuild"
  fi
  vbmgr stop p
  [ "$want" = file ] || cmp -n 48M "$T/p.img" "$T/q.img" || vb_fail "legs differ after the rebuild ($step)"
  vbmgr delete p
done

for step in swapped before-commit; do
  case $step in
    swapped) want=raid1 ;;
    *) want=window ;;
  esac
  vb_log "raid1 of one leg -> window, killed at $step: expecting $want"
  rm -f "$T/w.img"
  vb_mkimg "$T/w.img" 48M
  vbmgr create w --driver raid1 --start "$T/w.img"
  vbmgr wait w > /dev/null
  dd if="$T/data.bin" of="$(vb_blockdev_of w)" bs=1M oflag=direct status=none
  kill_at "$step" reconfigure w --driver window
  vb_wait_state w active 30 || vb_fail "w did not come back after $step"
  vb_assert_eq "$want" "$(driver_in_state w)" "driver in the desired state after $step"
  if [ "$want" = raid1 ]; then
    vb_assert_eq 1 "$(vbmgr examine --json "$T/w.img" | jq .n_roles)" "w.img's superblock"
  else
    vb_expect_fail NotFound vbmgr examine "$T/w.img"
  fi
  cmp -n 24M "$T/data.bin" "$(vb_blockdev_of w)" || vb_fail "data after $step"
  vbmgr stop w
  vbmgr delete w
done
vb_log "a rebuild stopped by SIGKILL, then by a swap, resumes where it was recorded"
for f in ra rb rc; do rm -f "$T/$f.img"; vb_mkimg "$T/$f.img" 256M; done
vbmgr create rr --driver raid1 --attr bitmap_chunk=16M --start "$T/ra.img" "$T/rb.img"
vbmgr wait rr > /dev/null
head -c 64M /dev/urandom > "$T/rr.bin"
dd if="$T/rr.bin" of="$(vb_blockdev_of rr)" bs=1M oflag=direct status=none
vbmgr reconfigure rr --add "$T/rc.img" --attr sync_speed_min=24M --attr sync_speed_max=24M
# wait until the superblocks record a point past 64 MiB
vb_wait_until 30 eval '[ "$(vbmgr examine --json "$T/ra.img" | jq .rebuild_offset)" -ge $((64 << 20)) ]' ||
  vb_fail "no rebuild progress recorded: $(vbmgr examine "$T/ra.img")"
vb_kill_daemon
point=$(vbmgr examine --json "$T/ra.img" | jq .rebuild_offset)
vb_start_daemon
vb_wait_state rr degraded 20 || vb_wait_state rr active 5 || vb_fail "rr after the kill"
grep -q "resuming its rebuild at $point bytes" "$VB_LOG" || vb_fail "the rebuild did not resume at $point"
vb_log "resumed at $point bytes after SIGKILL"
# the same through a swap: the leg b goes while c still rebuilds
vb_wait_until 30 eval '[ "$(vbmgr examine --json "$T/ra.img" | jq .rebuild_offset)" -gt "$point" ]' ||
  vb_fail "no further progress recorded"
vbmgr reconfigure rr --remove "$T/rb.img"
grep -q "resuming its rebuild at" <(tail -n 20 "$VB_LOG") || vb_fail "the rebuild did not resume after the swap"
vb_log "$(grep -o 'resuming its rebuild at [0-9]* bytes' "$VB_LOG" | tail -1) after the swap"
vbmgr set rr sync_speed_min=0 sync_speed_max=0
vbmgr wait rr > /dev/null || vb_fail "the resumed rebuild"
job=$(vbmgr jobs --json | jq -c '[.[] | select(.device == "rr" and .operation == "rebuild")] | last')
vb_assert_eq finished "$(jq -r .state <<< "$job")" "last rebuild of rr"
[ "$(jq -r .bytes <<< "$job")" -lt $((255 << 20)) ] || vb_fail "the last rebuild copied everything: $job"
cmp -n 64M "$T/rr.bin" "$(vb_blockdev_of rr)" || vb_fail "rr's data after the resumed rebuilds"
vbmgr stop rr
cmp -i 1M:1M "$T/ra.img" "$T/rc.img" || vb_fail "the resumed leg differs from the other"
vbmgr delete rr
vb_stop_daemon
