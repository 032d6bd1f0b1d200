# SPDX-License-Identifier: LGPL-2.1-or-later
# Shared by the NBD tests: a temp dir, vb-nbd-file-server started on a unix
# socket in it, and cleanup by PID on any exit.
set -euo pipefail

: "${VB_NBD_FILE_SERVER:?run through meson test}"
: "${VB_NBD_TESTDIR:=$(dirname "${BASH_SOURCE[0]}")}"

# Under the 'valgrind' test setup (tests/valgrind.sh) the server runs under
# valgrind: NBD_SERVER is the command that starts it.
read -ra NBD_SERVER <<< "${VB_VALGRIND:-}"
NBD_SERVER+=("$VB_NBD_FILE_SERVER")

T=$(mktemp -d "${TMPDIR:-/tmp}/vb-nbd.XXXXXX")
SERVER_PID=
SOCK=

nbd_log() { echo "# $*"; }
nbd_fail() {
  echo "FAIL: $*" >&2
  if [ -s "$T/server.err" ]; then
    echo "--- server stderr:" >&2
    cat "$T/server.err" >&2
  fi
  exit 1
}
nbd_assert_eq() { # EXPECTED ACTUAL WHAT
  [ "$1" = "$2" ] || nbd_fail "$3: expected '$1', got '$2'"
}

nbd_cleanup() {
  local rc=$?
  if [ -n "$SERVER_PID" ]; then
    kill -KILL "$SERVER_PID" 2> /dev/null || true
    wait "$SERVER_PID" 2> /dev/null || true
  fi
  rm -rf "$T"
  exit $rc
}
trap nbd_cleanup EXIT

# nbd_start_server FILE [SERVER OPTIONS...]: serve FILE on $T/nbd.sock and
# wait for "ready".
nbd_start_server() {
  local file=$1
  shift
  SOCK=$T/nbd.sock
  "${NBD_SERVER[@]}" --socket "$SOCK" "$@" "$file" > "$T/server.out" 2> "$T/server.err" &
  SERVER_PID=$!
  for _ in $(seq 100); do
    grep -qx ready "$T/server.out" 2> /dev/null && return 0
    kill -0 "$SERVER_PID" 2> /dev/null || nbd_fail "vb-nbd-file-server exited before ready"
    sleep 0.1
  done
  nbd_fail "vb-nbd-file-server not ready after 10 s"
}

# SIGTERM must free the server: exit status 0 and the socket file gone.
nbd_stop_server() {
  local rc=0
  kill -TERM "$SERVER_PID"
  wait "$SERVER_PID" || rc=$?
  SERVER_PID=
  nbd_assert_eq 0 "$rc" "exit status of vb-nbd-file-server on SIGTERM"
  [ ! -e "$SOCK" ] || nbd_fail "socket $SOCK left behind after SIGTERM"
}

nbd_server_threads() {
  awk '/^Threads:/ { print $2 }' "/proc/$SERVER_PID/status"
}

# CPU ticks (user + system) the server has used so far.
nbd_server_ticks() {
  awk '{ print $14 + $15 }' "/proc/$SERVER_PID/stat"
}
