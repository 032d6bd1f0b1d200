#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# run-demo.sh: the README's main job. Installs what is missing, builds, makes
# sure a system bus and polkitd run, starts vblkd with its state in the
# checkout (state/), walks a short vbmgr demo and leaves vblkd running.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$repo/build
state=$repo/state
vblkd=$build/src/daemon/vblkd
vbmgr=$build/client/vbmgr
bus_socket=/run/dbus/system_bus_socket
polkit_actions=/usr/share/polkit-1/actions

say () { printf '\n==> %s\n' "$*"; }
run () { printf '$ %s\n' "$*"; "$@"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "run-demo.sh: run as root: sudo bash tools/run-demo.sh" >&2
  exit 1
fi
# Only the system bus is wanted, whatever the caller's environment says.
unset DBUS_SYSTEM_BUS_ADDRESS

name_has_owner () {
  [ "$(gdbus call --system --dest org.freedesktop.DBus \
         --object-path /org/freedesktop/DBus \
         --method org.freedesktop.DBus.NameHasOwner "$1" 2> /dev/null)" = "(true,)" ]
}

name_owner_pid () {
  gdbus call --system --dest org.freedesktop.DBus --object-path /org/freedesktop/DBus \
    --method org.freedesktop.DBus.GetConnectionUnixProcessID "$1" 2> /dev/null |
    sed -n 's/^(uint32 \([0-9]*\),)$/\1/p'
}

bus_answers () {
  gdbus call --system --dest org.freedesktop.DBus --object-path /org/freedesktop/DBus \
    --method org.freedesktop.DBus.GetId > /dev/null 2>&1
}

wait_for () {
  local i
  for ((i = 0; i < 100; i++)); do
    if "$@"; then
      return 0
    fi
    sleep 0.1
  done
  return 1
}

say "Installing missing packages"
bash "$repo/tools/install-deps.sh"

say "Building"
if [ -d "$build/meson-private" ]; then
  run meson setup --reconfigure "$build" "$repo" > /dev/null
else
  run meson setup "$build" "$repo"
fi
run ninja -C "$build"

say "System bus"
mkdir -p "$state"
bus_is_ours () {
  local pid
  pid=$(cat /run/dbus/pid 2> /dev/null) || return 1
  tr '\0' '\n' < "/proc/$pid/cmdline" 2> /dev/null |
    grep -qxF -- "--config-file=$state/system-bus.conf"
}
if bus_answers && bus_is_ours; then
  echo "the system bus started by an earlier run-demo.sh is listening on $bus_socket"
elif bus_answers; then
  echo "a system bus is listening on $bus_socket"
  # The running bus needs vblk's policy to let vblkd own org.vblk.VBlk1.
  conf=/etc/dbus-1/system.d/org.vblk.VBlk1.conf
  if ! cmp -s "$repo/data/dbus/org.vblk.VBlk1.conf" "$conf"; then
    run install -m 644 "$repo/data/dbus/org.vblk.VBlk1.conf" "$conf"
  fi
  gdbus call --system --dest org.freedesktop.DBus --object-path /org/freedesktop/DBus \
    --method org.freedesktop.DBus.ReloadConfig > /dev/null
else
  # None runs: start Debian's system bus, plus vblk's policy through a
  # private config that includes both (nothing is written under /etc).
  cat > "$state/system-bus.conf" << EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <include>/usr/share/dbus-1/system.conf</include>
  <includedir>$repo/data/dbus</includedir>
</busconfig>
EOF
  rm -f "$bus_socket" /run/dbus/pid
  mkdir -p /run/dbus
  bus_pid=$(dbus-daemon --config-file="$state/system-bus.conf" --fork --print-pid)
  wait_for bus_answers || { echo "run-demo.sh: the system bus did not start" >&2; exit 1; }
  echo "started a system bus (dbus-daemon PID $bus_pid) on $bus_socket"
fi

say "polkit"
if ! cmp -s "$repo/data/polkit/org.vblk.policy" "$polkit_actions/org.vblk.policy"; then
  # polkitd reads actions only from here; a running polkitd notices the new file.
  run install -m 644 "$repo/data/polkit/org.vblk.policy" "$polkit_actions/org.vblk.policy"
fi
if name_has_owner org.freedesktop.PolicyKit1; then
  echo "polkitd is running (PID $(name_owner_pid org.freedesktop.PolicyKit1))"
else
  setsid /usr/lib/polkit-1/polkitd --no-debug < /dev/null > "$state/polkitd.log" 2>&1 &
  wait_for name_has_owner org.freedesktop.PolicyKit1 ||
    { cat "$state/polkitd.log" >&2; echo "run-demo.sh: polkitd did not start" >&2; exit 1; }
  echo "started polkitd (PID $(name_owner_pid org.freedesktop.PolicyKit1))"
fi

say "udev"
if udevadm control --ping > /dev/null 2>&1; then
  echo "systemd-udevd is running"
else
  setsid /lib/systemd/systemd-udevd < /dev/null > "$state/udevd.log" 2>&1 &
  wait_for udevadm control --ping > /dev/null 2>&1 ||
    { echo "run-demo.sh: systemd-udevd did not start" >&2; exit 1; }
  udevadm trigger --action=add --subsystem-match=block
  udevadm settle --timeout=30 || true
  echo "started systemd-udevd (PID $!)"
fi

say "vblkd (state in $state)"
if name_has_owner org.vblk.VBlk1; then
  # One vblkd per host. Replace one an earlier demo started (started devices
  # stay up and the new vblkd adopts them); leave any other alone.
  old_pid=$(name_owner_pid org.vblk.VBlk1)
  old_cmd=$(tr '\0' ' ' < "/proc/$old_pid/cmdline" 2> /dev/null || true)
  case "$old_cmd" in
    "$vblkd --state-dir $state "*)
      echo "stopping the vblkd of an earlier demo (PID $old_pid)"
      kill -TERM "$old_pid"
      wait_for eval '! kill -0 '"$old_pid"' 2> /dev/null' ||
        { echo "run-demo.sh: vblkd $old_pid does not exit" >&2; exit 1; }
      ;;
    *)
      echo "run-demo.sh: another vblkd owns org.vblk.VBlk1 (PID $old_pid: $old_cmd);" \
           "stop it first" >&2
      exit 1
      ;;
  esac
