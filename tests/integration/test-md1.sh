#!/bin/bash
# Handler md1: arrays made by mdadm itself (raid1 with 1.2 metadata,
# raid10 with 1.0 at the end, raid1 with 1.1 at the start) are read by
# `vbmgr examine` (no daemon) and listed by Scan; for every member vblk's
# view agrees with `mdadm --examine` (array UUID, name, level, events,
# role), also after a member was failed, removed and added back. Adopting
# them is refused, naming why. Needs md: runs in the VM (tests/vm).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
modprobe raid1 2> /dev/null && modprobe raid10 2> /dev/null || true
if ! grep -q '\[raid1\]' /proc/mdstat 2> /dev/null || ! command -v mdadm > /dev/null; then
  echo "SKIP: no md (raid1) or mdadm here (run it in the VM: tests/vm)" >&2
  exit 77
fi
vb_setup
vb_start_daemon

arrays=()
loops=()
md_cleanup () {
  local a l
  for a in "${arrays[@]}"; do mdadm --stop "$a" > /dev/null 2>&1 || true; done
  for l in "${loops[@]}"; do losetup -d "$l" 2> /dev/null || true; done
}
trap 'md_cleanup; vb_cleanup' EXIT

mkloop () { vb_mkimg "$T/$1.img" 64M; losetup --find --show "$T/$1.img"; }

# member_agrees MEMBER: vbmgr examine and mdadm --examine say the same
member_agrees () {
  local m=$1 ex vb uuid role
  ex=$(mdadm --examine "$m")
  vb=$(vbmgr examine --json "$m") || vb_fail "vbmgr examine $m: $vb"
  vb_assert_eq md1 "$(jq -r .format <<< "$vb")" "$m: format"
  uuid=$(awk -F' : ' '/Array UUID/ {print $2}' <<< "$ex" | tr -d ': ')
  vb_assert_eq "$uuid" "$(jq -r .device_uuid <<< "$vb" | tr -d '-')" "$m: array UUID"
  vb_assert_eq "$(awk -F' : ' '/^ *Name/ {print $2}' <<< "$ex" | awk '{print $1}')" \
    "$(jq -r .device_name <<< "$vb")" "$m: name"
  vb_assert_eq "$(awk -F' : ' '/^ *Events/ {print $2}' <<< "$ex" | tr -d ' ')" \
    "$(jq -r .events <<< "$vb")" "$m: events"
  vb_assert_eq "$(awk -F' : ' '/Raid Level/ {print $2}' <<< "$ex")" "$(jq -r .driver <<< "$vb")" \
    "$m: level"
  role=$(awk -F' : ' '/Device Role/ {print $2}' <<< "$ex")
  case $role in
    "Active device "*) vb_assert_eq "${role#Active device }" "$(jq -r .role <<< "$vb")" "$m: role" ;;
    spare) vb_assert_eq true "$(jq -r .spare <<< "$vb")" "$m: spare" ;;
    *) vb_fail "$m: mdadm says role '$role'" ;;
  esac
}

vb_log "raid1, metadata 1.2 (4 KiB from the start)"
a=$(mkloop a); b=$(mkloop b); loops+=("$a" "$b")
mdadm --create /dev/md/vb1 --run --level=1 --raid-devices=2 --metadata=1.2 --name=vb1 \
  --assume-clean "$a" "$b" > /dev/null 2>&1 || vb_fail "mdadm --create raid1"
arrays+=(/dev/md/vb1)
member_agrees "$a"
member_agrees "$b"

vb_log "raid10 of four, metadata 1.0 (at the end)"
c=$(mkloop c); d=$(mkloop d); e=$(mkloop e); f=$(mkloop f); loops+=("$c" "$d" "$e" "$f")
mdadm --create /dev/md/vb10 --run --level=10 --raid-devices=4 --metadata=1.0 --name=vb10 \
  --chunk=64 --assume-clean "$c" "$d" "$e" "$f" > /dev/null 2>&1 || vb_fail "mdadm --create raid10"
arrays+=(/dev/md/vb10)
for m in "$c" "$d" "$e" "$f"; do member_agrees "$m"; done
vb_assert_eq "65536 2" "$(vbmgr examine --json "$c" | jq -r '"\(.attributes.chunk_size) \(.attributes.copies)"')" \
  "raid10 chunk and copies"

vb_log "raid1, metadata 1.1 (at the start)"
g=$(mkloop g); h=$(mkloop h); loops+=("$g" "$h")
mdadm --create /dev/md/vb11 --run --level=1 --raid-devices=2 --metadata=1.1 --name=vb11 \
  --assume-clean "$g" "$h" > /dev/null 2>&1 || vb_fail "mdadm --create 1.1"
arrays+=(/dev/md/vb11)
member_agrees "$g"

vb_log "a member failed, removed and added back: vblk follows mdadm's events and roles"
mdadm /dev/md/vb1 --fail "$b" > /dev/null 2>&1
mdadm /dev/md/vb1 --remove "$b" > /dev/null 2>&1
member_agrees "$a"
vb_assert_eq missing "$(vbmgr examine --json "$a" | jq -r '.roles[1].state')" "b's slot after the removal"
mdadm --zero-superblock "$b" 2> /dev/null || true
mdadm /dev/md/vb1 --add "$b" > /dev/null 2>&1 || vb_fail "mdadm --add"
mdadm --wait /dev/md/vb1 > /dev/null 2>&1 || true
member_agrees "$a"
member_agrees "$b"

vb_log "Scan lists the arrays; adopting them is refused, naming why"
scan=$(vbmgr scan --json "$a" "$b" "$c" "$d" "$e" "$f" "$g" "$h")
for name in vb1 vb10 vb11; do
  jq -e --arg n "$name" '[.[] | select(.name == $n or (.name | endswith(":" + $n)))] | length == 1' \
    <<< "$scan" > /dev/null || vb_fail "scan does not list $name: $scan"
done
vb_snapshot
vbmgr scan --adopt "$a" "$b" > "$T/adopt.out" 2>&1 || true
grep -q "mdadm array" "$T/adopt.out" || vb_fail "adopting an mdadm array: $(cat "$T/adopt.out")"
vb_assert_unchanged "adopt of an mdadm array"
vb_stop_daemon
