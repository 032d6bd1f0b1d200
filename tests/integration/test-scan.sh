#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# vbmgr scan: devices are found from their components' superblocks (known
# ones as known); once the desired state is lost, scan --adopt --start
# brings them back (names, UUIDs, roles, the spare) with their data; a
# stale leg is shown stale and re-added; a corrupted superblock is a
# problem naming its path and nothing is adopted from it; a name clash is
# reported and refused.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

# scan_json PATH... — `vbmgr scan --json PATH...`
scan_json () { vbmgr scan --json "$@" || vb_fail "vbmgr scan $*"; }
# group JSON NAME JQ — JQ applied to the found entry named NAME
group () { jq -r --arg n "$2" ".[] | select(.name == \$n) | $3" <<< "$1"; }
components_of () { vb_json "$1" '[.components[] | "\(.role):\(.source)"] | join(" ")'; }

for f in a b s c0 c1 c2; do vb_mkimg "$T/$f.img" 32M; done
mirror_paths=("$T/a.img" "$T/b.img" "$T/s.img")
stripe_paths=("$T/c0.img" "$T/c1.img" "$T/c2.img")

vbmgr create mirror --driver raid1 --attr bitmap_chunk=1M --start "$T/a.img" "$T/b.img"
vbmgr add mirror "$T/s.img" --spare
vbmgr create stripe --driver raid10 --attr chunk_size=64K --start "${stripe_paths[@]}"
vbmgr wait mirror > /dev/null || vb_fail "resync of mirror"
vbmgr wait stripe > /dev/null || vb_fail "resync of stripe"
mirror_uuid=$(vb_json mirror .uuid)
stripe_uuid=$(vb_json stripe .uuid)
mirror_components=$(components_of mirror)
stripe_components=$(components_of stripe)
for d in mirror stripe; do
  dd if=/dev/urandom of="$(vb_blockdev_of $d)" bs=1M count=8 oflag=direct status=none
done
mirror_sum=$(sha256sum < "$(vb_blockdev_of mirror)")
stripe_sum=$(sha256sum < "$(vb_blockdev_of stripe)")
vbmgr stop mirror
vbmgr stop stripe

vb_log "scan: both devices are found, and known"
out=$(scan_json "${mirror_paths[@]}" "${stripe_paths[@]}")
vb_assert_eq "$mirror_uuid raid1 true false" "$(group "$out" mirror '"\(.uuid) \(.driver) \(.known) \(.adopted)"')" "mirror found"
vb_assert_eq "$stripe_uuid raid10 true false" "$(group "$out" stripe '"\(.uuid) \(.driver) \(.known) \(.adopted)"')" "stripe found"
vb_assert_eq "0:$T/a.img 1:$T/b.img" "$(group "$out" mirror '[.components[] | select(.role != "spare") | "\(.role):\(.path)"] | join(" ")')" "mirror's slots"
vb_assert_eq "false false" "$(group "$out" mirror '[.components[] | select(.role != "spare") | .stale] | join(" ")')" "mirror: nothing stale"
vb_assert_eq 3 "$(group "$out" stripe '.components | length')" "stripe's components"
vb_assert_eq "mirror" "$(group "$out" mirror .device)" "a known group names its device"
found_spares=$(group "$out" mirror '[.components[] | select(.role == "spare") | .path] | join(" ")')
text=$(vbmgr scan "${mirror_paths[@]}" "${stripe_paths[@]}") || vb_fail "vbmgr scan (text)"
vb_assert_contains "$text" "$mirror_uuid" "scan text"
vb_assert_contains "$text" "known" "scan text"

vb_log "the desired state is lost"
vb_stop_daemon
rm -f "$VB_STATE_FILE" "$VB_STATE_JOURNAL"
vb_start_daemon
vb_assert_eq "[]" "$(vbmgr list --json | jq -c .)" "devices after losing state.json"
out=$(scan_json "${mirror_paths[@]}" "${stripe_paths[@]}")
vb_assert_eq "false false" "$(group "$out" mirror '"\(.known) \(.adopted)"')" "mirror unknown"
vb_assert_eq "false false" "$(group "$out" stripe '"\(.known) \(.adopted)"')" "stripe unknown"
vb_assert_eq "[]" "$(vbmgr list --json | jq -c .)" "a scan without --adopt changes nothing"

