#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# vbmgr apply / dump (Manager.Apply; issue 19): a spec with a raid1, a
# linear on it and a window becomes the desired state in dependency order;
# applied again (or dumped and applied) it is an empty plan that touches
# nothing; a leg added in the spec is one online reconfiguration under a
# mounted file system; a device left out is refused without --prune; a
# step that fails at run time has the steps before it undone, with
# state.json as before and the components blank again; bad specs are
# refused naming their JSON path, with nothing changed.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
# step 4 of an apply waits while $T/hold exists (the run-time failure below)
hold=$T/hold
vb_start_daemon VBLK_TEST_HOLD_AT=apply:step-4 VBLK_TEST_HOLD_FILE="$hold"

for f in a b c q x y z w; do vb_mkimg "$T/$f.img" 64M; done
spec () { # spec RAID1_LEGS... — the installer's storage
  local legs
  legs=$(printf '"%s",' "$@")
  cat << EOF
{
  "version": 1,
  "devices": [
    {"name": "data", "driver": "linear", "components": ["vblk:mirror"]},
    {"name": "swapwin", "driver": "window", "components": ["$T/w.img"],
     "attributes": {"offset": "1M", "size": "16M"}, "started": false},
    {"name": "mirror", "driver": "raid1", "components": [${legs%,}],
     "attributes": {"bitmap_chunk": "1M"}}
  ]
}
EOF
}

# schema_valid FILE — FILE is valid against the shipped JSON Schema
schema_valid () {
  /usr/bin/python3 - "$VB_SRCDIR/data/schema/vblk-spec.schema.json" "$1" << 'PY'
import json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
jsonschema.Draft202012Validator(schema).validate(json.load(open(sys.argv[2])))
PY
}

vb_log "a new stack: created dependencies first, then started"
spec "$T/a.img" "$T/b.img" > "$T/spec.json"
vb_snapshot
out=$(vbmgr apply "$T/spec.json" --dry-run)
vb_assert_contains "$out" "5 steps (dry run: nothing done)" "dry run"
vb_assert_unchanged "a dry run"
plan=$(vbmgr apply "$T/spec.json" --dry-run --json | jq -r '[.steps[].id] | join(" ")')
vb_assert_eq "create:swapwin create:mirror create:data start:mirror start:data" "$plan" "the plan"
out=$(vbmgr apply "$T/spec.json")
vb_assert_contains "$out" "done" "apply's table"
vb_assert_eq active "$(vb_state_of data)" "data after apply"
vb_assert_eq stopped "$(vb_state_of swapwin | sed s/ready/stopped/)" "swapwin after apply"
vbmgr wait mirror > /dev/null || vb_fail "mirror's resync"

vb_log "the same spec again, or the dump: nothing to do, nothing touched"
vbmgr monitor --json > "$T/events" &
monitor=$!
vb_on_cleanup "kill $monitor 2> /dev/null || true"
sleep 0.5
vb_snapshot
out=$(vbmgr apply "$T/spec.json")
vb_assert_eq "nothing to do: the desired state is the spec" "$out" "the same spec"
vbmgr dump > "$T/dump.json"
for f in spec dump; do
  schema_valid "$T/$f.json" || vb_fail "$f.json is not valid against data/schema/vblk-spec.schema.json"
done
out=$(vbmgr apply - --dry-run < "$T/dump.json")
vb_assert_eq "nothing to do: the desired state is the spec" "$out" "the dump"
vb_assert_eq 0 "$(vbmgr apply "$T/dump.json" --json | jq '.steps | length')" "the dump applied"
sleep 0.5
vb_assert_unchanged "an empty plan"
vb_assert_eq "" "$(cat "$T/events")" "events of an empty plan"

