#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# vbmgr wipe (Manager.Wipe; issue 18, part 2): vblk's superblock and bitmap
# erased from a disk that is no device's any more, so that vbmgr examine
# (and udev's rule, test-udev) see nothing; refused, with nothing changed,
# for a component of a started device, for one of a stopped device vblk
# knows (by path or by the superblock's device UUID) unless forced, for a
# block device in use, for bad input from any D-Bus caller.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

for f in a b c d; do vb_mkimg "$T/$f.img" 32M; done
vbmgr create r1 --driver raid1 --attr bitmap_chunk=1M --start "$T/a.img" "$T/b.img"
vbmgr wait r1 > /dev/null || vb_fail "initial resync"
examine_ok () { vbmgr examine "$1" > /dev/null 2>&1; }

vb_log "a component of a started device: refused, even forced"
vb_snapshot
vb_expect_fail Busy vbmgr wipe "$T/a.img"
vb_assert_contains "$VB_ERR" "is a component of device 'r1', which is started; nothing was wiped" "started"
vb_expect_fail Busy vbmgr wipe --force "$T/a.img"
vb_assert_unchanged "a refused wipe of a started device's component"
examine_ok "$T/a.img" || vb_fail "a.img lost its superblock to a refused wipe"

vb_log "a copy of a component elsewhere: known by its superblock's device UUID"
vbmgr stop r1
cp --sparse=always "$T/b.img" "$T/copy.img"
vb_expect_fail Busy vbmgr wipe "$T/copy.img"
vb_assert_contains "$VB_ERR" "is a component of device 'r1' (remove it from the device first, or force)" \
  "a copy of a known device's component"

vb_log "a stopped device's component: refused unless forced"
vb_expect_fail Busy vbmgr wipe "$T/a.img"
examine_ok "$T/a.img" || vb_fail "a.img lost its superblock to a refused wipe"
out=$(vbmgr wipe --force "$T/a.img")
vb_assert_contains "$out" "erased the vblk superblock" "what wipe --force erased"
vb_assert_contains "$out" "erased the bitmap (" "the bitmap erased too"
vb_expect_fail NotFound vbmgr examine "$T/a.img"
vb_expect_fail NotFound vbmgr wipe "$T/a.img"
vb_assert_contains "$VB_ERR" "no vblk superblock; nothing was wiped" "wiping a wiped disk"
# the data area is untouched: still equal to the other leg's
cmp <(tail -c +$(((1 << 20) + 1)) "$T/a.img") <(tail -c +$(((1 << 20) + 1)) "$T/b.img") ||
  vb_fail "a.img's data area changed with the wipe"

vb_log "a loose member (its device deleted) needs no force"
vbmgr create r2 --driver raid1 "$T/c.img" "$T/d.img" --start
vbmgr wait r2 > /dev/null || vb_fail "r2's resync"
vbmgr stop r2
vbmgr delete r2
if examine_ok "$T/c.img"; then
  out=$(vbmgr wipe "$T/c.img")
  vb_assert_contains "$out" "erased the vblk superblock" "wiping a loose member"
  vb_expect_fail NotFound vbmgr examine "$T/c.img"
else
  vb_log "(delete erased r2's superblocks: nothing loose to wipe)"
fi

vb_log "a block device in use (held with O_EXCL): refused"
cp --sparse=always "$T/d.img" "$T/held.img"
loop=$(losetup --show -f "$T/held.img")
examine_ok "$loop" || vb_fail "no superblock to hold on $loop"
/usr/bin/python3 -c 'import os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY | os.O_EXCL); print("held", flush=True); time.sleep(60)' "$loop" > "$T/held.out" &
holder=$!
vb_on_cleanup "kill $holder 2> /dev/null"
vb_wait_until 10 grep -q held "$T/held.out" || vb_fail "could not hold $loop"
vb_expect_fail Busy vbmgr wipe "$loop"
vb_assert_contains "$VB_ERR" "(mounted, or held by a device); nothing was wiped" "a held block device"
kill "$holder"; wait "$holder" 2> /dev/null || true
examine_ok "$loop" || vb_fail "$loop lost its superblock to a refused wipe"
vbmgr wipe "$loop" > /dev/null
vb_expect_fail NotFound vbmgr examine "$loop"
losetup -d "$loop"

vb_log "bad input from a D-Bus caller that is not vbmgr"
wipe () { vb_manager_call Wipe "$@"; }
vb_snapshot
vb_expect_fail InvalidArgument wipe relative.img "{}"
vb_assert_contains "$VB_ERR" "path 'relative.img': not an absolute path" "a relative path"
vb_expect_fail InvalidArgument wipe "$T/b.img" "{'force': <'yes'>}"
vb_assert_contains "$VB_ERR" "option 'force': expected type 'b', got 's'" "an option of the wrong type"
vb_expect_fail InvalidArgument wipe "$T/b.img" "{'colour': <true>}"
vb_assert_contains "$VB_ERR" "option 'colour': unknown" "an unknown option"
vb_expect_fail InvalidArgument wipe "$T" "{}"
vb_assert_contains "$VB_ERR" "is neither a block device nor a regular file" "a directory"
vb_expect_fail NotFound wipe "$T/missing.img" "{}"
vb_assert_unchanged "refused wipes"
examine_ok "$T/b.img" || vb_fail "b.img lost its superblock to a refused wipe"

vb_log "not authorized: refused"
vb_expect_fail NotAuthorized vb_as_nobody "$VBMGR" wipe "$T/b.img"
examine_ok "$T/b.img" || vb_fail "b.img lost its superblock to an unauthorized wipe"
vbmgr delete r1
vb_stop_daemon
