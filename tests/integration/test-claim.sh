#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The claim (issue 15, defects B and D): a device never takes its own block
# node, another device's node, a file on a file system that sits on its own
# node, a mounted disk, or anything that is not a regular file or a block
# device — as a component or as a spare, through create, add or
# reconfigure — and a path that does not answer (a FUSE file system that
# stopped) cannot hold vblkd. Every refusal names what is wrong, and
# nothing changes: the state, the list and the device's data.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
# a path that does not answer is given up on after 2 s (10 s otherwise)
vb_start_daemon VBLK_TEST_INSPECT_TIMEOUT_MS=2000

vb_mkimg "$T/a.img" 40M
vb_mkimg "$T/b.img" 40M
vb_mkimg "$T/c.img" 40M
vbmgr create keep --driver raid1 --attr bitmap_chunk=1M --start "$T/a.img" "$T/b.img"
vbmgr wait keep > /dev/null
node=$(vb_blockdev_of keep)
dd if=/dev/urandom of="$T/x.bin" bs=1M count=8 status=none
dd if="$T/x.bin" of="$node" bs=1M oflag=direct status=none
sum_of () { dd if="$1" bs=1M count=8 iflag=direct status=none | sha256sum; }
want=$(sum_of "$node")

# refused CODE WHAT CMD...: exit 1 with CODE and WHAT on stderr; state,
# list and keep's data unchanged
refused () {
  local code=$1 what=$2
  shift 2
  vb_snapshot
  vb_expect_fail "$code" "$@"
  vb_assert_contains "$VB_ERR" "$what" "stderr of '$*'"
  vb_assert_unchanged "$*"
  vb_assert_eq "$want" "$(sum_of "$node")" "keep's data after '$*'"
}

vb_log "B: its own node, by node and by stable link, as a spare or a component"
refused Busy "block node of device 'keep' itself" vbmgr add keep "$node" --spare
refused Busy "block node of device 'keep' itself" vbmgr add keep "$VB_DEV_DIR/keep" --spare
refused Busy "block node of device 'keep' itself" vbmgr reconfigure keep --add "$node"
vb_log "B: another device's node: built on as vblk:NAME, never as a raw node"
refused Busy "block node of device 'keep' (to build on it, name it 'vblk:keep')" \
  vbmgr create x --driver raid1 "$node" "$T/c.img"
refused Busy "vblk:keep" vbmgr create w --driver window "$VB_DEV_DIR/keep"
vb_assert_absent "$VB_DEV_DIR/x" "no device x"

vb_log "B: a file on a file system that sits on keep's own node"
mkfs.ext4 -q -F "$node"
mkdir -p "$T/mnt"
mount "$node" "$T/mnt"
truncate -s 40M "$T/mnt/spare.img"
want=$(sum_of "$node")
refused DependencyCycle "built on the block node of device 'keep'" \
  vbmgr add keep "$T/mnt/spare.img" --spare
vbmgr create up --driver file "$T/mnt/spare.img"   # a device over it is fine
vb_log "B: keep's node is mounted: a device over it is refused, not its own spare"
refused WouldLoseData "is mounted on $T/mnt" vbmgr create y --driver window vblk:keep
vbmgr delete up
umount "$T/mnt"
want=$(sum_of "$node")

vb_log "B: a mounted disk that is not vblk's"
vb_mkimg "$T/fs.img" 40M
mkfs.ext4 -q -F "$T/fs.img"
fsloop=$(losetup --show -f "$T/fs.img")
vb_on_cleanup "losetup -d $fsloop"
mount "$fsloop" "$T/mnt"
refused WouldLoseData "is mounted on $T/mnt" vbmgr add keep "$fsloop" --spare
umount "$T/mnt"

vb_log "D: a FIFO, a character device, a directory, a socket, a missing path"
mkfifo "$T/fifo"
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$T/sock"
mkdir "$T/dir"
for spec in "fifo:a FIFO" "sock:a socket" "dir:a directory"; do
  path=$T/${spec%%:*}
  refused InvalidArgument "is ${spec#*:}" timeout 20 "$VBMGR" add keep "$path" --spare
  refused InvalidArgument "is ${spec#*:}" timeout 20 "$VBMGR" create z --driver raid1 "$path" "$T/c.img"
done
refused InvalidArgument "is a character device" timeout 20 "$VBMGR" add keep /dev/null --spare
refused NotFound "$T/nowhere.img" timeout 20 "$VBMGR" add keep "$T/nowhere.img" --spare
vb_log "I: a new device takes every component it names, there (a degraded one starts from one that was)"
refused NotFound "$T/nowhere.img" vbmgr create m --driver raid1 "$T/c.img" "$T/nowhere.img"
vb_log "keep still stops and starts: nothing half-added blocks it"
vbmgr stop keep
vbmgr start keep
vb_wait_state keep active 20
node=$(vb_blockdev_of keep)

vb_log "a path on a file system that stopped answering: refused in bounded time, vblkd answers meanwhile"
mkdir -p "$T/stall"
"$VB_FUSE_STALL" "$T/stall" $((40 << 20)) &
stall=$!
VB_BG_PIDS+=("$stall")
vb_on_cleanup_early "kill -CONT $stall; umount -l $T/stall"
vb_wait_until 10 test -e "$T/stall/disk" || vb_fail "vb-fuse-stall did not mount"
kill -STOP "$stall"
"$VBMGR" add keep "$T/stall/disk" --spare 2> "$T/add.err" &
adder=$!
VB_BG_PIDS+=("$adder")
sleep 0.5
start=$(date +%s%N)
timeout 10 "$VBMGR" list > /dev/null || vb_fail "vbmgr list did not answer while a path stalled"
rc=0
wait "$adder" || rc=$?
vb_assert_eq 1 "$rc" "exit status of the add of a stalled path"
elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$elapsed" -lt 8000 ] || vb_fail "the add took ${elapsed} ms to be refused"
vb_assert_contains "$(cat "$T/add.err")" \
  "Failed: component '$T/stall/disk': looking at it did not finish within 2000 ms" \
  "the refusal of a stalled path"
