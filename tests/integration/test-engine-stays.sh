#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# An engine device in use keeps its server (issue 18, part 4): the engine's
# I/O is vblkd itself, so a stop (SIGTERM, as systemd's at shutdown) while
# a file system on the device is mounted stays and serves it ("staying
# for", argv[0] marked '@' so that systemd's last killing spree spares it),
# stops the device cleanly once it is unmounted, and leaves. (Before: vblkd
# left at once and the mounted file system's writes failed.) With the file
# system read-only, the shutdown hook vblk.shutdown (SIGUSR2) settles the
# device: its bitmap cleared (e) or, without a bitmap (n), its superblocks
# marked clean until the next write, which has them say "not clean" first;
# so that the power going (SIGKILL) costs no resync. Then a vblkd --takeover: the running one leaves, the new one
# locks the state dir only after it and brings the device up again, its
# data intact.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

vb_mkimg "$T/a.img" 40M
vb_mkimg "$T/b.img" 40M
vb_mkimg "$T/c.img" 40M
vb_mkimg "$T/d.img" 40M
vbmgr create e --driver raid1 --start "$T/a.img" "$T/b.img"
vbmgr create n --driver raid1 --attr bitmap=none --start "$T/c.img" "$T/d.img"
vbmgr wait e > /dev/null || vb_fail "initial resync"
vbmgr wait n > /dev/null || vb_fail "initial resync of n"
node=$(vb_blockdev_of e)
mkfs.ext4 -q "$node"
mkfs.ext4 -q "$(vb_blockdev_of n)"
mkdir -p "$T/mnt" "$T/mnt-n"
mount "$node" "$T/mnt"
mount "$(vb_blockdev_of n)" "$T/mnt-n"
vb_on_cleanup_early "mountpoint -q $T/mnt && umount $T/mnt"
vb_on_cleanup_early "mountpoint -q $T/mnt-n && umount $T/mnt-n"
clean_of () { vbmgr examine --json "$T/$1.img" | jq -r .clean; }
head -c $((4 << 20)) /dev/urandom > "$T/before"
cp "$T/before" "$T/mnt/before"
sync

vb_log "SIGTERM while e and n are mounted: vblkd stays and serves them"
pid=$VBLKD_PID
kill -TERM "$pid"
vb_wait_until 20 grep -q "staying for e, n: in use" "$VB_LOG" ||
  vb_fail "vblkd did not stay for e and n: $(tail -5 "$VB_LOG")"
vb_pid_alive "$pid" || vb_fail "vblkd left e's file system without its server"
[ "$(head -c 1 "/proc/$pid/cmdline")" = @ ] || vb_fail "vblkd staying is not marked '@'"
head -c $((4 << 20)) /dev/urandom > "$T/after"
cp "$T/after" "$T/mnt/after" || vb_fail "a write after SIGTERM"
sync || vb_fail "sync after SIGTERM"
grep -q "stopped $node" "$VB_LOG" && vb_fail "e was stopped while mounted"

vb_log "the system's last step: the file systems read-only, vblk.shutdown settles e and n"
mount -o remount,ro "$T/mnt" || vb_fail "remount ro"
mount -o remount,ro "$T/mnt-n" || vb_fail "remount ro n"
vb_assert_eq false "$(clean_of c)" "n's superblock while it runs"
hook=$(cd "$(dirname "$VBMGR")/.." && pwd)/data/vblk.shutdown
settle () {
  local out
  out=$(VBLK_RUN_DIR=$VB_RUN_DIR sh "$hook" poweroff) || vb_fail "vblk.shutdown: $out"
  vb_assert_eq "vblk: e: settled|vblk: n: settled" "$(sort <<< "$out" | paste -sd '|')" \
    "what vblk.shutdown printed"
}
settle
for f in a b; do
  vb_assert_eq 0 "$(vbmgr examine --json "$T/$f.img" | jq -r .bitmap_dirty)" "$f.img's dirty chunks once settled"
done
for f in c d; do
  vb_assert_eq true "$(clean_of $f)" "$f.img's superblock once n settled (no bitmap)"
