#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Load and faults together (issue 22, point 5): 16 clients create, start,
# stop and delete devices of their own (file devices, loop backend) while
# block devices come and go (hotplug events) and vblkd is SIGKILLed at
# random moments, 100 times. After each restart, with the clients held:
# state.json is valid JSON that vblkd loaded; no name or UUID twice; every
# device is as its client's acknowledged changes left it (an acknowledged
# create, start, stop or delete is never lost; the change in flight when
# vblkd died may have happened or not, never half); a started device has
# one loop device and any other none (nothing leaked, nothing doubled).
#   VB_LOAD_CLIENTS (16), VB_LOAD_KILLS (100), VB_LOAD_DEVICES per client (3)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

CLIENTS=${VB_LOAD_CLIENTS:-16}
KILLS=${VB_LOAD_KILLS:-100}
DEVICES=${VB_LOAD_DEVICES:-3}
for ((c = 0; c < CLIENTS; c++)); do
  for ((k = 0; k < DEVICES; k++)); do vb_mkimg "$T/c$c-d$k.img" 4M; done
done
vb_mkimg "$T/stranger.img" 4M
HOLD=$T/hold   # while it exists, clients finish their call and wait
END=$T/end
vb_on_cleanup touch "$END"
vb_on_cleanup rm -f "$HOLD"

# A client's model of device k: model.C holds a line "k STATES" each, the
# states it may be in (absent, stopped, active): one after an answer, two
# while a call runs and, once vblkd died under it, until the check after
# the kill says which (the client leaves that device alone meanwhile).
# vblk_error OUT: vbmgr says vblkd refused the call (nothing changed).
# Not NotFound or Failed: vbmgr says those of a call vblkd died under too
# (an object gone from the bus, no reply), and a refusal taken for a call
# cut short would let the check pass a change that was lost.
vblk_error () { grep -qE ': (NotAuthorized|InvalidArgument|AlreadyExists|Busy|WouldLoseData|DependencyCycle|NotSupported): ' <<< "$1"; }

client () {
  local c=$1 k name op next out rc
  local -a st
  for ((k = 0; k < DEVICES; k++)); do st[k]=absent; done
  RANDOM=$((c * 7919 + 17))
  while [ ! -e "$END" ]; do
    if [ -e "$HOLD" ]; then
      : > "$T/held.$c"
      while [ -e "$HOLD" ] && [ ! -e "$END" ]; do sleep 0.05; done
      # what the check found is what the device is now
      if [ -e "$T/truth.$c" ]; then
        mapfile -t st < "$T/truth.$c"
        printf '%s\n' "${st[@]}" | awk '{ print NR - 1, $0 }' > "$T/model.$c.new"
        mv "$T/model.$c.new" "$T/model.$c"
      fi
      rm -f "$T/held.$c" "$T/truth.$c"
      continue
    fi
    k=$((RANDOM % DEVICES))
    name=c$c-d$k
    if [[ ${st[k]} == *" "* ]]; then
      sleep 0.05 # not known until the check after the kill says
      continue
    fi
    case ${st[k]} in
      absent) op=create next=stopped ;;
      stopped) if ((RANDOM % 3)); then op=start next=active; else op=delete next=absent; fi ;;
      active) op=stop next=stopped ;;
      *) echo "client $c: device $k in '${st[k]}'" >> "$T/client-errors"; return ;;
    esac
    # the model says both while the call runs: the check may come meanwhile
    printf '%s\n' "${st[@]}" | awk -v k="$k" -v both="${st[k]} $next" \
      '{ print NR - 1, (NR - 1 == k ? both : $0) }' > "$T/model.$c.new"
    mv "$T/model.$c.new" "$T/model.$c"
    rc=0
    case $op in
      create) out=$(timeout 60 "$VBMGR" create "$name" --driver file --backend loop "$T/$name.img" 2>&1) || rc=$? ;;
      *) out=$(timeout 60 "$VBMGR" "$op" "$name" 2>&1) || rc=$? ;;
    esac
    if [ "$rc" = 0 ]; then
      st[k]=$next
      echo "$op $name ok" >> "$T/client.$c.log"
    elif vblk_error "$out" || [[ $out == *"no process owns org.vblk.VBlk1"* ]]; then
      # refused, or never sent: vblkd was not there
      echo "$op $name refused: $out" >> "$T/client.$c.log"
      [[ $out != *"no process owns"* ]] || sleep 0.05
    else
      echo "$op $name unknown: $out" >> "$T/client.$c.log"
      st[k]="${st[k]} $next" # either, until the check says
    fi
    printf '%s\n' "${st[@]}" | awk '{ print NR - 1, $0 }' > "$T/model.$c.new"
    mv "$T/model.$c.new" "$T/model.$c"
  done
}

