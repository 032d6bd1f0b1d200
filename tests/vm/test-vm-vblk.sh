#!/bin/bash
# Suite 'vm': vblk's own integration tests on Debian 12's kernel (6.1)
# under the VM harness, one boot for all: the engine's FUSE and loop
# paths, io_uring, udev and polkit on a distribution kernel rather than
# the development machines' one. VB_VM_TESTS overrides the list.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "SKIP: the VM tests need root" >&2; exit 77; }
command -v "${VB_VM_QEMU:-qemu-system-x86_64}" > /dev/null ||
  { echo "SKIP: no ${VB_VM_QEMU:-qemu-system-x86_64}" >&2; exit 77; }
[ -s "${VB_VM_CACHE:-/var/cache/vblk-vm}/kernel-version" ] ||
  { echo "SKIP: no VM cache (tests/vm/build-cache.sh)" >&2; exit 77; }
: "${VBLKD:?}" "${VBMGR:?}" "${VB_SRCDIR:?}"
tests=${VB_VM_TESTS:-test-kernel-dm test-kernel-md test-kernel-nbd test-backend-nbd test-md1 test-lifecycle test-metadata test-reconfigure-grow test-backend-ublk}
exec "$here/run" --timeout 2000 "
set -u
modprobe loop && modprobe fuse && modprobe dm-mod && modprobe raid0 && modprobe raid1 && modprobe raid10 && modprobe dm-flakey && modprobe nbd || exit 1
export VBLKD=$VBLKD VBMGR=$VBMGR VB_SRCDIR=$VB_SRCDIR VB_REFMODEL=${VB_REFMODEL:-} VB_NBD_FILE_SERVER=${VB_NBD_FILE_SERVER:-} VB_UBLK_CTL=${VB_UBLK_CTL:-}
failed=0
for t in $tests; do
  start=\$(date +%s)
  # a hang shows as that test's failure with its log, not the whole run's
  if timeout -k 10 600 bash $VB_SRCDIR/tests/integration/\$t.sh > /tmp/\$t.log 2>&1; then
    echo \"# \$t: OK in \$((\$(date +%s) - start)) s on \$(uname -r)\"
  else
    echo \"# \$t: FAILED on \$(uname -r)\"; tail -40 /tmp/\$t.log; failed=1
  fi
done
exit \$failed"
