#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Hotplug through the policy rules, with real udev events of real loop
# devices: devices reassemble from components that come back in another
# order (nothing starts before the last one), start degraded only after
# start-degraded-after, a component detached under fio makes its device
# degraded and a blank disk matching a replace rule takes its place, a disk
# matching no rule is left alone, and a spare of a domain moves to the
# device that lost a component. Sizes single out this test's loop devices
# from those of tests running beside it.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup

mkdir -p "$T/policy"
cat > "$T/policy/50-test.rules" <<'EOF'
# components of known devices: assemble, degraded after 5 s
[rule components]
match.metadata=vblk
action=assemble
start-degraded-after=5s

[rule replacements]
match.metadata=none
match.size==43M
action=replace
devices=r1

[rule pool]
match.metadata=none
match.size==47M
action=spare
devices=d1,d2
domain=pool
EOF
export VB_DAEMON_ARGS="--policy-dir $T/policy"
vb_start_daemon

attach () { losetup --show -f "$1"; }
state () { vb_json "$1" .state; }
running () { local s; s=$(state "$1"); [ "$s" = active ] || [ "$s" = degraded ]; }

for f in a0 a1 b0 b1 b2; do vb_mkimg "$T/$f.img" 41M; done
declare -A loop
for f in a0 a1 b0 b1 b2; do loop[$f]=$(attach "$T/$f.img"); done
vbmgr create r1 --driver raid1 --attr bitmap_chunk=1M --start "${loop[a0]}" "${loop[a1]}"
vbmgr create r10 --driver raid10 --attr chunk_size=64K --start "${loop[b0]}" "${loop[b1]}" "${loop[b2]}"
vbmgr wait r1 > /dev/null && vbmgr wait r10 > /dev/null || vb_fail "initial resyncs"
for d in r1 r10; do
  dd if=/dev/urandom of="$(vb_blockdev_of "$d")" bs=1M count=8 oflag=direct status=none
  sha256sum < "$(vb_blockdev_of "$d")" > "$T/$d.sum"
done

vb_log "vblkd stops, every loop device goes; they come back one by one, in another order"
vb_stop_daemon
for f in a0 a1 b0 b1 b2; do losetup -d "${loop[$f]}"; done
vb_start_daemon
for d in r1 r10; do running "$d" && vb_fail "$d runs without its components"; done
order=$(printf '%s\n' a0 a1 b0 b1 b2 | shuf)
vb_log "order: $(echo $order)"
declare -A seen=()
for f in $order; do
  # another loop device may have taken the number: where it lands does not matter
  loop[$f]=$(attach "$T/$f.img")
  seen[$f]=1
  sleep 0.6
  if [ -z "${seen[a0]:-}" ] || [ -z "${seen[a1]:-}" ]; then
    running r1 && vb_fail "r1 started before its last component (after $f)"
  fi
  if [ -z "${seen[b0]:-}" ] || [ -z "${seen[b1]:-}" ] || [ -z "${seen[b2]:-}" ]; then
    running r10 && vb_fail "r10 started before its last component (after $f)"
  fi
done
vb_wait_state r1 active 20
vb_wait_state r10 active 20
for d in r1 r10; do
  cmp "$T/$d.sum" <(sha256sum < "$(vb_blockdev_of "$d")") || vb_fail "$d data after reassembly"
done
vb_assert_eq "${loop[a0]} ${loop[a1]}" "$(vb_json r1 '[.components[].source] | join(" ")')" "r1 sources follow the disks"

vb_log "one component never comes back: degraded after start-degraded-after, not before"
vb_stop_daemon
for f in a0 a1 b0 b1 b2; do losetup -d "${loop[$f]}"; done
vb_start_daemon
loop[a0]=$(attach "$T/a0.img")
sleep 3
running r1 && vb_fail "r1 started degraded before start-degraded-after"
vb_wait_state r1 degraded 10
vb_assert_eq "in-sync missing" "$(vb_json r1 '[.components[].state] | join(" ")')" "r1 degraded, leg 1 missing"
dd if=/dev/urandom of="$(vb_blockdev_of r1)" bs=1M count=2 seek=16 oflag=direct status=none
vb_log "the missing leg returns: re-added through the bitmap"
loop[a1]=$(attach "$T/a1.img")
vb_wait_until 20 eval '[ "$(state r1)" = active ]' || vb_fail "r1 not active after the leg returned: $(state r1)"
vbmgr wait r1 > /dev/null
job=$(vbmgr jobs --json | jq -c '[.[] | select(.device == "r1" and .operation == "rebuild")] | last')
vb_assert_eq $((2 << 20)) "$(jq -r .bytes <<< "$job")" "re-add of the returning leg: the 2 chunks written"
for f in b0 b1 b2; do loop[$f]=$(attach "$T/$f.img"); done
vb_wait_state r10 active 20

