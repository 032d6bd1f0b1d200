#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# test-vm-boot-root, the guests booted from the vblk root (tests/vm/run
# --boot with the initramfs boot-root-setup.sh made; run chrooted into the
# host's root by boot-root-init, the vblk root at /media, the test's share
# at /mnt):
#   takeover   the real root's vblkd takes over from the initramfs's, a
#              file is written, and the shutdown is clean (SIGTERM: vblkd
#              stays for the root, which goes read-only; vblk.shutdown has
#              md's superblocks clean, the engine's bitmap cleared)
#   dracut     the same takeover from the vblkd of dracut's initramfs (vblk's
#              dracut module); no resync, the file intact; a clean shutdown
#   clean      no resync after the clean shutdown, the file intact; after
#              the takeover more is written and the guest is reset in the
#              middle of it
#   unclean    the unclean stop resyncs (the engine: only the bitmap's dirty
#              chunks); after the takeover a leg fails (md's own failure;
#              the engine's by vbmgr once the bus comes) and is recorded
#              faulty in the surviving superblock
# VB_BOOT_BACKEND: kernel (md with vblk's metadata) or ublk (the engine).
phase=${1:?usage: boot-root-stage.sh takeover|dracut|clean|unclean}
backend=${VB_BOOT_BACKEND:-kernel}
# its helpers (vb_wait_until, vb_log, vb_fail, and the bus and polkitd the
# engine's unclean phase starts late); vb_setup is not called: no bus,
# polkitd or udevd at first, as at early boot
source "$VB_SRCDIR/tests/integration/lib.sh"
fail () { vb_fail "$phase ($backend): $*"; }
log () { vb_log "$phase ($backend): $*"; }
examine () { "$VBMGR" examine --json "${2:-/dev/vda}" | jq -r "$1"; }
# exited: gone, or a zombie (its parent, the initramfs's init now the
# real root's, need not reap it)
exited () { ! kill -0 "$1" 2> /dev/null || [ "$(awk '{print $3}' "/proc/$1/stat" 2> /dev/null)" = Z ]; }

src=$(findmnt -n -o SOURCE /media) || fail "no root at /media"
node=$(readlink -f "$src")
dev=$(basename "$node")
case $backend in
  kernel)
    log "root from $src ($dev): $(cat /sys/block/$dev/md/level) $(cat /sys/block/$dev/md/array_state), metadata $(cat /sys/block/$dev/md/metadata_version)"
    [ "$(cat /sys/block/$dev/md/metadata_version)" = external:vblk ] || fail "root is not on a vblk md array"
    ;;
  ublk)
    log "root from $src ($dev): $(cat /sys/block/$dev/size) sectors"
    case $dev in ublkb*) ;; *) fail "root is not on a ublk node: $node" ;; esac
    ;;
esac
[ "$(readlink -f /dev/vblk/root)" = "$node" ] || fail "/dev/vblk/root does not lead to $node"
grep -q "ready: 1 device(s), 1 running" /run/vblk/initramfs.log || fail "the initramfs's vblkd: $(cat /run/vblk/initramfs.log)"
old=$(cat /run/vblk/vblkd.pid) || fail "no /run/vblk/vblkd.pid"
[ "$(head -c 1 /proc/$old/cmdline)" = @ ] || fail "the initramfs's vblkd ($old) is not marked '@': $(tr '\0' ' ' < /proc/$old/cmdline)"

# The real root's vblkd, as vblkd.service starts it: before the bus (its
# address named, nothing there yet), its state on the vblk root itself —
# for the engine, served by the vblkd it takes over from until the takeover.
takeover () {
  log "the real root's vblkd takes over from vblkd $old"
  DBUS_SYSTEM_BUS_ADDRESS=unix:path=$T/bus "$VBLKD" --takeover --state-dir=/media/var/lib/vblk \
    > /tmp/vblkd.log 2>&1 &
  new=$!
  vb_wait_until 90 grep -q "ready: 1 device(s), 1 running" /tmp/vblkd.log ||
    fail "no takeover: $(cat /tmp/vblkd.log)"
  grep -q "taking over from vblkd $old" /tmp/vblkd.log || fail "$(cat /tmp/vblkd.log)"
  [ "$backend" = kernel ] || grep -q "took over $node" /tmp/vblkd.log ||
    fail "the engine did not take $node over: $(cat /tmp/vblkd.log)"
  exited "$old" || fail "the initramfs's vblkd $old is still there"
  [ "$(readlink -f /dev/vblk/root)" = "$node" ] || fail "/dev/vblk/root changed"
  [ "$(cat /run/vblk/vblkd.pid)" = "$new" ] || fail "vblkd.pid is not $new's"
  log "took over: $(grep -c . /tmp/vblkd.log) log lines, $(grep -m1 'took over\|adopt' /tmp/vblkd.log | sed 's/.*vblk: //')"
}

