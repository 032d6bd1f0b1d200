#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Real clients on engine block nodes: mkfs.ext4, mount, files with
# checksums, fsck -n clean; fio with crc32c verification (io_uring, direct).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon

for f in t0 t1 t2 m0 m1; do vb_mkimg "$T/$f.img" 96M; done
vbmgr create r10 --driver raid10 --attr chunk_size=128K --start "$T/t0.img" "$T/t1.img" "$T/t2.img"
bd=$(vb_blockdev_of r10)

vb_log "ext4 on raid10"
mkfs.ext4 -q -F "$bd"
mkdir "$T/mnt"
mount "$bd" "$T/mnt"
for i in 1 2 3 4 5; do
  head -c $((i * 3 << 20)) /dev/urandom > "$T/mnt/file$i"
done
(cd "$T/mnt" && sha256sum file* > "$T/sums")
umount "$T/mnt"
fsck.ext4 -n -f "$bd" > "$T/fsck.log" 2>&1 || vb_fail "fsck -n: $(cat "$T/fsck.log")"
mount -o ro "$bd" "$T/mnt"
(cd "$T/mnt" && sha256sum -c --quiet "$T/sums") || vb_fail "checksums after remount"
umount "$T/mnt"

vb_log "fio verify on raid1"
vbmgr create r1 --driver raid1 --start "$T/m0.img" "$T/m1.img"
fio --name=verify --filename="$(vb_blockdev_of r1)" --ioengine=io_uring --direct=1 \
    --rw=randwrite --bs=4k --bsrange=4k-256k --iodepth=16 --size=64M --verify=crc32c \
    --verify_fatal=1 --do_verify=1 --output="$T/fio.log" ||
  vb_fail "fio verify: $(tail -20 "$T/fio.log")"
grep -q "err= 0" "$T/fio.log" || vb_fail "fio reported errors: $(cat "$T/fio.log")"

vbmgr wait r1 > /dev/null || vb_fail "initial resync of r1"
vbmgr stop r1
# superblocks differ (each names its component); the data areas may not
cmp -i 1M:1M "$T/m0.img" "$T/m1.img" || vb_fail "raid1 legs differ after fio"
vbmgr stop r10
vb_stop_daemon