vb_log "a leg detached under fio: degraded; a blank 43M disk replaces it; a 45M one is left alone"
bd=$(vb_blockdev_of r1)
fio --name=w --filename="$bd" --ioengine=io_uring --direct=1 --rw=randwrite --bs=16k \
    --iodepth=4 --size=16M --time_based --runtime=5 --verify=crc32c --verify_backlog=64 \
    --verify_fatal=1 --output="$T/fio.log" &
fio_pid=$!
sleep 1.5
losetup -d "${loop[a1]}"
rc=0
wait "$fio_pid" || rc=$?
[ "$rc" = 0 ] || vb_fail "fio under the detach ($rc): $(tail -20 "$T/fio.log")"
grep -q "err= 0" "$T/fio.log" || vb_fail "fio saw errors: $(cat "$T/fio.log")"
vb_wait_state r1 degraded 10
vb_mkimg "$T/other.img" 45M
other=$(attach "$T/other.img")
vb_mkimg "$T/new.img" 43M
new=$(attach "$T/new.img")
vb_wait_until 20 eval '[ "$(vb_json r1 ".components[1].source")" = "$new" ]' ||
  vb_fail "the blank 43M disk did not replace leg 1: $(vb_json r1 .components)"
# the new source is shown once saved; the rebuild onto it starts in the
# same op, after the save: wait for the device, not for a job
vb_wait_until 30 eval '[ "$(state r1)" = active ]' ||
  vb_fail "r1 not active after the replacement: $(state r1)"
vbmgr wait r1 > /dev/null || vb_fail "rebuild onto the replacement"
# the replaced leg stays listed (role faulty) unless the new disk got the
# loop number it had: then nothing names it any more
if [ "$new" = "${loop[a1]}" ]; then roles="0 1"; else roles="0 1 faulty"; fi
vb_assert_eq "$roles" "$(vb_json r1 '[.components[].role] | join(" ")')" "roles after the replacement"
cmp -s -n $((45 << 20)) "$T/other.img" /dev/zero || vb_fail "the disk that matched no rule was written"
for d in r1 r10; do
  # (a replaced component keeps its old name, which a new loop device may reuse)
  vb_assert_not_contains "$(vb_json "$d" '[.components[] | select(.role != "faulty") | .source] | join(" ")')" "$other" \
    "the disk that matched no rule, in $d"
done
sum=$(sha256sum < "$bd")
vbmgr stop r1
cmp -i 1M:1M -n $((40 << 20)) "$T/a0.img" "$T/new.img" || vb_fail "legs differ after the replacement"
vbmgr start r1
vb_assert_eq "$sum" "$(sha256sum < "$(vb_blockdev_of r1)")" "r1 data after the replacement"

vb_log "a spare of the domain moves to the device that lost a component"
for f in c0 c1 e0 e1; do vb_mkimg "$T/$f.img" 41M; loop[$f]=$(attach "$T/$f.img"); done
vbmgr create d1 --driver raid1 --start "${loop[c0]}" "${loop[c1]}"
vbmgr create d2 --driver raid1 --start "${loop[e0]}" "${loop[e1]}"
vbmgr wait d1 > /dev/null && vbmgr wait d2 > /dev/null
gdbus monitor --system --dest org.vblk.VBlk1 > "$T/monitor.log" 2>&1 &
monitor=$!
vb_mkimg "$T/spare.img" 47M
spare=$(attach "$T/spare.img")
vb_wait_until 20 eval '[ "$(vb_json d1 "[.components[].state] | join(\" \")")" = "in-sync in-sync spare" ]' ||
  vb_fail "the 47M disk did not become d1's spare: $(vb_json d1 .components)"
vbmgr fail d2 "${loop[e1]}"
vb_wait_until 20 eval '[ "$(vb_json d2 ".components[1].source")" = "$spare" ]' ||
  vb_fail "the spare did not move to d2: d1 $(vb_json d1 .components) d2 $(vb_json d2 .components)"
vbmgr wait d2 > /dev/null || vb_fail "rebuild of d2 onto the moved spare"
vb_assert_eq "in-sync in-sync" "$(vb_json d1 '[.components[].state] | join(" ")')" "d1 without its spare"
vb_assert_eq active "$(state d2)" "d2 after the rebuild"
sleep 0.3
kill "$monitor"; wait "$monitor" 2> /dev/null || true
grep -q "'spare-moved'" "$T/monitor.log" || vb_fail "no spare-moved event"
grep -q "'policy-decision'" "$T/monitor.log" || vb_fail "no policy-decision event"

for d in d1 d2 r1 r10; do vbmgr stop "$d"; done
vb_stop_daemon