# check — every client held: state.json against the models, then nodes.
check () {
  local c n_names bad
  vb_state | jq -e . > /dev/null || vb_fail "state.json is not valid JSON"
  n_names=$(vb_state | jq '[.devices[].name] | length')
  vb_assert_eq "$n_names" "$(vb_state | jq '[.devices[].name] | unique | length')" \
    "names in state.json are unique"
  vb_assert_eq "$n_names" "$(vb_state | jq '[.devices[].uuid] | unique | length')" \
    "UUIDs in state.json are unique"
  vb_state | jq -r '.devices[] | "\(.name) \(if .started then "active" else "stopped" end)"' \
    > "$T/actual"
  : > "$T/expected-loops"
  for ((c = 0; c < CLIENTS; c++)); do
    [ -e "$T/model.$c" ] || seq 0 $((DEVICES - 1)) | sed 's/$/ absent/' > "$T/model.$c"
    # truth.C: what each device is; a line "BAD ..." for one its client's
    # answers do not allow
    awk -v c="$c" -v actual_file="$T/actual" 'FILENAME == actual_file { actual[$1] = $2; next }
      { name = "c" c "-d" $1; a = (name in actual) ? actual[name] : "absent"
        ok = 0; for (i = 2; i <= NF; i++) if ($i == a) ok = 1
        if (!ok) print "BAD " name " is " a " in state.json; its client allows only: " $0
        print a > truth; print name, (a == "active") > loops }' \
      truth="$T/truth.$c.new" loops="$T/loops.$c" "$T/actual" "$T/model.$c" > "$T/bad.$c"
    cat "$T/loops.$c" >> "$T/expected-loops"
    if [ -s "$T/bad.$c" ]; then
      bad=$(cat "$T/bad.$c")
      vb_fail "kill $kill: ${bad#BAD } (client log: $(tail -4 "$T/client.$c.log" 2> /dev/null))"
    fi
    mv "$T/truth.$c.new" "$T/truth.$c"
  done
  # vblkd brings started devices back and takes down what is not wanted
  vb_wait_until 30 loops_as_expected ||
    { loops_as_expected show; vb_fail "kill $kill: loop devices differ from the started devices"; }
}

# loops_as_expected [show] — each image has a loop device exactly when its
# device is started
loops_as_expected () {
  losetup -nl -O BACK-FILE 2> /dev/null | awk -v t="$T/" -v show="${1:-}" '
    FNR == NR { want[t $1 ".img"] = $2; next }
    { have[$0]++ }
    END { bad = 0
      for (f in want) if (have[f] + 0 != want[f]) {
        bad = 1; if (show) printf "%s: %d loop device(s), %d expected\n", f, have[f], want[f] > "/dev/stderr" }
      exit bad }' "$T/expected-loops" -
}

acked () { cat "$T"/client.*.log 2> /dev/null | grep -c ' ok$' || true; }

all_held () {
  local c
  for ((c = 0; c < CLIENTS; c++)); do [ -e "$T/held.$c" ] || return 1; done
}

pids=()
for ((c = 0; c < CLIENTS; c++)); do
  client "$c" &
  pids+=($!)
done
vb_on_cleanup "kill ${pids[*]} 2> /dev/null"

stranger=
for ((kill = 1; kill <= KILLS; kill++)); do
  # a few changes acknowledged since the last kill, then a random moment
  want=$(($(acked) + 3))
  vb_wait_until 30 eval '[ "$(acked)" -ge "$want" ]' ||
    vb_fail "kill $kill: vblkd acknowledged fewer than 3 changes in 30 s"
  sleep "0.$((RANDOM % 4))"
  # hotplug: a disk that is nobody's comes or goes, and now and then a
  # change event for every block device
  if [ -z "$stranger" ]; then
    stranger=$(losetup -f --show "$T/stranger.img")
  else
    losetup -d "$stranger"
    stranger=
  fi
  ((kill % 5)) || udevadm trigger --action=change --subsystem-match=block > /dev/null 2>&1 || true
  vb_kill_daemon
  touch "$HOLD"
  vb_wait_until 120 all_held || vb_fail "kill $kill: the clients did not all stop"
  [ ! -s "$T/client-errors" ] || vb_fail "$(cat "$T/client-errors")"
  vb_start_daemon
  check
  rm -f "$HOLD"
done
touch "$END"
for p in "${pids[@]}"; do wait "$p" || true; done
[ -z "$stranger" ] || losetup -d "$stranger"

acked=$(acked)
unknown=$(cat "$T"/client.*.log | grep -c ' unknown: ' || true)
refused=$(cat "$T"/client.*.log | grep -c ' refused: ' || true)
vb_log "$KILLS kills; $CLIENTS clients: $acked changes acknowledged, $unknown cut by a kill, $refused refused"
grep -h ' refused: ' "$T"/client.*.log | sed 's/.*refused: //' | sort | uniq -c | sort -rn | head -5 >&2 || true

vb_log "at the end: every device stopped and deleted"
for ((c = 0; c < CLIENTS; c++)); do
  for ((k = 0; k < DEVICES; k++)); do
    name=c$c-d$k
    if vbmgr show "$name" > /dev/null 2>&1; then
      [ "$(vb_state_of "$name")" != active ] || vbmgr stop "$name"
      vbmgr delete "$name"
    fi
  done
done
vb_assert_eq 0 "$(vb_state | jq '.devices | length')" "devices left"
vb_stop_daemon
