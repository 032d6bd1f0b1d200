#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Real NBD clients nobody here wrote — nbdinfo, nbdcopy, qemu-img, qemu-io,
# fio's nbd engine — against vb-nbd-file-server: what they are told about the
# export is right, and every byte they write or read is the file's.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

for tool in nbdinfo nbdcopy qemu-img qemu-io fio python3; do
  command -v "$tool" > /dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done

img=$T/disk.img
size=$((64 << 20))
dd if=/dev/urandom of="$img" bs=1M count=64 status=none
nbd_start_server "$img" --export disk0 --description "vblk test disk"
uri="nbd+unix:///disk0?socket=$SOCK"

nbd_log "nbdinfo reports size, block sizes and capabilities"
nbdinfo --json "$uri" > "$T/info.json"
json() { python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["exports"][0]; print(json.dumps(e[sys.argv[2]]))' "$T/info.json" "$1"; }
nbd_assert_eq "$size" "$(json export-size)" "export-size"
nbd_assert_eq 512 "$(json block_size_minimum)" "block_size_minimum"
nbd_assert_eq 4096 "$(json block_size_preferred)" "block_size_preferred"
nbd_assert_eq 33554432 "$(json block_size_maximum)" "block_size_maximum"
for cap in can_multi_conn can_trim can_zero can_flush can_fua; do
  nbd_assert_eq true "$(json $cap)" "$cap"
done
nbd_assert_eq false "$(json is_read_only)" "is_read_only"
nbd_assert_eq '"vblk test disk"' "$(json description)" "description"
nbd_assert_eq true "$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["structured"]))' "$T/info.json")" \
  "structured replies negotiated"

nbd_log "the default export '' is the same export"
nbd_assert_eq "$size" "$(nbdinfo --size "nbd+unix:///?socket=$SOCK")" "size of the default export"

nbd_log "nbdinfo --list names the export"
nbdinfo --list "nbd+unix:///?socket=$SOCK" > "$T/list"
grep -q '^export="disk0":' "$T/list" || nbd_fail "nbdinfo --list: no export disk0: $(cat "$T/list")"
grep -q 'description: vblk test disk' "$T/list" || nbd_fail "nbdinfo --list: no description"

nbd_log "nbdcopy in and out"
dd if=/dev/urandom of="$T/src.img" bs=1M count=64 status=none
nbdcopy "$T/src.img" "$uri"
cmp "$T/src.img" "$img" || nbd_fail "nbdcopy in: the served file differs from the source"
nbdcopy "$uri" "$T/out.img"
cmp "$T/src.img" "$T/out.img" || nbd_fail "nbdcopy out differs from the source"
nbdcopy --connections=4 --requests=16 "$uri" "$T/out4.img"
cmp "$T/src.img" "$T/out4.img" || nbd_fail "nbdcopy over 4 connections differs"

nbd_log "qemu-img info and convert"
qemu-img info --output=json -f raw "$uri" > "$T/qinfo.json"
nbd_assert_eq "$size" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["virtual-size"])' "$T/qinfo.json")" \
  "qemu-img virtual-size"
qemu-img convert -f raw -O raw "$uri" "$T/conv.img"
cmp "$img" "$T/conv.img" || nbd_fail "qemu-img convert output differs from the file"

nbd_log "qemu-io writes patterns, reads them back through a new connection and in the file"
qemu-io -f raw "$uri" \
  -c "write -P 0xa1 0 64k" \
  -c "write -P 0xb2 1M 4k" \
  -c "write -P 0xc3 $((size - (1 << 20))) 1M" \
  -c "write -f -P 0xd4 8M 32M" \
  -c "write -z -u 3M 1M" \
  -c "flush" > "$T/qio-write.log" || nbd_fail "qemu-io writes failed: $(cat "$T/qio-write.log")"
qemu-io -f raw "$uri" \
  -c "read -P 0xa1 0 64k" \
  -c "read -P 0xb2 1M 4k" \
  -c "read -P 0xc3 $((size - (1 << 20))) 1M" \
  -c "read -P 0xd4 8M 32M" \
  -c "read -P 0 3M 1M" > "$T/qio-read.log" || nbd_fail "qemu-io pattern check failed: $(cat "$T/qio-read.log")"
! grep -q "verification failed" "$T/qio-read.log" || nbd_fail "qemu-io: $(cat "$T/qio-read.log")"
python3 - "$img" "$size" << 'PY' || nbd_fail "patterns are not in the served file"
import sys
f = open(sys.argv[1], "rb").read()
size = int(sys.argv[2])
M = 1 << 20
assert f[0:64 << 10] == b"\xa1" * (64 << 10)
assert f[M:M + 4096] == b"\xb2" * 4096
assert f[size - M:] == b"\xc3" * M
assert f[8 * M:40 * M] == b"\xd4" * (32 * M)
assert f[3 * M:4 * M] == b"\0" * M
PY