# Nothing left to write back: md's superblocks clean; the engine's bitmap
# with no dirty chunk on either leg (and its superblocks clean).
settled () {
  [ "$(examine .clean)" = true ] || return 1
  [ "$backend" = kernel ] ||
    { [ "$(examine .bitmap_dirty)" = 0 ] && [ "$(examine .bitmap_dirty /dev/vdb)" = 0 ]; }
}

# As systemd stops vblkd.service at shutdown: SIGTERM while the root is
# still read-write; vblkd stays for the root (argv[0] '@', spared by
# systemd's last killing spree), the root goes read-only, and systemd's
# last step runs vblk's shutdown hook, vblk.shutdown: vblkd settles the
# root (md: superblocks clean once md idles; the engine: the bitmap
# cleared) at once; then the power goes. $1: "degraded" when a leg has
# failed (the engine's bits then stay: they record what the leg misses).
clean_shutdown () {
  local out rc=0
  kill -TERM "$new"
  vb_wait_until 20 grep -q "staying for root" /tmp/vblkd.log ||
    fail "vblkd did not stay for the root: $(tail /tmp/vblkd.log)"
  kill -0 "$new" 2> /dev/null || fail "vblkd $new left the root"
  [ "$(head -c 1 /proc/$new/cmdline)" = @ ] || fail "vblkd $new staying is not marked '@'"
  echo more > /media/after-term || fail "a write after vblkd's SIGTERM"
  sync
  mount -o remount,ro /media || fail "remount ro"
  out=$(sh "$(cd "$(dirname "$VBMGR")/.." && pwd)/data/vblk.shutdown" poweroff) || rc=$?
  log "vblk.shutdown (status $rc): $out"
  if [ "$backend" = kernel ] || [ "${1:-}" != degraded ]; then
    [ "$rc" = 0 ] && [ "$out" = "vblk: root: settled" ] || fail "vblk.shutdown did not settle the root"
    [ "$(examine .clean)" = true ] || [ "$backend" != kernel ] ||
      fail "superblocks not clean once settled: $(cat /sys/block/$dev/md/array_state) $(examine .)"
    [ "$backend" = kernel ] || [ "$(examine .bitmap_dirty)$(examine .bitmap_dirty /dev/vdb)" = 00 ] ||
      fail "the bitmap keeps dirty chunks once settled: $(examine .bitmap_dirty) $(examine .bitmap_dirty /dev/vdb)"
  else
    [ "$rc" != 0 ] && grep -q "a leg is not in sync" <<< "$out" ||
      fail "vblk.shutdown settled a root with a failed leg: $out"
  fi
  kill -0 "$new" 2> /dev/null || fail "vblkd $new is gone"
}

# No resync at this boot: md idle with nothing to resync; the engine
# started no job.
no_resync () {
  if [ "$backend" = kernel ]; then
    grep -q "resyncing\|md runs resync" /run/vblk/initramfs.log &&
      fail "resync after a clean shutdown: $(cat /run/vblk/initramfs.log)"
    [ "$(cat /sys/block/$dev/md/sync_action)" = idle ] || fail "md: $(cat /sys/block/$dev/md/sync_action)"
    [ "$(cat /sys/block/$dev/md/resync_start)" = none ] || fail "md resync_start $(cat /sys/block/$dev/md/resync_start)"
  else
    grep -q "resync started\|rebuild started" /run/vblk/initramfs.log /tmp/vblkd.log &&
      fail "a job after a clean shutdown: $(grep "started:" /run/vblk/initramfs.log /tmp/vblkd.log)"
  fi
  return 0
}

# After the reset: md resyncs (no bitmap with vblk's metadata); the engine
# resyncs the bitmap's dirty chunks only, far less than the device.
resynced_after_reset () {
  local line bytes size
  if [ "$backend" = kernel ]; then
    line=$(grep -m1 ", resyncing)" /run/vblk/initramfs.log) ||
      fail "no resync after the reset: $(cat /run/vblk/initramfs.log)"
  else
    line=$(grep -m1 "resync started: .* (the bitmap's dirty chunks)" /run/vblk/initramfs.log) ||
      fail "no resync of dirty chunks after the reset: $(cat /run/vblk/initramfs.log)"
    bytes=$(sed 's/.*resync started: \([0-9]*\) bytes.*/\1/' <<< "$line")
    size=$(($(cat /sys/block/$dev/size) * 512))
    [ "$bytes" -gt 0 ] && [ "$bytes" -le $((size / 4)) ] ||
      fail "resynced $bytes of $size bytes after the reset"
  fi
  log "after the reset: ${line#*vblk: }"
}

