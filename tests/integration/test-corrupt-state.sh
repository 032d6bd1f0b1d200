#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# vblkd refuses to start on a corrupt state.json: non-zero exit, a message
# naming the file and where, the bus name never taken, the file untouched.
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

# check_refused WHAT LOCATION_REGEX
check_refused () {
  local what=$1 where=$2 rc=0
  cp "$VB_STATE_FILE" "$T/state.orig"
  run_vblkd || rc=$?
  [ "$rc" -ne 0 ] || vb_fail "$what: vblkd exited 0 on a corrupt state.json"
  [ "$rc" -ne 124 ] || vb_fail "$what: vblkd kept running on a corrupt state.json"
  vb_assert_contains "$(cat "$T/err")" "$VB_STATE_FILE" "$what: vblkd's message"
  [ -z "$where" ] || grep -Eq "$where" "$T/err" ||
    vb_fail "$what: vblkd's message does not say where ($where): $(cat "$T/err")"
  cmp -s "$T/state.orig" "$VB_STATE_FILE" || vb_fail "$what: state.json was rewritten"
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
