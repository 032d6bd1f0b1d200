#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Handler md1: arrays made by mdadm itself (raid1 with 1.2 metadata,
# raid10 with 1.0 at the end, raid1 with 1.1 at the start) are read by
# `vbmgr examine` (no daemon) and listed by Scan; for every member vblk's
# view agrees with `mdadm --examine` (array UUID, name, level, events,
# role), also after a member was failed, removed and added back. A raid1
# and a raid10 are then adopted (`vbmgr scan --adopt --start`) and run by
# backend kernel with md's own superblocks: stopped and started, a member
# failed and re-added, a blank spare taking a failed slot, `mdadm
# --examine` and `mdadm --detail` agreeing with vblk after every step, and
# `mdadm --assemble` assembling them again afterwards. A raid0 is not
# adopted. Needs md: runs in the VM (tests/vm).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
for m in raid0 raid1 raid10; do modprobe "$m" 2> /dev/null || true; done
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
vb_on_cleanup md_cleanup

mkloop () { vb_mkimg "$T/$1.img" 64M; losetup --find --show "$T/$1.img"; }

# member_agrees MEMBER: vbmgr examine and mdadm --examine say the same
member_agrees () {
  local m=$1 ex vb uuid role
  ex=$(mdadm --examine "$m")
  vb=$(vbmgr examine --json "$m") || vb_fail "vbmgr examine $m: $vb"
  vb_assert_eq md1 "$(jq -r .format <<< "$vb")" "$m: format"
  uuid=$(awk -F' : ' '/Array UUID/ {print $2}' <<< "$ex" | tr -d ': ')
  vb_assert_eq "$uuid" "$(jq -r .device_uuid <<< "$vb" | tr -d '-')" "$m: array UUID"
  # mdadm's "HOST:NAME": vblk names the array NAME
  vb_assert_eq "$(awk -F' : ' '/^ *Name/ {print $2}' <<< "$ex" | awk '{print $1}' | sed 's/.*://')" \
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

# detail_agrees NAME: mdadm --detail of the node vblk runs agrees with vblk
detail_agrees () {
  local name=$1 bd det
  bd=$(vb_blockdev_of "$name")
  det=$(mdadm --detail "$bd") || vb_fail "mdadm --detail $bd"
  vb_assert_eq "$(vb_json "$name" .uuid | tr -d '-')" \
    "$(awk -F' : ' '/^ *UUID/ {print $2}' <<< "$det" | tr -d ': ')" "$name: mdadm --detail UUID"
  vb_assert_eq "$(vb_json "$name" '[.components[] | select(.state == "in-sync")] | length')" \
    "$(awk -F' : ' '/Active Devices/ {print $2}' <<< "$det" | tr -d ' ')" "$name: active devices"
  vb_assert_eq "$(vb_json "$name" .size)" "$(blockdev --getsize64 "$bd")" "$name: node size"
  vb_log "$name: mdadm --detail: $(awk -F' : ' '/^ *State/ {print $2}' <<< "$det" | xargs), events $(awk -F' : ' '/Events/ {print $2}' <<< "$det" | xargs)"
}

vb_log "Scan lists the arrays"
scan=$(vbmgr scan --json "$a" "$b" "$c" "$d" "$e" "$f" "$g" "$h")
for name in vb1 vb10 vb11; do
  jq -e --arg n "$name" '[.[] | select(.name == $n)] | length == 1' \
    <<< "$scan" > /dev/null || vb_fail "scan does not list $name: $scan"
done

vb_log "a raid0 is not adopted, naming why; nothing changes"
i=$(mkloop i); j=$(mkloop j); loops+=("$i" "$j")
mdadm --create /dev/md/vb0 --run --level=0 --raid-devices=2 --metadata=1.2 --name=vb0 \
  "$i" "$j" > /dev/null 2>&1 || vb_fail "mdadm --create raid0"
mdadm --stop /dev/md/vb0 > /dev/null 2>&1
vb_snapshot
vbmgr scan --adopt "$i" "$j" > "$T/adopt.out" 2>&1 || true
grep -q "vblk adopts mdadm's raid1 and raid10 arrays" "$T/adopt.out" || vb_fail "raid0 adoption: $(cat "$T/adopt.out")"
vb_assert_unchanged "adopting an mdadm raid0"

vb_log "adopted and started: raid1 (1.2) and raid10 (1.0), run by md with their own superblocks"
mdadm --stop /dev/md/vb1 /dev/md/vb10 > /dev/null 2>&1
vbmgr scan --adopt --start "$a" "$b" "$c" "$d" "$e" "$f" > "$T/adopt.out" 2>&1 ||
  vb_fail "adopt: $(cat "$T/adopt.out")"
vb_assert_eq "kernel md1 1.2" "$(vb_json vb1 '"\(.backend) \(.attributes.metadata) \(.attributes.md_version)"')" "vb1 adopted"
vb_assert_eq "kernel md1 1.0" "$(vb_json vb10 '"\(.backend) \(.attributes.metadata) \(.attributes.md_version)"')" "vb10 adopted"
bd1=$(vb_blockdev_of vb1)
vb_assert_eq "1.2" "$(cat "/sys/block/$(basename "$bd1")/md/metadata_version")" "md runs vb1 with its own metadata"
detail_agrees vb1
detail_agrees vb10
for m in "$a" "$b" "$c" "$d" "$e" "$f"; do member_agrees "$m"; done
head -c 4M /dev/urandom > "$T/pattern"
dd if="$T/pattern" of="$bd1" bs=1M oflag=direct status=none
"$VB_REFMODEL" --device "$(vb_blockdev_of vb10)" --ops 300 --chunk $((64 << 10)) --seed 7 > "$T/ref.out" ||
  vb_fail "vb10 reference model: $(cat "$T/ref.out")"

vb_log "stopped and started again"
vbmgr stop vb1
member_agrees "$a"
member_agrees "$b"
vbmgr start vb1
bd1=$(vb_blockdev_of vb1)
cmp -n $((4 << 20)) "$T/pattern" "$bd1" || vb_fail "vb1 data after the restart"
detail_agrees vb1

vb_log "a member failed: md records it in the survivors' superblocks, as under mdadm"
ev=$(vbmgr examine --json "$a" | jq .events)
vbmgr fail vb1 "$b"
vb_wait_state vb1 degraded 20
vb_wait_until 10 eval '[ "$(vbmgr examine --json "$a" | jq .events)" -gt "$ev" ]' || vb_fail "a's events did not grow"
member_agrees "$a"
vb_assert_contains "$(mdadm --examine "$a")" "Array State : A." "mdadm: slot 1 gone in a's superblock"
vb_assert_eq missing "$(vbmgr examine --json "$a" | jq -r '.roles[1].state')" "vblk: slot 1 in a's superblock"
detail_agrees vb1
vb_log "re-added: md recovers it and updates every superblock"
vbmgr add vb1 "$b"
vbmgr wait vb1 > /dev/null || vb_fail "recovery of b"
vb_assert_eq "in-sync in-sync" "$(vb_json vb1 '[.components[].state] | join(" ")')" "vb1 after the re-add"
member_agrees "$a"
member_agrees "$b"
vb_assert_contains "$(mdadm --examine "$b")" "Array State : AA" "mdadm: both active in b's superblock"
detail_agrees vb1
cmp -n $((4 << 20)) "$T/pattern" "$bd1" || vb_fail "vb1 data after the re-add"

vb_log "raid10: a failed member replaced by a blank spare (its first superblock written by vblk)"
k=$(mkloop k); loops+=("$k")
vbmgr add vb10 "$k" --spare
vbmgr fail vb10 "$d"
vb_wait_until 30 eval '[ "$(vb_json vb10 "[.components[].role] | join(\" \")")" = "0 1 2 3 faulty" ]' ||
  vb_fail "spare not in slot 1 of vb10: $(vb_json vb10 .components)"
vbmgr wait vb10 > /dev/null || vb_fail "recovery onto the spare"
vb_assert_contains "$(mdadm --examine "$k")" "Active device 1" "mdadm: the spare holds slot 1"
for m in "$c" "$k" "$e" "$f"; do member_agrees "$m"; done
detail_agrees vb10
vbmgr remove vb10 "$d"
"$VB_REFMODEL" --device "$(vb_blockdev_of vb10)" --ops 200 --chunk $((64 << 10)) --seed 8 > "$T/ref.out" ||
  vb_fail "vb10 reference model after the rebuild: $(cat "$T/ref.out")"

vbmgr stop vb10
for m in "$c" "$k" "$e" "$f"; do member_agrees "$m"; done
vbmgr start vb10
detail_agrees vb10

vb_log "stopped by vblk, assembled again by mdadm"
vbmgr stop vb1
vbmgr stop vb10
mdadm --assemble /dev/md/vb1 "$a" "$b" > /dev/null 2>&1 || vb_fail "mdadm --assemble vb1"
vb_assert_contains "$(mdadm --detail /dev/md/vb1)" "Active Devices : 2" "vb1 under mdadm"
cmp -n $((4 << 20)) "$T/pattern" /dev/md/vb1 || vb_fail "vb1 data under mdadm"
mdadm --assemble /dev/md/vb10 "$c" "$k" "$e" "$f" > /dev/null 2>&1 || vb_fail "mdadm --assemble vb10"
vb_assert_contains "$(mdadm --detail /dev/md/vb10)" "Active Devices : 4" "vb10 under mdadm"
mdadm --stop /dev/md/vb1 /dev/md/vb10 > /dev/null 2>&1
vbmgr delete vb1
vbmgr delete vb10
vb_stop_daemon