# A leg fails after the takeover, and the survivor's superblock records it:
# md fails it itself; the engine's is failed by the administrator, through
# the bus that comes only now (vblkd owns its name once it is there).
fail_a_leg () {
  if [ "$backend" = kernel ]; then
    vb_wait_until 120 eval '[ "$(cat /sys/block/$dev/md/sync_action)" = idle ]' || fail "resync did not end"
    log "the leg vdb fails (md marks it faulty)"
    echo faulty > "/sys/block/$dev/md/dev-vdb/state" || fail "cannot fail vdb"
  else
    log "the bus comes; vbmgr fails the leg vdb"
    vb_start_bus
    vb_start_polkitd
    vb_wait_until 30 vb_name_has_owner "$VB_BUS_NAME" ||
      fail "vblkd did not own its name when the bus came: $(tail /tmp/vblkd.log)"
    "$VBMGR" wait root > /dev/null || fail "the resync did not end"
    "$VBMGR" fail root /dev/vdb || fail "vbmgr fail"
  fi
  vb_wait_until 30 eval '[ "$(examine ".roles[1].state")" = faulty ]' ||
    fail "vda's superblock does not record vdb faulty: $(examine .)"
  # (md's failure, recorded by vblkd; the engine's, recorded before it acts)
  grep -q "component 1 .* recorded as faulty\|component 1 (/dev/vdb) failed; recorded at events" \
    /tmp/vblkd.log || fail "$(tail /tmp/vblkd.log)"
}

case $phase in
  takeover)
    # the systemd guest's shutdown, in the journal its root keeps: vblkd
    # stayed for the root; vblk.shutdown, run by systemd-shutdown, had it
    # settle the root: nothing to resync at this boot
    journalctl -D /media/var/log/journal -o cat -u vblkd.service | grep -q "staying for root: in use" ||
      fail "the systemd guest's vblkd did not stay for the root: $(journalctl -D /media/var/log/journal -o cat -u vblkd.service | tail)"
    takeover
    no_resync
    log "no resync after systemd's shutdown"
    mount -o remount,rw /media || fail "remount rw"
    head -c $((8 << 20)) /dev/urandom > /media/data
    sha256sum < /media/data > /mnt/data.sha
    sync
    clean_shutdown
    log "clean shutdown: $(examine '"events \(.events), clean \(.clean), bitmap dirty \(.bitmap_dirty)"')"
    ;;
  dracut)
    # booted from the initramfs dracut made with vblk's module: its vblkd,
    # started by the initqueue once udev settled, is taken over as the
    # other's; nothing to resync after the last clean shutdown; another
    takeover
    no_resync
    [ "$(sha256sum < /media/data)" = "$(cat /mnt/data.sha)" ] || fail "the file differs"
    log "dracut's initramfs started the root; no resync; the file intact"
    mount -o remount,rw /media || fail "remount rw"
    clean_shutdown
    ;;
  clean)
    # (the initramfs's vblkd no longer reaches /sys after the switch: until
    # the takeover md would hold the root's first write)
    takeover
    no_resync
    [ "$(sha256sum < /media/data)" = "$(cat /mnt/data.sha)" ] || fail "the file differs"
    [ "$(cat /media/after-term)" = more ] || fail "the write after vblkd's SIGTERM is not there"
    log "no resync after the clean shutdown; the file intact"
    mount -o remount,rw /media || fail "remount rw"
    # the same 4 MiB written again and again, in place (notrunc: a file
    # truncated each time gets other blocks, and a CI run saw 27 chunks
    # dirty): a few chunks dirty at the reset
    (while :; do dd if=/dev/urandom of=/media/more bs=1M count=4 conv=fsync,notrunc status=none; done) &
    if [ "$backend" = kernel ]; then
      vb_wait_until 10 eval '[ "$(examine .clean)" = false ]' ||
        fail "superblocks clean while the array is written"
    else
      vb_wait_until 10 eval '[ "$(examine .bitmap_dirty)" != 0 ]' ||
        fail "no dirty chunk in the bitmap while the device is written"
    fi
    sleep 2
    log "reset in the middle of writes ($(examine '"bitmap dirty \(.bitmap_dirty)"'))"
    echo 0 > /srv/rc
    echo b > /proc/sysrq-trigger
    sleep 30
    ;;
  unclean)
    resynced_after_reset
    takeover
    fail_a_leg
    [ "$(sha256sum < /media/data)" = "$(cat /mnt/data.sha)" ] || fail "the file differs"
    log "vdb's failure is in vda's superblock (events $(examine .events))"
    mount -o remount,rw /media || fail "remount rw"
    clean_shutdown degraded
    ;;
  *) fail "unknown phase" ;;
esac