vb_assert_eq 2 "$(vb_json keep '.components | length')" "keep's components"
vb_log "while it does not answer, the next look fails at once"
start=$(date +%s%N)
vb_expect_fail Failed timeout 10 "$VBMGR" add keep "$T/stall/disk" --spare
vb_assert_contains "$VB_ERR" "still not answering" "a second add of the stalled path"
[ $(( ($(date +%s%N) - start) / 1000000 )) -lt 1500 ] || vb_fail "the second add waited again"
kill -CONT "$stall"
vb_log "once it answers, the same file is a fine spare"
vb_wait_until 10 eval '"$VBMGR" add keep "$T/stall/disk" --spare 2> /dev/null' ||
  vb_fail "the file that answers again is not taken as a spare"
vb_assert_eq spare "$(vb_json keep '.components[2].state')" "the spare's state"
vbmgr remove keep "$T/stall/disk"

vb_log "another device's file stops answering: a create elsewhere gives up on it once, in bounded time"
vbmgr create far --driver file "$T/stall/disk"
kill -STOP "$stall"
vb_mkimg "$T/near1.img" 40M
vb_mkimg "$T/near2.img" 40M
start=$(date +%s%N)
timeout 10 "$VBMGR" create near1 --driver file "$T/near1.img" ||
  vb_fail "a create beside a stalled component of another device failed"
elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
{ [ "$elapsed" -ge 1500 ] && [ "$elapsed" -lt 8000 ]; } ||
  vb_fail "the create beside a stalled path took ${elapsed} ms (the look gives up after 2000 ms)"
vb_assert_contains "$(cat "$VB_LOG")" \
  "component '$T/stall/disk': looking at it did not finish within 2000 ms; not compared" \
  "vblkd's word on the stalled path it could not compare"
start=$(date +%s%N)
timeout 10 "$VBMGR" create near2 --driver file "$T/near2.img" ||
  vb_fail "a second create beside a stalled component failed"
[ $(( ($(date +%s%N) - start) / 1000000 )) -lt 1500 ] || vb_fail "the second create waited again"
vb_log "once it answers again: the path and a link to it are refused"
ln -s "$T/stall/disk" "$T/stall-link"
kill -CONT "$stall"
vb_wait_until 10 test -e "$T/stall-link" || vb_fail "the stalled file system does not answer again"
# vblkd's own look, given up on, ends a moment later and clears its mark
vb_wait_until 10 eval '! "$VBMGR" create twin --driver file "$T/stall/disk" 2>&1 | grep -q "still not answering"' ||
  vb_fail "vblkd still takes the file system for stalled"
refused Busy "already used by device 'far'" vbmgr create twin --driver file "$T/stall/disk"
refused Busy "already used by device 'far'" vbmgr create twin --driver file "$T/stall-link"
vbmgr delete near1
vbmgr delete near2
vbmgr delete far

vb_log "another device's file under another name: refused by its identity, looked at now"
vb_mkimg "$T/f1.img" 40M
vb_mkimg "$T/f2.img" 40M
ln -s "$T/f1.img" "$T/link.img"
vbmgr create vialink --driver file "$T/link.img"
refused Busy "component '$T/f1.img' is already used by device 'vialink'" \
  vbmgr create direct --driver file "$T/f1.img"
vb_log "the link moved since vialink's last change: its path is looked at again, not remembered"
ln -sfn "$T/f2.img" "$T/link.img"
refused Busy "component '$T/f2.img' is already used by device 'vialink'" \
  vbmgr create direct --driver file "$T/f2.img"
vbmgr create direct --driver file "$T/f1.img"
vb_log "a file replaced under another device's path: the same path, the new file, refused"
mv "$T/f1.img" "$T/f1-old.img"
vb_mkimg "$T/f1.img" 40M
refused Busy "component '$T/f1.img' is already used by device 'direct'" \
  vbmgr create again --driver file "$T/f1.img"
vbmgr delete direct
vbmgr delete vialink

vb_log "remembered identities (vb-identity-memo.h): a file renamed over another device's path, then a file bind-mounted on it"
mkdir "$T/stable"
vb_mkimg "$T/stable/p.img" 40M
vb_mkimg "$T/stable/q.img" 40M
vb_mkimg "$T/stable/r.img" 40M
vb_mkimg "$T/prime1.img" 40M
vb_mkimg "$T/prime2.img" 40M
vbmgr create held --driver file "$T/stable/p.img"
# the directories stable (their times older than 2 s), a create elsewhere
# remembers where held's path leads; then that changes without vblkd
sleep 2.5
vbmgr create prime1 --driver file "$T/prime1.img"
mv "$T/stable/q.img" "$T/stable/p.img"
ln "$T/stable/p.img" "$T/hard.img"
refused Busy "component '$T/hard.img' is already used by device 'held'" \
  vbmgr create again --driver file "$T/hard.img"
sleep 2.5
vbmgr create prime2 --driver file "$T/prime2.img"
vb_on_cleanup_early "umount '$T/stable/p.img' 2> /dev/null"
mount --bind "$T/stable/r.img" "$T/stable/p.img"
refused Busy "component '$T/stable/r.img' is already used by device 'held'" \
  vbmgr create again --driver file "$T/stable/r.img"
umount "$T/stable/p.img"
vbmgr create again --driver file "$T/stable/r.img"
for d in again prime2 prime1 held; do vbmgr delete "$d"; done
vb_log "ok"
