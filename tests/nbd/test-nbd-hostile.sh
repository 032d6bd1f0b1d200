#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A hostile client (nbd-hostile.py) against vb-nbd-file-server: every bad
# handshake or request gets an error reply or a closed connection, and the
# server survives it — alive, not spinning, no thread left behind, still
# serving nbdinfo, and no byte changed that no valid write touched.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

for tool in nbdinfo python3; do
  command -v "$tool" > /dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done

img=$T/disk.img
size=$((64 << 20))
dd if=/dev/urandom of="$img" bs=1M count=64 status=none
# The hostile client writes validly only to the last MiB.
prefix_sum() { head -c $((size - (1 << 20))) "$img" | sha256sum; }
before=$(prefix_sum)

nbd_start_server "$img"
threads_idle=$(nbd_server_threads)

nbd_log "hostile client"
python3 "$VB_NBD_TESTDIR/nbd-hostile.py" --socket "$SOCK" --file "$img" --block-size 512 ||
  nbd_fail "hostile client checks failed"

nbd_log "the server is alive and serves a normal client"
kill -0 "$SERVER_PID" 2> /dev/null || nbd_fail "vb-nbd-file-server died"
nbd_assert_eq "$size" "$(nbdinfo --size "nbd+unix:///?socket=$SOCK")" "nbdinfo --size afterwards"

nbd_log "no connection thread left, none spinning"
for _ in $(seq 50); do
  [ "$(nbd_server_threads)" = "$threads_idle" ] && break
  sleep 0.1
done
nbd_assert_eq "$threads_idle" "$(nbd_server_threads)" "server threads once every client is gone"
t0=$(nbd_server_ticks)
sleep 1
t1=$(nbd_server_ticks)
[ $((t1 - t0)) -le 5 ] || nbd_fail "idle server used $((t1 - t0)) CPU ticks in 1 s"

nbd_log "data no valid write touched is intact"
nbd_assert_eq "$before" "$(prefix_sum)" "checksum of all but the last MiB"

nbd_log "a read-only export refuses writes with EPERM"
nbd_stop_server
nbd_start_server "$img" --read-only
python3 - "$SOCK" << 'PY' || nbd_fail "read-only checks failed"
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location("h", os.path.join(os.environ["VB_NBD_TESTDIR"], "nbd-hostile.py"))
h = importlib.util.module_from_spec(spec)
spec.loader.exec_module(h)
c = h.Client(sys.argv[1])
c.greeting()
c.go()
assert c.tflags & 2, "NBD_FLAG_READ_ONLY set"
for cmd, payload in ((h.CMD_WRITE, b"\xee" * 4096), (h.CMD_WRITE_ZEROES, b""), (h.CMD_TRIM, b"")):
    err, _ = c.cmd(cmd, 0, 4096, payload=payload)
    assert err == h.EPERM, "command %d on a read-only export: error %d, not EPERM" % (cmd, err)
err, _ = c.cmd(h.CMD_READ, 0, 4096)
assert err == 0, "read still works"
print("ok - writes, zeroes and trims on a read-only export get EPERM")
PY
nbd_assert_eq "$before" "$(prefix_sum)" "checksum after writes to the read-only export"

nbd_log "SIGTERM with clients connected: connections shut down, server exits at once"
python3 - "$SOCK" > "$T/held.out" << 'PY' &
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location("h", os.path.join(os.environ["VB_NBD_TESTDIR"], "nbd-hostile.py"))
h = importlib.util.module_from_spec(spec)
spec.loader.exec_module(h)
idle = h.Client(sys.argv[1], timeout=60)  # in transmission, idle
idle.greeting()
idle.go()
stuck = h.Client(sys.argv[1], timeout=60)  # mid-handshake
stuck.greeting()
print("connected", flush=True)
for c in (idle, stuck):
    try:
        while c.s.recv(4096):
            pass
    except OSError:
        pass
print("closed by the server", flush=True)
PY
held_pid=$!
for _ in $(seq 50); do grep -q connected "$T/held.out" && break; sleep 0.1; done
grep -q connected "$T/held.out" || nbd_fail "held clients did not connect"
start=$(date +%s)
nbd_stop_server
[ $(($(date +%s) - start)) -le 5 ] || nbd_fail "server took over 5 s to stop with clients connected"
wait "$held_pid" || true
grep -q "closed by the server" "$T/held.out" || nbd_fail "held clients were not disconnected"

nbd_log "a live socket is never taken over; a stale one (server killed) is replaced"
nbd_start_server "$img"
first_pid=$SERVER_PID
if "${NBD_SERVER[@]}" --socket "$SOCK" "$img" > "$T/second.out" 2> "$T/second.err"; then
  nbd_fail "a second server took over a live socket"
fi
grep -qi "in use" "$T/second.err" || nbd_fail "second server: unexpected error: $(cat "$T/second.err")"
nbd_assert_eq "$size" "$(nbdinfo --size "nbd+unix:///?socket=$SOCK")" "first server still serves"
kill -KILL "$first_pid"
wait "$first_pid" 2> /dev/null || true
SERVER_PID=
[ -S "$SOCK" ] || nbd_fail "expected a stale socket after SIGKILL"
nbd_start_server "$img"
nbd_assert_eq "$size" "$(nbdinfo --size "nbd+unix:///?socket=$SOCK")" "server on the replaced socket"
nbd_stop_server
echo "PASS"