vb_log "scan --adopt --start brings both back, with their data"
vb_expect_fail NotAuthorized vb_as_nobody "$VBMGR" scan --adopt "${mirror_paths[@]}"
rc=0; vbmgr scan --start "$T/a.img" 2> /dev/null || rc=$?
vb_assert_eq 2 "$rc" "--start without --adopt is bad usage"
out=$(vbmgr scan --adopt --start --json "${mirror_paths[@]}" "${stripe_paths[@]}") || vb_fail "scan --adopt --start"
vb_assert_eq "false true" "$(group "$out" mirror '"\(.known) \(.adopted)"')" "mirror adopted"
vb_assert_eq "false true" "$(group "$out" stripe '"\(.known) \(.adopted)"')" "stripe adopted"
vb_assert_eq "$mirror_uuid" "$(vb_json mirror .uuid)" "mirror's UUID"
vb_assert_eq "$stripe_uuid" "$(vb_json stripe .uuid)" "stripe's UUID"
# the spare is checked last (below): it needs a superblock of its own
adopted_mirror_components=$(components_of mirror)
vb_assert_eq "${mirror_components% spare:*}" "${adopted_mirror_components% spare:*}" "mirror's slots and roles"
vb_assert_eq "$stripe_components" "$(components_of stripe)" "stripe's components and roles"
vb_assert_eq 65536 "$(vb_json stripe .attributes.chunk_size)" "stripe's attributes"
vb_wait_state mirror active
vb_wait_state stripe active
vb_assert_eq "$mirror_sum" "$(sha256sum < "$(vb_blockdev_of mirror)")" "mirror's data"
vb_assert_eq "$stripe_sum" "$(sha256sum < "$(vb_blockdev_of stripe)")" "stripe's data"
vb_state | jq -e '.devices | length == 2' > /dev/null || vb_fail "state.json holds both again"

vb_log "scan again: known, nothing adopted twice"
vb_snapshot
out=$(vbmgr scan --adopt --json "${mirror_paths[@]}" "${stripe_paths[@]}") || vb_fail "second adopt"
vb_assert_eq "true false" "$(group "$out" mirror '"\(.known) \(.adopted)"')" "mirror known now"
vb_assert_unchanged "adopting known devices"

vb_log "a stale leg is shown stale, and re-added after adoption"
vbmgr stop mirror
cp "$T/b.img" "$T/b.old"
vbmgr start mirror
dd if=/dev/urandom of="$(vb_blockdev_of mirror)" bs=1M count=2 seek=3 oflag=direct status=none
mirror_sum=$(sha256sum < "$(vb_blockdev_of mirror)")
vbmgr stop mirror
vbmgr delete mirror
cp "$T/b.old" "$T/b.img"
out=$(scan_json "$T/a.img" "$T/b.img")
vb_assert_eq "false true" "$(group "$out" mirror '[.components[] | .stale] | join(" ")')" "b stale"
vb_assert_eq "0" "$(group "$out" mirror '.problems | length')" "a stale leg is no problem"
vbmgr scan --adopt --start "$T/a.img" "$T/b.img" > /dev/null
# the job may show up a moment after the start: wait for the states too
all_in_sync () { [ "$(vb_json "$1" '[.components[].state] | unique | join(" ")')" = in-sync ]; }
vb_wait_until 60 all_in_sync mirror || vb_fail "b not re-added: $(vb_json mirror .components)"
vbmgr wait mirror > /dev/null || vb_fail "re-add of b"
vb_assert_eq "$mirror_sum" "$(sha256sum < "$(vb_blockdev_of mirror)")" "mirror's data after the re-add"
vbmgr stop mirror
cmp -i 1M:1M "$T/a.img" "$T/b.img" || vb_fail "legs differ after the re-add"