vb_log "a leg added in the spec: one online reconfiguration, under a mounted file system"
node=$(vb_blockdev_of data)
mkfs.ext4 -q "$node"
mkdir -p "$T/mnt"
mount "$node" "$T/mnt"
vb_on_cleanup_early "umount '$T/mnt' 2> /dev/null || true"
head -c 8M /dev/urandom > "$T/mnt/file"
sum=$(md5sum < "$T/mnt/file")
spec "$T/a.img" "$T/b.img" "$T/c.img" > "$T/spec3.json"
plan=$(vbmgr apply "$T/spec3.json" --dry-run --json | jq -r '[.steps[] | .id + " +" + (.add | join(","))] | join(" ")')
vb_assert_eq "reconfigure:mirror +$T/c.img" "$plan" "the plan of a leg added"
vbmgr apply "$T/spec3.json" > /dev/null
vbmgr wait mirror > /dev/null || vb_fail "the new leg's rebuild"
vb_assert_eq "in-sync in-sync in-sync" "$(vb_json mirror '[.components[].state] | join(" ")')" "mirror's legs"
vb_assert_eq "$sum" "$(md5sum < "$T/mnt/file")" "the file under the reconfiguration"
umount "$T/mnt"
vb_assert_eq 0 "$(vbmgr apply "$T/spec3.json" --json | jq '.steps | length')" "spec3 again"

vb_log "a device left out: refused without --prune, nothing changed"
jq 'del(.devices[1])' "$T/spec3.json" > "$T/drop.json"
vb_snapshot
vb_expect_fail WouldLoseData vbmgr apply "$T/drop.json" --dry-run
vb_assert_contains "$VB_ERR" "delete:swapwin (not in the spec)" "the refusal"
vb_expect_fail WouldLoseData vbmgr apply "$T/drop.json"
vb_assert_unchanged "a refused prune"
plan=$(vbmgr apply "$T/drop.json" --dry-run --prune --json | jq -r '[.steps[].id] | join(" ")')
vb_assert_eq "delete:swapwin" "$plan" "the plan with --prune"

vb_log "bad specs: refused naming the JSON path, nothing changed"
bad () { # bad ERROR MESSAGE JQ_EDIT — spec3 edited by JQ_EDIT is refused
  jq "$3" "$T/spec3.json" > "$T/bad.json"
  vb_expect_fail "$1" vbmgr apply "$T/bad.json"
  vb_assert_contains "$VB_ERR" "$2" "the error of '$3'"
}
vb_snapshot
printf '{"version": 1, "devices": [' > "$T/bad.json"
vb_expect_fail InvalidArgument vbmgr apply "$T/bad.json"
vb_assert_contains "$VB_ERR" "spec:1:" "malformed JSON"
bad InvalidArgument "spec: devices[0]: unknown key 'size'" '.devices[0].size = 1'
! schema_valid "$T/bad.json" 2> /dev/null || vb_fail "the schema takes an unknown key"
bad InvalidArgument "spec: devices[2]: driver: 'raid7' is not a driver" '.devices[2].driver = "raid7"'
bad DependencyCycle "spec: devices: dependency cycle" '.devices[2].components[0] = "vblk:data"'
bad InvalidArgument "spec: devices[2].components[0]: source: '$T/a.img' is a component of two devices (also devices[1].components[0])" \
  ".devices[1].components[0] = \"$T/a.img\""
bad NotFound "spec: devices[0].components[0]: source: vblk:nothing names no device of the spec" \
  '.devices[0].components[0] = "vblk:nothing"'
bad InvalidArgument "spec: devices[1]: attributes: attribute 'size'" '.devices[1].attributes.size = "9Q"'
bad InvalidArgument "spec: devices[1].attributes.offset: expected a string, a number or a boolean" \
  '.devices[1].attributes.offset = [1]'
bad NotFound "spec: devices[3].components[0]: component '$T/gone.img'" ".devices += [{\"name\": \"new\", \"driver\": \"linear\", \"components\": [\"$T/gone.img\"]}]"
vb_expect_fail InvalidArgument vb_manager_call Apply "'{}'" "{'prune': <'yes'>}"
vb_assert_contains "$VB_ERR" "option 'prune': expected type 'b', got 's'" "a bad option"
vb_expect_fail InvalidArgument vb_manager_call Apply "'{}'" "{'force': <true>}"
vb_assert_contains "$VB_ERR" "option 'force': unknown" "an unknown option"
vb_log "an unprivileged caller: a dry run (it changes nothing) but no apply"
jq '.devices += [{"name": "nob", "driver": "file", "components": ["/nonexistent"]}]' \
  "$T/spec3.json" > "$T/nobody.json"
