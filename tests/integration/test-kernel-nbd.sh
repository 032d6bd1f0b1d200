#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The kernel nbd client driven over generic netlink (src/backends/
# nbd-netlink.c, the kernel half of the nbd backend to come): vblk's NBD
# server serves an image on two socketpairs in the transmission phase,
# NBD_CMD_CONNECT hands the other ends to the kernel, and /dev/nbdX works:
# its size and backend identifier in sysfs, the reference-model I/O test,
# mkfs.ext4 and fsck; NBD_CMD_DISCONNECT lets it go. Needs the nbd module:
# runs in the VM (tests/vm), skips elsewhere.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
modprobe nbd 2> /dev/null || true
if [ ! -e /sys/block/nbd0 ] || [ ! -d /sys/module/nbd ]; then
  echo "SKIP: no nbd in this kernel (run it in the VM: tests/vm)" >&2
  exit 77
fi
: "${VB_NBD_FILE_SERVER:?}"
mkdir -p "$T"

vb_mkimg "$T/disk.img" 64M
coproc server { exec "$VB_NBD_FILE_SERVER" --kernel 2 --block-size 512 "$T/disk.img" 2> "$T/server.err"; }
VB_BG_PIDS+=("$server_PID")
read -r -t 20 node <&"${server[0]}" || vb_fail "no device from the server: $(cat "$T/server.err")"
[[ "$node" == /dev/nbd* ]] || vb_fail "server said '$node': $(cat "$T/server.err")"
vb_log "kernel nbd client: $node"
sys=/sys/block/$(basename "$node")
vb_assert_eq $((64 << 20)) "$(blockdev --getsize64 "$node")" "size of $node"
vb_assert_eq vb-nbd-file-server "$(cat "$sys/backend")" "backend identifier in sysfs"
vb_assert_eq 512 "$(cat "$sys/queue/logical_block_size")" "block size"
out=$("$VB_REFMODEL" --device "$node" --ops 600 --chunk $((8 << 20)) --seed "$RANDOM") ||
  vb_fail "reference model on $node: $out"
vb_log "$out"
mkfs.ext4 -q -F "$node" || vb_fail "mkfs.ext4 on $node"
fsck.ext4 -n -f "$node" > "$T/fsck.log" 2>&1 || vb_fail "fsck on $node: $(cat "$T/fsck.log")"
sync
cmp "$node" "$T/disk.img" || vb_fail "$node and the image differ"
kill -TERM "$server_PID"
wait "$server_PID" || vb_fail "server exit: $(cat "$T/server.err")"
vb_wait_until 10 eval '[ ! -e "$sys/pid" ]' || vb_fail "$node still connected after the disconnect"
vb_log "disconnected"