vb_log "a corrupted superblock: a problem naming the path; nothing adopted"
vb_mkimg "$T/x0.img" 32M
vb_mkimg "$T/x1.img" 32M
vbmgr create broken --driver raid1 --start "$T/x0.img" "$T/x1.img"
vbmgr wait broken > /dev/null
vbmgr stop broken
vbmgr delete broken
printf '\x55' | dd of="$T/x1.img" bs=1 seek=$((4096 + 300)) conv=notrunc status=none
vb_snapshot
out=$(vbmgr scan --adopt --start --json "$T/x0.img" "$T/x1.img") || vb_fail "scan with a bad superblock"
problem=$(jq -r --arg p "$T/x1.img" '.[] | select(.path == $p and (has("uuid") | not)) | .problems[0]' <<< "$out")
vb_assert_contains "$problem" "$T/x1.img" "the problem names the path"
vb_assert_contains "$problem" "checksum" "the problem says why"
vb_assert_eq "false" "$(group "$out" broken .adopted)" "broken not adopted"
vb_assert_contains "$(group "$out" broken '.problems | join(";")')" "no component found" "broken's missing slot"
vb_assert_unchanged "a refused adoption"
text=$(vbmgr scan "$T/x0.img" "$T/x1.img") || vb_fail "exit status with problems"
vb_assert_contains "$text" "problem:" "scan text shows problems"

vb_log "a name clash is reported and refused"
vb_mkimg "$T/y0.img" 32M
vb_mkimg "$T/y1.img" 32M
vb_mkimg "$T/z.img" 8M
vbmgr create other --driver raid1 "$T/y0.img" "$T/y1.img"
vbmgr start other
vbmgr stop other
vbmgr delete other
vbmgr create other --driver file "$T/z.img"
vb_snapshot
out=$(vbmgr scan --adopt --json "$T/y0.img" "$T/y1.img") || vb_fail "scan with a name clash"
vb_assert_eq "false false" "$(group "$out" other '"\(.known) \(.adopted)"')" "the raid1 'other' is not adopted"
vb_assert_contains "$(group "$out" other '.problems | join(";")')" "name 'other' is taken by another device" "the clash"
vb_assert_unchanged "a refused name clash"

vb_log "bad usage and bad paths"
rc=0; vbmgr scan --bogus 2> /dev/null || rc=$?
vb_assert_eq 2 "$rc" "unknown option"
out=$(scan_json "$T/nothing-here.img" "$T/z.img")
vb_assert_contains "$(jq -r '.[] | select(has("uuid") | not) | .problems[0]' <<< "$out")" "$T/nothing-here.img" "a missing path is named"
if gdbus call --system --dest org.vblk.VBlk1 --object-path /org/vblk/VBlk1/Manager \
     --method org.vblk.VBlk1.Manager.Scan "{'paths': <['relative.img']>}" > /dev/null 2> "$T/gdbus.err"; then
  vb_fail "Scan took a relative path"
fi
vb_assert_contains "$(cat "$T/gdbus.err")" "Error.InvalidArgument" "Scan with a relative path"
vb_assert_contains "$(cat "$T/gdbus.err")" "relative.img" "a relative path is named"

vb_log "the default scan finds a device on a block device"
loop=$(losetup --find --show "$T/y0.img")
out=$(vbmgr scan --json) || vb_fail "default scan"
vb_assert_contains "$(jq -r '.[] | .components[]?.path' <<< "$out")" "$loop" "the default scan reads $loop"
losetup -d "$loop"

vbmgr delete other
vbmgr delete stripe
vbmgr delete mirror

vb_log "the spare was found and adopted with its role"
vb_assert_eq "$T/s.img" "$found_spares" "the spare in the scan"
vb_assert_eq "$mirror_components" "$adopted_mirror_components" "mirror's components and roles, with the spare"
vb_stop_daemon