chmod a+r "$T/nobody.json"
vb_expect_fail NotAuthorized vb_as_nobody "$VBMGR" apply "$T/nobody.json"
out=$(vb_as_nobody "$VBMGR" apply "$T/drop.json" --dry-run --prune --json | jq -r '.steps[0].id')
vb_assert_eq "delete:swapwin" "$out" "an unprivileged dry run"
vb_assert_unchanged "bad specs"

# apply_broken_at_step4 SPEC [OPTION...] — vbmgr apply held before step 4,
# while broken.img (its component) becomes a directory, which no device
# can take; the apply must fail; its stderr in $err
apply_broken_at_step4 () {
  local held apply rc=0
  touch "$hold"
  held=$(grep -c "holding at apply:step-4" "$VB_LOG" || true)
  vb_bg vbmgr apply "$@" 2> "$T/apply.err"
  apply=$VB_BG_PID
  vb_wait_until 20 eval "[ \"\$(grep -c 'holding at apply:step-4' \"\$VB_LOG\")\" -gt $held ]" ||
    vb_fail "apply did not reach step 4"
  rm "$T/broken.img"
  mkdir "$T/broken.img"
  rm "$hold"
  wait "$apply" || rc=$?
  vb_assert_eq 1 "$rc" "exit status of the failed apply"
  err=$(cat "$T/apply.err")
  vb_log "$err"
}

vb_log "a step failing at run time: the steps before it undone, last first"
vb_snapshot
jq ".devices += [{\"name\": \"n1\", \"driver\": \"linear\", \"components\": [\"$T/x.img\"], \"started\": false},
                 {\"name\": \"n2\", \"driver\": \"raid1\", \"components\": [\"$T/y.img\", \"$T/z.img\"], \"started\": false},
                 {\"name\": \"n3\", \"driver\": \"linear\", \"started\": false,
                  \"components\": [\"vblk:n1\", \"vblk:n2\", \"$T/broken.img\"]},
                 {\"name\": \"n4\", \"driver\": \"linear\", \"components\": [\"$T/q.img\"], \"started\": false}]" \
  "$T/spec3.json" > "$T/four.json"
vb_mkimg "$T/broken.img" 16M
schema_valid "$T/four.json" || vb_fail "four.json is not valid against the schema"
plan=$(vbmgr apply "$T/four.json" --dry-run --json | jq -r '[.steps[].id] | join(" ")')
vb_assert_eq "create:n1 create:n2 create:n4 create:n3" "$plan" "the plan of four"
apply_broken_at_step4 "$T/four.json"
vb_assert_contains "$err" "step 4 of 4 (create:n3) failed" "the failed step"
vb_assert_contains "$err" "undone: 3 create:n4, 2 create:n2, 1 create:n1" "the steps undone"
vb_assert_contains "$err" "not done: none" "no step left"
vb_assert_unchanged "a failed apply"
for f in q x y z; do
  vb_expect_fail NotFound vbmgr examine "$T/$f.img"
done
vb_log "a deleted device whose component a later step wrote on: not undone, and said so"
rm -rf "$T/broken.img"
vb_mkimg "$T/broken.img" 16M
vb_mkimg "$T/r.img" 16M
jq "del(.devices[1]) | .devices += [
      {\"name\": \"reuse\", \"driver\": \"linear\", \"components\": [\"$T/w.img\"], \"started\": false},
      {\"name\": \"ok2\", \"driver\": \"linear\", \"components\": [\"$T/r.img\"], \"started\": false},
      {\"name\": \"bad\", \"driver\": \"linear\", \"components\": [\"$T/broken.img\"], \"started\": false}]" \
  "$T/spec3.json" > "$T/reuse.json"
plan=$(vbmgr apply "$T/reuse.json" --dry-run --prune --json | jq -r '[.steps[].id] | join(" ")')
vb_assert_eq "delete:swapwin create:reuse create:ok2 create:bad" "$plan" "the plan reusing w.img"
apply_broken_at_step4 "$T/reuse.json" --prune
vb_assert_contains "$err" "undone: 3 create:ok2, 2 create:reuse; not undone: 1 delete:swapwin" "the steps"
vb_assert_contains "$err" "step 2 (create:reuse) wrote its own superblocks on components of 'swapwin', which stays deleted" \
  "why the delete stays"
vb_expect_fail NotFound vbmgr show swapwin
vb_expect_fail NotFound vbmgr examine "$T/r.img"
vb_log "ok"