nbd_log "qemu-io: a read past the end fails"
! qemu-io -f raw "$uri" -c "read $size 4k" > "$T/qio-end.log" 2>&1 ||
  nbd_fail "qemu-io read past the end succeeded: $(cat "$T/qio-end.log")"

nbd_log "fio --ioengine=nbd, randrw with crc32c verify"
fio --name=nbd-verify --ioengine=nbd --uri="$uri" --rw=randrw --bs=4k --size=16m \
  --iodepth=16 --verify=crc32c --verify_fatal=1 --verify_state_save=0 --output="$T/fio.log" ||
  nbd_fail "fio failed: $(cat "$T/fio.log")"
fio --name=nbd-mixed --ioengine=nbd --uri="$uri" --rw=randwrite --bsrange=512-64k --size=16m \
  --offset=16m --iodepth=8 --verify=crc32c --verify_fatal=1 --verify_state_save=0 --output="$T/fio2.log" ||
  nbd_fail "fio (mixed sizes) failed: $(cat "$T/fio2.log")"
! grep -qi "verify.*fail\|bad magic\|crc32c: verify" "$T/fio.log" "$T/fio2.log" ||
  nbd_fail "fio reported a verify failure"

if command -v nbdsh > /dev/null && python3 -c 'import nbd' 2> /dev/null; then
  nbd_log "nbdsh: a FUA write and a zero, read back"
  nbdsh -u "$uri" -c '
h.pwrite(b"\x5a" * 4096, 4096, nbd.CMD_FLAG_FUA)
assert h.pread(4096, 4096) == b"\x5a" * 4096
h.zero(4096, 4096)
assert h.pread(4096, 4096) == bytes(4096)
' || nbd_fail "nbdsh checks failed"
fi

nbd_log "SIGTERM stops the server cleanly"
nbd_stop_server

nbd_log "block status: nbdinfo --map and qemu-img map see the file's holes, nbdcopy reads only its data"
sparse=$T/sparse.img
truncate -s 64M "$sparse"
dd if=/dev/urandom of="$sparse" bs=1M count=2 seek=10 conv=notrunc status=none
dd if=/dev/urandom of="$sparse" bs=4k count=1 seek=5120 conv=notrunc status=none
nbd_start_server "$sparse"
uri="nbd+unix:///?socket=$SOCK"
nbdinfo --map --json "$uri" > "$T/map.json" || nbd_fail "nbdinfo --map"
nbd_assert_eq "0+10485760:3 10485760+2097152:0 12582912+8388608:3 20971520+4096:0 20975616+46133248:3" \
  "$(python3 -c 'import json,sys; print(" ".join("%d+%d:%d" % (e["offset"], e["length"], e["type"]) for e in json.load(open(sys.argv[1]))))' "$T/map.json")" \
  "nbdinfo --map"
qemu-img map --output=json -f raw "$uri" > "$T/qmap.json"
nbd_assert_eq "10485760+2097152 20971520+4096" \
  "$(python3 -c 'import json,sys; print(" ".join("%d+%d" % (e["start"], e["length"]) for e in json.load(open(sys.argv[1])) if e["data"]))' "$T/qmap.json")" \
  "qemu-img map: the data"
nbdcopy -v "$uri" "$T/sparse.copy" 2> "$T/nbdcopy.log"  # -v logs every libnbd call
cmp "$sparse" "$T/sparse.copy" || nbd_fail "nbdcopy of the sparse export differs"
read_bytes=$(awk -F'count=' '/aio_pread: enter:/ { s += $2 } END { print s + 0 }' "$T/nbdcopy.log")
nbd_log "nbdcopy read $read_bytes of $((64 << 20)) bytes"
[ "$read_bytes" -gt 0 ] && [ "$read_bytes" -le $((4 << 20)) ] ||
  nbd_fail "nbdcopy read $read_bytes bytes, not just the 2 MiB of data"
nbd_stop_server

nbd_log "a read-only export: flagged, and writes are refused"
sum=$(sha256sum < "$img")
nbd_start_server "$img" --read-only --block-size 4096
uri="nbd+unix:///?socket=$SOCK"
nbdinfo --json "$uri" > "$T/info.json"
nbd_assert_eq true "$(json is_read_only)" "is_read_only of a --read-only export"
nbd_assert_eq 4096 "$(json block_size_minimum)" "block_size_minimum with --block-size 4096"
! qemu-io -f raw "$uri" -c "write -P 0x77 0 4k" > "$T/ro.log" 2>&1 ||
  nbd_fail "qemu-io write to a read-only export succeeded: $(cat "$T/ro.log")"
qemu-io -f raw -r "$uri" -c "read 0 64k" > /dev/null || nbd_fail "read from the read-only export"
nbd_assert_eq "$sum" "$(sha256sum < "$img")" "image after writes to the read-only export"
nbd_stop_server
echo "PASS"
