#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Engine devices exported over NBD (vbmgr export --nbd), driven by clients
# nobody here wrote: the reference model through libnbd for every driver,
# nbdinfo, nbdcopy, qemu-img info/convert, qemu-io patterns, fio's nbd
# engine with verification, several clients at once; a TCP export is its
# own polkit action; --stop ends an export; Stop ends the device's exports;
# block status (nbdinfo --map, nbdcopy reading only the data).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

mk () { local f; for f in "$@"; do vb_mkimg "$T/$f.img" "${SIZE:-32M}"; done; }
sock () { echo "$T/nbd/$1.sock"; }
uri () { echo "nbd+unix:///$1?socket=$(sock "$1")"; }

mk l0 l1 a0 a1 m0 m1 t0 t1 t2
vbmgr create lin --driver linear --start "$T/l0.img" "$T/l1.img"
vbmgr create r0 --driver raid0 --attr chunk_size=64K --attr metadata=none --start "$T/a0.img" "$T/a1.img"
vbmgr create r1 --driver raid1 --start "$T/m0.img" "$T/m1.img"
# without on-component metadata: all of each component is data
vbmgr create r10 --driver raid10 --attr chunk_size=64K --attr metadata=none --attr bitmap=none \
  --start "$T/t0.img" "$T/t1.img" "$T/t2.img"
for d in lin r0 r1 r10; do
  vbmgr export "$d" --nbd --listen "unix:$(sock "$d")"
  vb_assert_eq "nbd unix:$(sock "$d")" "$(vb_json "$d" '.exports[0]')" "export of $d"
  out=$("$VB_REFMODEL" --nbd "$(uri "$d")" --ops 1500 --chunk 65536 --seed "$RANDOM") ||
    vb_fail "$d over NBD: $out"
  vb_log "$d over NBD: $out"
done

vb_log "nbdinfo"
nbdinfo --json "$(uri r0)" > "$T/info.json" || vb_fail "nbdinfo failed"
vb_assert_eq $((64 << 20)) "$(jq '.exports[0]."export-size"' "$T/info.json")" "export size"
for cap in can_flush can_fua can_trim can_zero can_multi_conn; do
  vb_assert_eq true "$(jq ".exports[0].\"$cap\"" "$T/info.json")" "$cap"
done
vb_assert_eq 512 "$(jq '.exports[0]."block_size_minimum"' "$T/info.json")" "minimum block size"
nbdinfo --list "nbd+unix://?socket=$(sock r0)" | grep -q "export=\"r0\":" || vb_fail "nbdinfo --list"

vb_log "nbdcopy in and out"
head -c 31M /dev/urandom > "$T/random"  # r1: 32M legs less 1M of metadata
nbdcopy "$T/random" "$(uri r1)"
nbdcopy "$(uri r1)" "$T/back"
cmp "$T/random" "$T/back" || vb_fail "nbdcopy round trip"
vbmgr stop r1
# the data area starts after the superblock and bitmap, at 1 MiB
cmp -n 31M -i 1M:0 "$T/m0.img" "$T/random" || vb_fail "raid1 leg 0 after nbdcopy"
cmp -n 31M -i 1M:0 "$T/m1.img" "$T/random" || vb_fail "raid1 leg 1 after nbdcopy"
[ ! -e "$(sock r1)" ] || vb_fail "socket of r1 left after stop"
vbmgr start r1
vb_assert_eq "nbd unix:$(sock r1)" "$(vb_json r1 '.exports[0]')" "export of r1 after restart"

vb_log "qemu-img and qemu-io"
qemu-img info "$(uri r10)" | grep -q "virtual size: 48 MiB" || vb_fail "qemu-img info: $(qemu-img info "$(uri r10)")"
qemu-io -f raw -c "write -P 0xa5 0 1M" -c "write -P 0x5a 1M 200k" -c "write -P 0x3c 47M 1M" \
  "$(uri r10)" > /dev/null || vb_fail "qemu-io writes"
qemu-io -f raw -c "read -P 0xa5 0 1M" -c "read -P 0x5a 1M 200k" -c "read -P 0x3c 47M 1M" \
  "$(uri r10)" > "$T/qio.log" 2>&1 || vb_fail "qemu-io reads: $(cat "$T/qio.log")"
! grep -q "Pattern verification failed" "$T/qio.log" || vb_fail "qemu-io patterns: $(cat "$T/qio.log")"
qemu-img convert -f raw -O raw "$(uri r10)" "$T/r10.raw"
cmp <(head -c 1M "$T/r10.raw") <(head -c 1M /dev/zero | tr '\0' '\245') || vb_fail "qemu-img convert content"

vb_log "fio nbd engine, four connections at once, with verification"
fio --name=nbd --ioengine=nbd --uri="$(uri lin)" --rw=randwrite --bs=4k --bsrange=4k-128k \
    --iodepth=8 --numjobs=4 --size=16M --offset_increment=16M --verify=crc32c --verify_fatal=1 \
    --do_verify=1 --group_reporting --output="$T/fio.log" || vb_fail "fio nbd: $(tail -20 "$T/fio.log")"
