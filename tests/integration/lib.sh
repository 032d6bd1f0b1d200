# SPDX-License-Identifier: LGPL-2.1-or-later
# lib.sh: sourced by every integration test (suite 'integration').
# Gives each test its own system bus (dbus-daemon with a private config), a real
# polkitd that knows org.vblk.policy, a real systemd-udevd, and vblkd/vbmgr run
# exactly as users run them; everything it starts or sets up is undone on exit.
# shellcheck shell=bash

set -euo pipefail
# the messages the tests match are the untranslated ones, whatever the
# caller's locale (test-translation sets German where it wants it)
export LC_ALL=C.UTF-8 LANGUAGE=

vb_log () { printf '# %s\n' "$*" >&2; }
# the failure is said again after the vblkd log at the cleanup, so that a
# log cut to its last lines (meson's) still shows it
VB_FAILED=
vb_fail () {
  VB_FAILED="$*"
  printf 'FAIL: %s\n' "$*" >&2
  exit 1
}

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: integration tests need root (loop devices, polkitd, udevd)" >&2
  exit 77
fi
if [ ! -e /dev/loop-control ]; then
  modprobe loop 2>/dev/null || true
  if [ ! -e /dev/loop-control ]; then
    echo "SKIP: no loop device support (/dev/loop-control)" >&2
    exit 77
  fi
fi