done
vb_log "a write to n after it settled: its superblocks say 'not clean' first; settled again"
mount -o remount,rw "$T/mnt-n" || vb_fail "remount rw n"
head -c $((1 << 20)) /dev/urandom > "$T/mnt-n/late"
sync
for f in c d; do
  vb_assert_eq false "$(clean_of $f)" "$f.img's superblock after a write to the settled n"
done
cp "$T/mnt-n/late" "$T/late"
mount -o remount,ro "$T/mnt-n" || vb_fail "remount ro n again"
settle
for f in c d; do
  vb_assert_eq true "$(clean_of $f)" "$f.img's superblock once n settled again"
done
vb_pid_alive "$pid" || vb_fail "vblkd left the read-only root after settling"
vb_log "the power goes (SIGKILL); vblkd again: nothing to resync"
kill -KILL "$pid"
vb__wait_pid "$pid" || true
VBLKD_PID=
umount "$T/mnt" "$T/mnt-n"
vb_start_daemon
vb_wait_state e active 30
vb_wait_state n active 30
vbmgr wait e > /dev/null
vbmgr wait n > /dev/null
grep -q "[en]: resync started" <<< "$(sed -n '/^=== vblkd start/h; /^=== vblkd start/!H; ${x;p}' "$VB_LOG")" &&
  vb_fail "a resync after the settled stop: $(grep 'resync started' "$VB_LOG" | tail -1)"
node=$(vb_blockdev_of e)
mount "$node" "$T/mnt"
cmp "$T/after" "$T/mnt/after" || vb_fail "a file written while vblkd stayed differs"
mount -o ro "$(vb_blockdev_of n)" "$T/mnt-n"
cmp "$T/late" "$T/mnt-n/late" || vb_fail "the file written to n after it settled differs"
umount "$T/mnt-n"
vbmgr stop n

vb_log "SIGTERM again while mounted; unmounted: vblkd stops e cleanly and leaves"
pid=$VBLKD_PID
kill -TERM "$pid"
vb_wait_until 20 grep -q "staying for e: in use" "$VB_LOG" ||
  vb_fail "vblkd did not stay for e: $(tail -5 "$VB_LOG")"
umount "$T/mnt"
rc=0
vb__wait_pid "$pid" || rc=$?
VBLKD_PID=
vb_assert_eq 0 "$rc" "vblkd's exit status after staying"
grep -q "e: stopped $node (served by vblkd itself)" "$VB_LOG" ||
  vb_fail "e not stopped cleanly: $(tail -5 "$VB_LOG")"
[ -z "$(losetup -j "$T/a.img")" ] || vb_fail "a loop device is left on a.img: $(losetup -j "$T/a.img")"

vb_log "vblkd again, then vblkd --takeover: the first leaves, the second brings e up"
vb_start_daemon
vb_wait_state e active 30
first=$VBLKD_PID
echo "=== vblkd --takeover $(date +%T.%N)" >> "$VB_LOG"
env G_DEBUG=fatal-criticals "$VBLKD" --takeover --state-dir "$VB_STATE_DIR" \
  --run-dir "$VB_RUN_DIR" --dev-dir "$VB_DEV_DIR" --debug >> "$VB_LOG" 2>&1 &
VBLKD_PID=$!
vb__wait_pid "$first" || vb_fail "the first vblkd did not exit cleanly at the takeover"
grep -q "taking over from vblkd $first" "$VB_LOG" || vb_fail "no takeover: $(tail -5 "$VB_LOG")"
vb_wait_until 20 vb_name_has_owner "$VB_BUS_NAME" || vb_fail "the new vblkd does not own the name"
vb_wait_state e active 30
vb_assert_eq "$VBLKD_PID" "$(cat "$VB_RUN_DIR/vblkd.pid")" "vblkd.pid after the takeover"
mount -o ro "$(vb_blockdev_of e)" "$T/mnt"
cmp "$T/before" "$T/mnt/before" || vb_fail "a file written before SIGTERM differs"
cmp "$T/after" "$T/mnt/after" || vb_fail "a file written while vblkd stayed differs"
umount "$T/mnt"
fsck.ext4 -n -f "$(vb_blockdev_of e)" > "$T/fsck.log" 2>&1 || vb_fail "fsck: $(cat "$T/fsck.log")"
vbmgr stop e
vb_stop_daemon
vb_log "e stayed served through SIGTERM while mounted, and came up again after a takeover"
