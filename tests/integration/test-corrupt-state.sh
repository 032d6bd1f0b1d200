#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# vblkd refuses to start on a corrupt state.json or state.journal: non-zero
# exit, a message naming the file and where, the bus name never taken, the
# files untouched. A journal's last record cut by a crash (a change never
# acknowledged) is left out, and vblkd starts.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
mkdir -p "$VB_STATE_DIR" "$VB_RUN_DIR"

# run_vblkd — vblkd in the foreground (at most 10 s); stderr in $T/err.
run_vblkd () {
  local rc=0
  timeout 10 "$VBLKD" --state-dir "$VB_STATE_DIR" --run-dir "$VB_RUN_DIR" \
    --dev-dir "$VB_DEV_DIR" > "$T/out" 2> "$T/err" || rc=$?
  cat "$T/out" "$T/err" >> "$VB_LOG"
  return "$rc"
}

# check_refused WHAT LOCATION_REGEX [FILE] — FILE (state.json) named
check_refused () {
  local what=$1 where=$2 file=${3:-$VB_STATE_FILE} rc=0
  vb_state_files > "$T/state.orig"
  run_vblkd || rc=$?
  [ "$rc" -ne 0 ] || vb_fail "$what: vblkd exited 0 on a corrupt ${file##*/}"
  [ "$rc" -ne 124 ] || vb_fail "$what: vblkd kept running on a corrupt ${file##*/}"
  vb_assert_contains "$(cat "$T/err")" "$file" "$what: vblkd's message"
  [ -z "$where" ] || grep -Eq "$where" "$T/err" ||
    vb_fail "$what: vblkd's message does not say where ($where): $(cat "$T/err")"
  vb_state_files | cmp -s "$T/state.orig" - || vb_fail "$what: state.json or its journal was rewritten"
  ! vb_name_has_owner "$VB_BUS_NAME" || vb_fail "$what: $VB_BUS_NAME is owned"
}

vb_log "a JSON syntax error on line 5"
cat > "$VB_STATE_FILE" << 'EOF_JSON'
{
  "version": 1,
  "devices": [
    {
      "name": "a",, "driver": "file"
    }
  ]
}
EOF_JSON
check_refused "syntax error" '(:5(:|[^0-9])|line 5([^0-9]|$))'

vb_log "a truncated file"
printf '{\n  "version": 1,\n  "devices": [\n' > "$VB_STATE_FILE"
check_refused "truncated file" ''

vb_log "valid JSON that is not a state: devices is not an array"
printf '{\n  "version": 1,\n  "devices": "a"\n}\n' > "$VB_STATE_FILE"
check_refused "devices not an array" ''

vb_log "a device with a bad name"
cat > "$VB_STATE_FILE" << 'EOF_JSON'
{
  "version": 1,
  "devices": [
    { "name": "bad/name", "uuid": "5b0c3cd0-58f4-4b1f-9b9f-1a0e63b9a3c1",
      "driver": "file", "backend": "loop", "attributes": {},
      "components": [], "exports": [], "autostart": true }
  ]
}
EOF_JSON
check_refused "bad device name" ''

vb_log "an unknown version"
printf '{ "version": 99, "devices": [] }\n' > "$VB_STATE_FILE"
check_refused "unknown version" ''

vb_log "a good file is accepted again"
printf '{ "version": 1, "devices": [] }\n' > "$VB_STATE_FILE"
vb_start_daemon
vb_assert_eq 0 "$(vbmgr list --json | jq length)" "devices of an empty state"
vb_stop_daemon

vb_log "the journal: three devices, the first in state.json, the others in state.journal"
rm "$VB_STATE_FILE"
vb_start_daemon
for d in a b c; do
  truncate -s 4M "$T/$d.img"
  vbmgr create "$d" --driver file "$T/$d.img"
done
vb_stop_daemon
[ -s "$VB_STATE_JOURNAL" ] || vb_fail "no journal after three creates"
vb_assert_eq 1 "$(jq '.devices | length' "$VB_STATE_FILE")" "devices in state.json itself"
vb_assert_eq "a b c" "$(vb_state | jq -r '[.devices[].name] | join(" ")')" "devices with the journal"
cp "$VB_STATE_JOURNAL" "$T/journal.good"

vb_log "a journal record damaged, another after it"
sed -i '2s/"b"/"x"/' "$VB_STATE_JOURNAL"
check_refused "damaged record" 'state\.journal:2: the record does not match its SHA-256' "$VB_STATE_JOURNAL"

vb_log "a journal that is not one"
printf 'not a journal\n' > "$VB_STATE_JOURNAL"
check_refused "not a journal" 'state\.journal:1: not a vblk journal' "$VB_STATE_JOURNAL"

vb_log "the last record cut by a crash: left out, vblkd starts, the next change is whole"
{ cat "$T/journal.good"; printf '%s' "$(sha256sum < /dev/null | cut -c1-20)"; } > "$VB_STATE_JOURNAL"
vb_start_daemon
vb_assert_contains "$(cat "$VB_LOG")" "its last record was cut" "vblkd's log"
vb_assert_eq "a b c" "$(vbmgr list --json | jq -r '[.[].name] | join(" ")')" "devices after the cut record"
vbmgr delete b
vb_assert_absent "$VB_STATE_JOURNAL" "the journal after the next change (state.json whole)"
vb_assert_eq "a c" "$(jq -r '[.devices[].name] | join(" ")' "$VB_STATE_FILE")" "state.json after the delete"
vb_stop_daemon