grep -q "err= 0" "$T/fio.log" || vb_fail "fio nbd errors: $(cat "$T/fio.log")"

vb_log "TCP exports need org.vblk.export; an unprivileged caller is refused"
vb_expect_fail NotAuthorized vb_as_nobody "$VBMGR" export r0 --nbd --listen tcp:127.0.0.1:10899
# (TLS on TCP: test-nbd-tls.sh; here plaintext, as asked for)
vbmgr export r0 --nbd --listen tcp:127.0.0.1:10899 --tls off
vb_assert_eq "nbd tcp:127.0.0.1:10899 tls=off" "$(vb_json r0 '.exports[1]')" "a plaintext TCP export as saved"
nbdinfo nbd://127.0.0.1:10899/r0 > /dev/null || vb_fail "nbdinfo over TCP"
vb_expect_fail AlreadyExists vbmgr export r1 --nbd --listen tcp:127.0.0.1:10899 --tls off
vb_expect_fail InvalidArgument vbmgr export r1 --nbd --listen tcp:127.0.0.1:99999 --tls off
vb_expect_fail InvalidArgument vbmgr export r1 --nbd --listen udp:x
vbmgr export r0 --nbd --listen tcp:127.0.0.1:10899 --stop
! nbdinfo nbd://127.0.0.1:10899/r0 > /dev/null 2>&1 || vb_fail "TCP export still answers after --stop"
vb_assert_eq 1 "$(vb_json r0 '.exports | length')" "exports of r0 after --stop"

vb_log "a hostile client against vblkd's own export (linear over one image, so the image is the export)"
vb_mkimg "$T/h.img" 64M
vbmgr create hostile --driver linear --attr metadata=none --start "$T/h.img"
vbmgr export hostile --nbd --listen "unix:$(sock hostile)"
python3 "$VB_SRCDIR/tests/nbd/nbd-hostile.py" --socket "$(sock hostile)" --file "$T/h.img" \
  --block-size 512 --export-name hostile > "$T/hostile.log" 2>&1 || vb_fail "hostile client: $(tail -30 "$T/hostile.log")"
vb_pid_alive "$VBLKD_PID" || vb_fail "vblkd died under the hostile client"
vb_assert_eq $((64 << 20)) "$(nbdinfo --size "$(uri hostile)")" "nbdinfo after the hostile client"
vb_assert_eq active "$(vb_state_of hostile)" "device after the hostile client"

vb_log "block status of a raid1 on sparse legs: holes where both legs have them"
mk s0 s1
vbmgr create sp --driver raid1 --attr bitmap_chunk=1M --start "$T/s0.img" "$T/s1.img"
vbmgr export sp --nbd --listen "unix:$(sock sp)"
vb_wait_until 30 sh -c "! $VBMGR jobs --json | jq -e '.[] | select(.device == \"sp\" and .state == \"running\")' > /dev/null" ||
  vb_fail "the first resync of sp did not end"
# the resync left the pieces that are holes on both legs alone
for leg in s0 s1; do
  kib=$(du -k "$T/$leg.img" | cut -f1)
  [ "$kib" -le 1024 ] || vb_fail "$leg.img has $kib KiB allocated after the first resync"
done
map () { nbdinfo --map --json "$(uri sp)" | jq -r 'map("\(.offset)+\(.length):\(.type)") | join(" ")'; }
vb_assert_eq "0+32505856:3" "$(map)" "map of the new raid1"
qemu-io -f raw -c "write -P 0x6b 4M 1M" "$(uri sp)" > /dev/null || vb_fail "qemu-io write to sp"
vb_assert_eq "0+4194304:3 4194304+1048576:0 5242880+27262976:3" "$(map)" "map after a write of 1 MiB at 4 MiB"
nbdcopy -v "$(uri sp)" "$T/sp.copy" 2> "$T/nbdcopy.log"
read_bytes=$(awk -F'count=' '/aio_pread: enter:/ { s += $2 } END { print s + 0 }' "$T/nbdcopy.log")
vb_log "nbdcopy read $read_bytes of 32505856 bytes"
[ "$read_bytes" -gt 0 ] && [ "$read_bytes" -le $((2 << 20)) ] ||
  vb_fail "nbdcopy read $read_bytes bytes of sp, not just the 1 MiB of data"
cmp "$T/sp.copy" <(head -c 4M /dev/zero; head -c 1M /dev/zero | tr '\0' '\153'; head -c 26M /dev/zero) ||
  vb_fail "nbdcopy of sp: content"
vb_log "data on one leg only is data (a read could take that leg)"
dd if=/dev/urandom of="$T/s1.img" bs=64k count=1 seek=$(((1 << 20) / 65536 + 160)) conv=notrunc status=none
vb_assert_eq "0+4194304:3 4194304+1048576:0 5242880+5242880:3 10485760+65536:0 10551296+21954560:3" \
  "$(map)" "map with data on leg 1 at 10 MiB"

for d in lin r0 r1 r10 hostile sp; do vbmgr stop "$d"; done
vb_stop_daemon