VB_SRCDIR=${VB_SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
VBLKD=${VBLKD:-$VB_SRCDIR/build/src/daemon/vblkd}
VBMGR=${VBMGR:-$VB_SRCDIR/build/client/vbmgr}
VB_FUSE_STALL=${VB_FUSE_STALL:-$VB_SRCDIR/build/tests/tools/vb-fuse-stall}
VB_POLKITD=${VB_POLKITD:-/usr/lib/polkit-1/polkitd}
VB_UDEVD=${VB_UDEVD:-/lib/systemd/systemd-udevd}
VB_BUS_NAME=org.vblk.VBlk1

for vb__tool in dbus-daemon gdbus unshare setpriv losetup udevadm jq blockdev \
                "$VB_POLKITD" "$VB_UDEVD" "$VBLKD" "$VBMGR"; do
  command -v "$vb__tool" > /dev/null ||
    vb_fail "missing $vb__tool (run tools/install-deps.sh and build first)"
done
unset vb__tool

# PIDs of everything we start; cleanup ends exactly these, nothing found by name.
VB_DBUS_PID=
VB_POLKITD_PID=
VB_UDEVD_PID=
VBLKD_PID=
VB_BG_PIDS=()

T=$(realpath "$(mktemp -d /tmp/vblk-test.XXXXXXXX)")
chmod 755 "$T"   # user nobody must reach the bus socket and the image files
VB_STATE_DIR=$T/state
VB_RUN_DIR=$T/run
VB_DEV_DIR=$T/dev
VB_STATE_FILE=$VB_STATE_DIR/state.json
VB_STATE_JOURNAL=$VB_STATE_DIR/state.journal
VB_LOG=$T/vblkd.log
cd "$T"

# --- small helpers -------------------------------------------------------

# vb_wait_until TIMEOUT_SECONDS CMD... — poll CMD every 0.1 s.
vb_wait_until () {
  local timeout=$1 i
  shift
  for ((i = 0; i < timeout * 10; i++)); do
    if "$@"; then
      return 0
    fi
    sleep 0.1
  done
  return 1
}

vb_pid_alive () {
  [ -n "$1" ] && [ -e "/proc/$1" ] &&
    [ "$(vb_pid_state "$1")" != Z ]
}

# State letter of a process from /proc/PID/stat (comm may hold spaces and parens).
vb_pid_state () {
  local stat
  stat=$(cat "/proc/$1/stat" 2> /dev/null) || return 1
  stat=${stat##*) }
  printf '%s\n' "${stat%% *}"
}

vb_name_has_owner () {
  local out
  out=$(gdbus call --system --dest org.freedesktop.DBus \
          --object-path /org/freedesktop/DBus \
          --method org.freedesktop.DBus.NameHasOwner "$1" 2> /dev/null) || return 1
  [ "$out" = "(true,)" ]
}

# --- the private system bus ------------------------------------------------

vb__write_bus_config () {
  # Debian's system.conf default-deny policy; service files punch the holes.
  # VB_BUS_SERVICEDIR: a directory of activation files (the bus starts the
  # service a call names itself, without a setuid helper)
  cat > "$T/bus.conf" << EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$T/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus"
           send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus"
           send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus"
           send_interface="org.freedesktop.DBus.Properties"/>
    <deny send_destination="org.freedesktop.DBus"
          send_interface="org.freedesktop.DBus"
          send_member="UpdateActivationEnvironment"/>
    <deny send_destination="org.freedesktop.DBus"
          send_interface="org.freedesktop.DBus.Debug.Stats"/>
  </policy>
  <policy user="root">
    <allow send_destination="org.freedesktop.DBus"
           send_interface="org.freedesktop.DBus.Monitoring"/>
  </policy>
  <includedir>$VB_SRCDIR/data/dbus</includedir>
  <includedir>/usr/share/dbus-1/system.d</includedir>
  ${VB_BUS_SERVICEDIR:+<servicedir>$VB_BUS_SERVICEDIR</servicedir>}
</busconfig>
EOF
}

vb_start_bus () {
  vb__write_bus_config
  # a bus started again (test-bus-restart) must not be read from the old address file
  rm -f "$T/bus.address" "$T/bus"
  dbus-daemon --config-file="$T/bus.conf" --nofork --print-address \
    > "$T/bus.address" 2> "$T/dbus.log" &
  VB_DBUS_PID=$!
  vb_wait_until 10 test -s "$T/bus.address" ||
    { cat "$T/dbus.log" >&2; vb_fail "dbus-daemon did not start"; }
  DBUS_SYSTEM_BUS_ADDRESS=$(head -n 1 "$T/bus.address")
  export DBUS_SYSTEM_BUS_ADDRESS
  vb_wait_until 10 vb_name_has_owner org.freedesktop.DBus ||
    vb_fail "the private bus at $DBUS_SYSTEM_BUS_ADDRESS does not answer"
}

# --- polkitd ---------------------------------------------------------------

# polkitd reads actions only from /usr/share/polkit-1/actions; give it, in a
# private mount namespace, a copy of that directory plus our action file, so
# nothing on the host changes. VB_POLKIT_RULES, when set, is a directory of
# rules put in place of /etc/polkit-1/rules.d the same way.
vb_start_polkitd () {
  local actions=$T/polkit-actions
  mkdir -p "$actions"
  cp /usr/share/polkit-1/actions/*.policy "$actions"/ 2> /dev/null || true
  cp "$VB_SRCDIR/data/polkit/org.vblk.policy" "$actions"/
  chmod -R a+rX "$actions"
  # unshare and sh exec, so $! is polkitd's own PID. The new namespace
  # starts with a copy of every mount, those of tests running beside this
  # one too (their file systems on vblk nodes, their engines' FUSE mounts):
  # a copy would hold them busy until this polkitd ends, so they go.
  unshare --mount --propagation private -- /bin/sh -c \
    'findmnt -rn -o TARGET | grep "^/tmp/vblk-test\." | sort -r |
       while read -r m; do umount -l "$m" 2> /dev/null; done
     mount --bind "$1" /usr/share/polkit-1/actions || exit 1
     [ -z "$2" ] || mount --bind "$2" /etc/polkit-1/rules.d || exit 1
     shift 2 && exec "$@"' \
    sh "$actions" "${VB_POLKIT_RULES:-}" "$VB_POLKITD" --no-debug > "$T/polkitd.log" 2>&1 &
  VB_POLKITD_PID=$!
  vb_wait_until 10 vb_name_has_owner org.freedesktop.PolicyKit1 ||
    { cat "$T/polkitd.log" >&2; vb_fail "polkitd did not take org.freedesktop.PolicyKit1"; }
}

# --- systemd-udevd ---------------------------------------------------------

vb_start_udevd () {
  if ! udevadm control --ping > /dev/null 2>&1; then
    "$VB_UDEVD" > "$T/udevd.log" 2>&1 &
    VB_UDEVD_PID=$!
    vb_wait_until 10 udevadm control --ping > /dev/null 2>&1 ||
      { cat "$T/udevd.log" >&2; vb_fail "systemd-udevd did not start"; }
  fi
  udevadm trigger --action=add --subsystem-match=block
  udevadm settle --timeout=30
}

# vb_manager_call METHOD ARGS... — Manager.METHOD through gdbus, a D-Bus
# caller that is not vbmgr; on error, "gdbus: CODE: message" on stderr (the
# form vb_expect_fail looks for) and status 1.
vb_manager_call () {
  local method=$1 out rc=0
  shift
  out=$(gdbus call --system --dest org.vblk.VBlk1 --object-path /org/vblk/VBlk1/Manager \
          --method "org.vblk.VBlk1.Manager.$method" "$@" 2>&1) || rc=$?
  [ "$rc" -eq 0 ] || { sed -E 's/.*org\.vblk\.VBlk1\.Error\.([A-Za-z]+): /gdbus: \1: /' <<< "$out" >&2; return 1; }
  echo "$out"
}

# vb_install_udev_rules — data/udev's rules in the running udevd, as
# installed but at this build's vbmgr and this test's run directory; runtime
# rules, gone with the test.
vb_install_udev_rules () {
  local rules=/run/udev/rules.d/64-vblk-test-$$.rules
  mkdir -p /run/udev/rules.d
  sed -e "s|@bindir@/vbmgr|$VBMGR|" -e "s|@rundir@|$VB_RUN_DIR|" \
    "$VB_SRCDIR/data/udev/64-vblk.rules.in" > "$rules"
  vb_on_cleanup "rm -f '$rules'; udevadm control --reload"
  udevadm control --reload
}

# vb_policy_assemble — vblkd (started next) with one policy rule: components
# of known devices are assembled (re-added, started) as they appear.
vb_policy_assemble () {
  mkdir -p "$T/policy"
  printf '[rule components]\nmatch.metadata=vblk\naction=assemble\n' > "$T/policy/50-test.rules"
  export VB_DAEMON_ARGS="--policy-dir $T/policy"
}

# --- vblkd -------------------------------------------------------------------

# vb_start_daemon [VAR=VALUE...] — start vblkd with the extra environment and
# wait until it owns org.vblk.VBlk1. VB_DAEMON_ARGS: more vblkd options,
# split on blanks (e.g. "--policy-dir $T/policy").
vb_start_daemon () {
  if vb_pid_alive "$VBLKD_PID"; then
    vb_fail "vb_start_daemon: vblkd ($VBLKD_PID) is still running"
  fi
  mkdir -p "$VB_STATE_DIR" "$VB_RUN_DIR"
  echo "=== vblkd start $(date +%T.%N) $*" >> "$VB_LOG"
  # shellcheck disable=SC2086 # VB_DAEMON_ARGS is split on purpose
  # VBLK_TEST_FROZEN: a device config two states share changed in place
  # is a critical (vb-state.c); bench-scale.sh turns the check off.
  # G_SLICE as vblkd.service sets it
  env G_DEBUG=fatal-criticals VBLK_TEST_FROZEN="${VBLK_TEST_FROZEN:-1}" G_SLICE=always-malloc "$@" \
    "$VBLKD" --state-dir "$VB_STATE_DIR" --run-dir "$VB_RUN_DIR" \
    --dev-dir "$VB_DEV_DIR" --debug ${VB_DAEMON_ARGS:-} >> "$VB_LOG" 2>&1 &
  VBLKD_PID=$!
  local i
  for ((i = 0; i < 100; i++)); do
    if vb_name_has_owner "$VB_BUS_NAME"; then
      return 0
    fi
    if ! vb_pid_alive "$VBLKD_PID"; then
      break
    fi
    sleep 0.1
  done
  cat "$VB_LOG" >&2
  vb_fail "vblkd did not take $VB_BUS_NAME within 10 s"
}

vb__wait_pid () {
  local rc=0
  wait "$1" 2> /dev/null || rc=$?
  return "$rc"
}

# vb_stop_daemon — SIGTERM, wait; returns vblkd's exit status.
vb_stop_daemon () {
  [ -n "$VBLKD_PID" ] || vb_fail "vb_stop_daemon: vblkd not started"
  local pid=$VBLKD_PID rc=0
  kill -TERM "$pid"
  vb__wait_pid "$pid" || rc=$?
  VBLKD_PID=
  vb_wait_until 10 eval '! vb_name_has_owner "$VB_BUS_NAME"' ||
    vb_fail "$VB_BUS_NAME still owned after vblkd exited"
  return "$rc"
}

# vb_kill_daemon — SIGKILL (works on a stopped process too), wait.
vb_kill_daemon () {
  [ -n "$VBLKD_PID" ] || vb_fail "vb_kill_daemon: vblkd not started"
  local pid=$VBLKD_PID
  kill -KILL "$pid"
  vb__wait_pid "$pid" || true
  VBLKD_PID=
  vb_wait_until 10 eval '! vb_name_has_owner "$VB_BUS_NAME"' ||
    vb_fail "$VB_BUS_NAME still owned after vblkd was killed"
}

# vb_wait_stopped PID — wait until PID is stopped (SIGSTOP, state T).
vb_wait_stopped () {
  local pid=$1 i st
  for ((i = 0; i < 200; i++)); do
    st=$(vb_pid_state "$pid") ||
      { cat "$VB_LOG" >&2; vb_fail "process $pid exited instead of stopping"; }
    if [ "$st" = T ]; then
      return 0
    fi
    [ "$st" != Z ] || { cat "$VB_LOG" >&2; vb_fail "process $pid exited instead of stopping"; }
    sleep 0.1
  done
  vb_fail "process $pid did not stop within 20 s (state $st)"
}

# --- clients -------------------------------------------------------------------

vbmgr () { G_DEBUG=fatal-criticals "$VBMGR" "$@"; }

vb_as_nobody () {
  setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"
}

vb_as_daemon () {
  setpriv --reuid=daemon --regid=daemon --clear-groups -- "$@"
}

# vb_bg CMD... — run CMD in the background; its PID is in VB_BG_PID. The
# vbmgr function is expanded here so that the PID is vbmgr's own.
vb_bg () {
  if [ "$1" = vbmgr ]; then
    shift
    set -- env G_DEBUG=fatal-criticals "$VBMGR" "$@"
  fi
  "$@" &
  VB_BG_PID=$!
  VB_BG_PIDS+=("$VB_BG_PID")
}

# vb_mkimg PATH SIZE — a sparse image file.
vb_mkimg () {
  rm -f "$1"
  truncate -s "$2" "$1"
}

# vb_loops_of FILE — the loop devices whose backing file is FILE, one a line.
vb_loops_of () {
  losetup --list --noheadings --output NAME --associated "$1" 2> /dev/null || true
}

# vb_json NAME JQ_FILTER — a field of `vbmgr show NAME --json`.
vb_json () {
  local out
  out=$(vbmgr show "$1" --json) || vb_fail "vbmgr show $1 --json failed"
  jq -r "$2" <<< "$out"
}

vb_state_of () { vb_json "$1" .state; }
vb_blockdev_of () { vb_json "$1" .block_device; }

# vb_wait_state NAME STATE [TIMEOUT] — poll until the device reaches STATE.
vb_wait_state () {
  local name=$1 want=$2 timeout=${3:-10} i st=
  for ((i = 0; i < timeout * 10; i++)); do
    st=$(vbmgr show "$name" --json 2> /dev/null | jq -r .state 2> /dev/null) || st=
    if [ "$st" = "$want" ]; then
      return 0
    fi
    sleep 0.1
  done
  vb_fail "device $name: state '$st', expected '$want' within $timeout s"
}

# vb_wait_jobs NAME — until no job of the device runs, whatever state it
# is left in (vbmgr wait NAME also fails when it ends degraded or failed,
# which a test that keeps a leg out expects)
vb_wait_jobs () {
  local rc=0
  vbmgr wait "$1" > /dev/null 2> "$T/wait-jobs.err" || rc=$?
  [ "$rc" -eq 0 ] || grep -q "no job runs, and the device is" "$T/wait-jobs.err" ||
    { cat "$T/wait-jobs.err" >&2; return 1; }
}

# --- assertions -------------------------------------------------------------

vb_assert_eq () {
  local expected=$1 actual=$2 what=${3:-value}
  [ "$expected" = "$actual" ] ||
    vb_fail "$what: expected '$expected', got '$actual'"
}

vb_assert_contains () {
  local haystack=$1 needle=$2 what=${3:-output}
  case "$haystack" in
    *"$needle"*) ;;
    *) vb_fail "$what does not contain '$needle': $haystack" ;;
  esac
}

# vb_assert_absent PATH WHAT — PATH neither exists nor is a (dangling) link.
vb_assert_absent () {
  if [ -e "$1" ] || [ -L "$1" ]; then
    vb_fail "$2: $1 exists"
  fi
}

vb_assert_not_contains () {
  local haystack=$1 needle=$2 what=${3:-output}
  case "$haystack" in
    *"$needle"*) vb_fail "$what contains '$needle': $haystack" ;;
    *) ;;
  esac
}

# vb_expect_fail CODE_NAME CMD... — CMD must exit 1 with ": CODE_NAME:" on
# stderr. Its stderr is left in VB_ERR for further checks.
VB_ERR=
vb_expect_fail () {
  local code=$1 rc=0
  shift
  "$@" > "$T/expect.out" 2> "$T/expect.err" || rc=$?
  VB_ERR=$(cat "$T/expect.err")
  if [ "$rc" -ne 1 ]; then
    vb_fail "'$*': exit status $rc, expected 1 ($code); stderr: $VB_ERR"
  fi
  vb_assert_contains "$VB_ERR" ": $code:" "stderr of '$*'"
}

# vb_state — the desired state as vblkd loads it (state.json with its
# journal replayed; `vblkd --print-state`), for jq.
vb_state () {
  "$VBLKD" --print-state --state-dir "$VB_STATE_DIR"
}

# vb_state_files — state.json and state.journal as they are on disk.
vb_state_files () {
  local f
  for f in "$VB_STATE_FILE" "$VB_STATE_JOURNAL"; do
    if [ -e "$f" ]; then echo "== ${f##*/}"; cat "$f"; else echo "== no ${f##*/}"; fi
  done
}

# vb_snapshot — remember `vbmgr list --json` and the desired state (as
# vblkd loads it: state.json with its journal);
# vb_assert_unchanged WHAT — both must be byte-identical to the snapshot.
vb_snapshot () {
  vbmgr list --json > "$T/snap.list"
  vb_state > "$T/snap.state"
}

vb_assert_unchanged () {
  local what=$1
  vbmgr list --json > "$T/now.list"
  cmp -s "$T/snap.list" "$T/now.list" ||
    { diff -u "$T/snap.list" "$T/now.list" >&2 || true
      vb_fail "$what: 'vbmgr list --json' changed"; }
  vb_state > "$T/now.state"
  cmp -s "$T/snap.state" "$T/now.state" ||
    { diff -u "$T/snap.state" "$T/now.state" >&2 || true
      vb_fail "$what: the desired state changed"; }
}

# --- cleanup ---------------------------------------------------------------------

vb__end_pid () {
  local pid=$1
  vb_pid_alive "$pid" || { wait "$pid" 2> /dev/null || true; return 0; }
  kill -TERM "$pid" 2> /dev/null || true
  kill -CONT "$pid" 2> /dev/null || true
  vb_wait_until 5 eval '! vb_pid_alive '"$pid" || kill -KILL "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
}

# Every loop device over a file under $T, and (stacked devices) every loop over
# one of those, detached top first.
vb__detach_loops () {
  local -A seen=()
  local -a order=()
  local changed=1 name back i
  while [ "$changed" = 1 ]; do
    changed=0
    while read -r name back; do
      if [ -z "$name" ] || [ -z "$back" ] || [ -n "${seen[$name]:-}" ]; then
        continue
      fi
      back=${back%%\\x20(deleted)}
      if [[ "$back" == "$T"/* ]] || [ -n "${seen[$back]:-}" ]; then
        seen[$name]=1
        order+=("$name")
        changed=1
      fi
    done < <(losetup --list --noheadings --raw --output NAME,BACK-FILE 2> /dev/null)
  done
  for ((i = ${#order[@]} - 1; i >= 0; i--)); do
    vb_wait_until 5 losetup -d "${order[$i]}" 2> /dev/null ||
      echo "cleanup: could not detach ${order[$i]}" >&2
  done
}

vb__unmount_all () {
  local target
  findmnt --raw --noheadings --output TARGET | grep -F "$T/" | sort -r |
    while read -r target; do
      umount "$target" 2> /dev/null || umount -l "$target" || true
    done
}

# vb_on_cleanup CMD — run CMD (eval) at the end, after the unmounts and
# before the loop devices go: for what the test made that sits between
# them (md arrays, dm devices). Last registered, first run.
VB_CLEANUP_CMDS=()
vb_on_cleanup () { VB_CLEANUP_CMDS+=("$*"); }
# vb_on_cleanup_early CMD — run CMD (eval) right after vblkd is ended, before
# the unmounts: for block nodes that would hold an unmount (nbd nodes whose
# server was killed wait for a new one).
VB_CLEANUP_EARLY_CMDS=()
vb_on_cleanup_early () { VB_CLEANUP_EARLY_CMDS+=("$*"); }

vb_cleanup () {
  local rc=$?
  set +e
  cd /
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -s "$VB_LOG" ]; then
    echo "----- vblkd log ($VB_LOG) -----" >&2
    tail -n 200 "$VB_LOG" >&2
    echo "----- end of the vblkd log -----" >&2
    if [ -n "$VBLKD_PID" ] && ! vb_pid_alive "$VBLKD_PID"; then
      wait "$VBLKD_PID" 2> /dev/null
      echo "vblkd (pid $VBLKD_PID) had exited with status $?" >&2
    fi
    [ -z "$VB_FAILED" ] || printf 'FAIL: %s\n' "$VB_FAILED" >&2
  fi
  local pid
  for pid in "${VB_BG_PIDS[@]}"; do
    vb__end_pid "$pid"
  done
  if [ -n "$VBLKD_PID" ]; then
    kill -KILL "$VBLKD_PID" 2> /dev/null
    wait "$VBLKD_PID" 2> /dev/null
  fi
  local i
  for ((i = ${#VB_CLEANUP_EARLY_CMDS[@]} - 1; i >= 0; i--)); do
    eval "${VB_CLEANUP_EARLY_CMDS[$i]}" > /dev/null 2>&1
  done
  # engine loop devices first, while their FUSE file still has its path
  # under $T (once the mount is gone it shows as "/data"); then what a
  # mounted filesystem held
  vb__detach_loops
  vb__unmount_all
  for ((i = ${#VB_CLEANUP_CMDS[@]} - 1; i >= 0; i--)); do
    eval "${VB_CLEANUP_CMDS[$i]}" > /dev/null 2>&1
  done
  [ -z "$VB_UDEVD_PID" ] || udevadm settle --timeout=10 2> /dev/null
  vb__detach_loops
  rm -rf "$VB_DEV_DIR"
  [ -z "$VB_POLKITD_PID" ] || vb__end_pid "$VB_POLKITD_PID"
  [ -z "$VB_DBUS_PID" ] || vb__end_pid "$VB_DBUS_PID"
  [ -z "$VB_UDEVD_PID" ] || vb__end_pid "$VB_UDEVD_PID"
  rm -rf "$T"
  exit "$rc"
}

trap vb_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# vb_setup — bus, polkitd and udevd; every test calls it first.
vb_setup () {
  vb_start_bus
  vb_start_polkitd
  vb_start_udevd
}
