#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# An installer on the bus (issue 19): a python3-gi client (as Debian's
# installer or Anaconda would call vblkd) applies a spec with a raid1, a
# linear on it and a window, following the apply's Job to its Completed
# signal, then makes a file system and mounts it; the same spec again is an
# empty plan (state.json unchanged byte for byte, no job, no event); a leg
# added in the spec is one reconfigure that runs while mounted; a dry run
# dropping a device without prune is refused. A Start of the stacked
# device is a "start" Job followed through PropertiesChanged and
# Completed; an apply cancelled after its first step leaves the state as
# before.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import gi' 2> /dev/null ||
  { echo "SKIP: /usr/bin/python3 lacks python3-gi" >&2; exit 77; }
vb_setup
hold=$T/hold
vb_start_daemon VBLK_TEST_HOLD_AT=apply:step-2 VBLK_TEST_HOLD_FILE="$hold"
installer () { /usr/bin/python3 "$VB_SRCDIR/tests/integration/vb-installer.py" "$@"; }

for f in a b c w p q; do vb_mkimg "$T/$f.img" 64M; done
spec () { # spec RAID1_LEGS...
  local legs
  legs=$(printf '"%s",' "$@")
  cat << EOF
{"version": 1, "devices": [
  {"name": "root", "driver": "linear", "components": ["vblk:md0"]},
  {"name": "md0", "driver": "raid1", "components": [${legs%,}], "attributes": {"bitmap_chunk": "1M"}},
  {"name": "efi", "driver": "window", "components": ["$T/w.img"], "attributes": {"size": "32M"}}
]}
EOF
}

vb_log "the installer applies its storage and follows the job"
spec "$T/a.img" "$T/b.img" > "$T/spec.json"
out=$(installer apply "$T/spec.json")
vb_assert_eq "create:md0 create:efi create:root start:md0 start:efi start:root" \
  "$(jq -r '[.plan.steps[].id] | join(" ")' <<< "$out")" "the plan"
vb_assert_eq "done done done done done done" \
  "$(jq -r '[.plan.steps[].status] | join(" ")' <<< "$out")" "the steps' status"
vb_assert_eq 1 "$(jq '.jobs | length' <<< "$out")" "apply jobs seen"
job=$(jq -c '.jobs[]' <<< "$out")
vb_assert_eq '[true,"6 steps done"]' "$(jq -c .completed <<< "$job")" "Completed"
vb_assert_eq "finished 6 true" "$(jq -r '"\(.state) \(.bytes) \(.cancelable)"' <<< "$job")" "the job"
vb_assert_eq 1 "$(jq '.progress | last' <<< "$job")" "the last progress seen"
jq -e '.progress | . == sort' <<< "$job" > /dev/null || vb_fail "progress went back: $job"
vbmgr wait md0 > /dev/null || vb_fail "md0's resync"
node=$(vb_blockdev_of root)
mkfs.ext4 -q "$node"
mkdir -p "$T/target"
mount "$node" "$T/target"
vb_on_cleanup_early "umount '$T/target' 2> /dev/null || true"
head -c 4M /dev/urandom > "$T/target/installed"
sum=$(md5sum < "$T/target/installed")

vb_log "the same spec again: an empty plan, nothing touched"
vbmgr monitor --json > "$T/events" &
vb_on_cleanup "kill $! 2> /dev/null || true"
sleep 0.5
vb_snapshot
jobs_before=$(vbmgr jobs --json | jq length)
out=$(installer apply "$T/spec.json")
vb_assert_eq 0 "$(jq '.plan.steps | length' <<< "$out")" "steps of the same spec"
vb_assert_eq 0 "$(jq '.jobs | length' <<< "$out")" "jobs of the same spec"
sleep 0.5
vb_assert_unchanged "the same spec"
vb_assert_eq "$jobs_before" "$(vbmgr jobs --json | jq length)" "jobs after the same spec"
vb_assert_eq "" "$(cat "$T/events")" "events of the same spec"

vb_log "a leg added to the raid1 in the spec: one reconfigure, while mounted"
spec "$T/a.img" "$T/b.img" "$T/c.img" > "$T/spec3.json"
out=$(installer apply "$T/spec3.json")
vb_assert_eq "reconfigure:md0" "$(jq -r '[.plan.steps[].id] | join(" ")' <<< "$out")" "the plan"
vb_assert_eq '[true,"1 steps done"]' "$(jq -c '.jobs[].completed' <<< "$out")" "Completed"
vbmgr wait md0 > /dev/null || vb_fail "the new leg's rebuild"
vb_assert_eq 3 "$(vb_json md0 '.components | length')" "md0's legs"
vb_assert_eq "$sum" "$(md5sum < "$T/target/installed")" "the installed file"
umount "$T/target"

vb_log "a dry run dropping a device without prune: refused, nothing changed"
jq 'del(.devices[2])' "$T/spec3.json" > "$T/drop.json"
vb_snapshot
out=$(installer apply "$T/drop.json" --dry-run)
vb_assert_eq "org.vblk.VBlk1.Error.WouldLoseData" "$(jq -r .error <<< "$out")" "the refusal"
vb_assert_contains "$(jq -r .message <<< "$out")" "delete:efi" "the refusal"
vb_assert_unchanged "a refused dry run"

vb_log "Start of the stacked device: a start job, PropertiesChanged, Completed"
vbmgr stop root --recursive
out=$(installer start root)
job=$(jq -c '.jobs[]' <<< "$out")
vb_assert_eq '"/org/vblk/VBlk1/devices/root"' "$(jq -c '.objects[0]' <<< "$job")" "the job's device"
vb_assert_eq "finished false" "$(jq -r '"\(.state) \(.cancelable)"' <<< "$job")" "the start job"
vb_assert_eq '[true,""]' "$(jq -c .completed <<< "$job")" "Completed of the start"
vb_assert_eq active "$(vb_state_of root)" "root after the start"
vb_assert_eq active "$(vb_state_of md0)" "md0 (started for root)"

vb_log "an apply cancelled while held before its second step: the first undone"
jq ".devices += [{\"name\": \"d1\", \"driver\": \"linear\", \"components\": [\"$T/p.img\"]},
                 {\"name\": \"d2\", \"driver\": \"linear\", \"components\": [\"$T/q.img\"]}]" \
  "$T/spec3.json" > "$T/more.json"
vb_snapshot
touch "$hold"
# the client cancels as soon as the job appears: during step 1 or while
# step 2 is held, the apply stops before step 2 either way
installer cancel-apply "$T/more.json" > "$T/cancel.out" 2> "$T/cancel.err" &
client=$!
wait "$client" || vb_fail "the installer client failed: $(cat "$T/cancel.err")"
rm "$hold"
out=$(cat "$T/cancel.out")
vb_log "$(jq -r .message <<< "$out")"
vb_assert_contains "$(jq -r .message <<< "$out")" "cancelled before step 2 of 4" "the answer"
vb_assert_contains "$(jq -r .message <<< "$out")" "undone: 1 create:d1; not undone: none; not done: 2 create:d2, 3 start:d1, 4 start:d2" "the answer"
vb_assert_eq "cancelled false" "$(jq -r '.jobs[] | "\(.state) \(.completed[0])"' <<< "$out")" \
  "the cancelled job"
vb_assert_unchanged "a cancelled apply"
vb_expect_fail NotFound vbmgr examine "$T/p.img" # d1's superblock, wiped when undone
vb_log "ok"