fi
echo "=== $(date) run-demo.sh" >> "$state/vblkd.log"
setsid "$vblkd" --state-dir "$state" --policy-dir "$repo/data/policy" < /dev/null >> "$state/vblkd.log" 2>&1 &
vblkd_pid=$!
vblkd_owns_name () {
  kill -0 "$vblkd_pid" 2> /dev/null &&
    [ "$(name_owner_pid org.vblk.VBlk1)" = "$vblkd_pid" ]
}
if ! wait_for vblkd_owns_name; then
  tail -n 30 "$state/vblkd.log" >&2
  echo "run-demo.sh: vblkd did not start (log: $state/vblkd.log)" >&2
  exit 1
fi
echo "vblkd runs as PID $vblkd_pid, log in $state/vblkd.log"

say "Demo: a disk image, a device on it, and a window device stacked on that"
export PATH=$build/client:$PATH
img=$state/demo-disk.img
[ -e "$img" ] || run truncate -s 64M "$img"
if ! vbmgr show demo-disk > /dev/null 2>&1; then
  run vbmgr create demo-disk --driver file "$img"
fi
if ! vbmgr show demo-part > /dev/null 2>&1; then
  run vbmgr create demo-part --driver window --attr offset=1M --attr size=16M vblk:demo-disk
fi
if [ "$(vbmgr show demo-part --json | jq -r .state)" != active ]; then
  run vbmgr start demo-part    # starts demo-disk first: demo-part is built on it
fi
run vbmgr list
run vbmgr show demo-disk
run vbmgr show demo-part
run vbmgr graph

cat << EOF

vblkd keeps running (PID $vblkd_pid); its state is in $state/state.json.
Try:   $vbmgr list
       $vbmgr graph --dot
Stop the devices:   $vbmgr stop demo-disk --recursive
Forget them:        $vbmgr delete demo-disk --recursive
Stop vblkd:         kill $vblkd_pid    (started devices stay; vblkd adopts them when it comes back)
EOF
