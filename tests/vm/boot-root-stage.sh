#!/bin/bash
# test-vm-boot-root, the guests booted from the vblk root (tests/vm/run
# --boot with the initramfs boot-root-setup.sh made; run chrooted into the
# host's root by boot-root-init, the vblk root at /media, the test's share
# at /mnt):
#   takeover   the real root's vblkd takes over from the initramfs's, a
#              file is written, and the shutdown is clean (SIGTERM: vblkd
#              stays for the root, which goes read-only; the superblocks clean)
#   clean      no resync after the clean shutdown, the file intact; after
#              the takeover more is written and the guest is reset in the
#              middle of it
#   unclean    the unclean stop resyncs; after the takeover a leg failed
#              by md is recorded faulty in the superblocks
phase=${1:?usage: boot-root-stage.sh takeover|clean|unclean}
# its helpers (vb_wait_until, vb_log, vb_fail); no vb_setup: nothing of
# its own bus, polkitd or udevd here
source "$VB_SRCDIR/tests/integration/lib.sh"
fail () { vb_fail "$phase: $*"; }
log () { vb_log "$phase: $*"; }
examine () { "$VBMGR" examine --json /dev/vda | jq -r "$1"; }
# exited: gone, or a zombie (its parent, the initramfs's init now the
# real root's, need not reap it)
exited () { ! kill -0 "$1" 2> /dev/null || [ "$(awk '{print $3}' "/proc/$1/stat" 2> /dev/null)" = Z ]; }

src=$(findmnt -n -o SOURCE /media) || fail "no root at /media"
md=$(basename "$(readlink -f "$src")")
log "root from $src ($md): $(cat /sys/block/$md/md/level) $(cat /sys/block/$md/md/array_state), metadata $(cat /sys/block/$md/md/metadata_version)"
[ "$(cat /sys/block/$md/md/metadata_version)" = external:vblk ] || fail "root is not on a vblk md array"
[ "$(readlink -f /dev/vblk/root)" = "/dev/$md" ] || fail "/dev/vblk/root does not lead to /dev/$md"
grep -q "ready: 1 device(s), 1 running" /run/vblk/initramfs.log || fail "the initramfs's vblkd: $(cat /run/vblk/initramfs.log)"
old=$(cat /run/vblk/vblkd.pid) || fail "no /run/vblk/vblkd.pid"
[ "$(head -c 1 /proc/$old/cmdline)" = @ ] || fail "the initramfs's vblkd ($old) is not marked '@': $(tr '\0' ' ' < /proc/$old/cmdline)"

takeover () {
  log "the real root's vblkd takes over from vblkd $old"
  "$VBLKD" --takeover --state-dir=/media/var/lib/vblk > /tmp/vblkd.log 2>&1 &
  new=$!
  vb_wait_until 60 grep -q "ready: 1 device(s), 1 running" /tmp/vblkd.log ||
    fail "no takeover: $(cat /tmp/vblkd.log)"
  grep -q "taking over from vblkd $old" /tmp/vblkd.log || fail "$(cat /tmp/vblkd.log)"
  exited "$old" || fail "the initramfs's vblkd $old is still there"
  [ "$(readlink -f /dev/vblk/root)" = "/dev/$md" ] || fail "/dev/vblk/root changed"
  [ "$(cat /run/vblk/vblkd.pid)" = "$new" ] || fail "vblkd.pid is not $new's"
}

# As systemd stops vblkd.service at shutdown: SIGTERM while the root is
# still read-write; vblkd stays for the root's array (argv[0] '@', spared by
# systemd's last killing spree), the root goes read-only, md idles and
# vblkd marks the superblocks clean; then the power goes.
clean_shutdown () {
  kill -TERM "$new"
  vb_wait_until 20 grep -q "staying for root" /tmp/vblkd.log ||
    fail "vblkd did not stay for the root: $(tail /tmp/vblkd.log)"
  kill -0 "$new" 2> /dev/null || fail "vblkd $new left the root's array"
  [ "$(head -c 1 /proc/$new/cmdline)" = @ ] || fail "vblkd $new staying is not marked '@'"
  echo more > /media/after-term || fail "a write after vblkd's SIGTERM"
  sync
  mount -o remount,ro /media || fail "remount ro"
  # md goes idle, vblkd marks the array and its superblocks clean
  vb_wait_until 30 eval '[ "$(examine .clean)" = true ]' ||
    fail "superblocks not clean: $(cat /sys/block/$md/md/array_state) $(examine .)"
  kill -0 "$new" 2> /dev/null || fail "vblkd $new is gone"
}

case $phase in
  takeover)
    takeover
    mount -o remount,rw /media || fail "remount rw"
    head -c $((8 << 20)) /dev/urandom > /media/data
    sha256sum < /media/data > /mnt/data.sha
    sync
    clean_shutdown
    log "clean shutdown: $(examine '"events \(.events), clean \(.clean)"')"
    ;;
  clean)
    # (the initramfs's vblkd no longer reaches /sys after the switch: until
    # the takeover md would hold the root's first write)
    takeover
    grep -q "resyncing\|md runs resync" /run/vblk/initramfs.log &&
      fail "resync after a clean shutdown: $(cat /run/vblk/initramfs.log)"
    [ "$(cat /sys/block/$md/md/sync_action)" = idle ] || fail "md: $(cat /sys/block/$md/md/sync_action)"
    [ "$(cat /sys/block/$md/md/resync_start)" = none ] || fail "md resync_start $(cat /sys/block/$md/md/resync_start)"
    [ "$(sha256sum < /media/data)" = "$(cat /mnt/data.sha)" ] || fail "the file differs"
    [ "$(cat /media/after-term)" = more ] || fail "the write after vblkd's SIGTERM is not there"
    log "no resync after the clean shutdown; the file intact"
    mount -o remount,rw /media || fail "remount rw"
    dd if=/dev/zero of=/media/more bs=1M count=64 oflag=direct status=none &
    vb_wait_until 10 eval '[ "$(examine .clean)" = false ]' ||
      fail "superblocks clean while the array is written"
    log "reset in the middle of writes"
    echo 0 > /srv/rc
    echo b > /proc/sysrq-trigger
    sleep 30
    ;;
  unclean)
    grep -q ", resyncing)" /run/vblk/initramfs.log ||
      fail "no resync after the reset: $(cat /run/vblk/initramfs.log)"
    log "after the reset: $(grep -m1 ", resyncing)" /run/vblk/initramfs.log)"
    takeover
    vb_wait_until 120 eval '[ "$(cat /sys/block/$md/md/sync_action)" = idle ]' || fail "resync did not end"
    log "the leg vdb fails (md marks it faulty)"
    echo faulty > "/sys/block/$md/md/dev-vdb/state" || fail "cannot fail vdb"
    vb_wait_until 30 eval '[ "$(examine ".roles[1].state")" = faulty ]' ||
      fail "vda's superblock does not record vdb faulty: $(examine .)"
    grep -q "component 1 .* recorded as faulty" /tmp/vblkd.log || fail "$(tail /tmp/vblkd.log)"
    [ "$(sha256sum < /media/data)" = "$(cat /mnt/data.sha)" ] || fail "the file differs"
    log "vdb's failure is in vda's superblock (events $(examine .events))"
    mount -o remount,rw /media || fail "remount rw"
    clean_shutdown
    ;;
  *) fail "unknown phase" ;;
esac
