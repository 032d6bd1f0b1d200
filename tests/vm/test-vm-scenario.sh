#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Suite 'vm': one kernel scenario in a guest of its own (tests/vm/run), on
# Debian 12's kernel (6.1), so that a failure names its scenario.
#   test-vm-scenario.sh kernel-parts   md, dm, nbd and ublk_drv used for real
#                                      with mdadm and dmsetup (guest-kernel-parts.sh)
#   test-vm-scenario.sh test-NAME      tests/integration/test-NAME.sh in the guest
# The list of scenarios is tests/vm/meson.build's. A boot costs about 7 s under
# TCG, so no guest is shared: no scenario sees what another left behind.
# Inside the guest every kernel part is there, so a test that skips (77)
# fails here. VB_VM_KERNEL=newer: the guest runs the newer kernel
# (build-cache.sh's, Debian 13's backports) instead.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
scenario=${1:?usage: test-vm-scenario.sh kernel-parts|test-NAME}
[ "$(id -u)" -eq 0 ] || { echo "SKIP: the VM tests need root" >&2; exit 77; }
command -v "${VB_VM_QEMU:-qemu-system-x86_64}" > /dev/null ||
  { echo "SKIP: no ${VB_VM_QEMU:-qemu-system-x86_64}" >&2; exit 77; }
if [ "${VB_VM_KERNEL:-debian12}" = newer ]; then
  export VB_VM_CACHE=${VB_VM_CACHE:-/var/cache/vblk-vm}/newer
fi
[ -s "${VB_VM_CACHE:-/var/cache/vblk-vm}/kernel-version" ] ||
  { echo "SKIP: no VM cache in ${VB_VM_CACHE:-/var/cache/vblk-vm} (VB_VM_KERNEL=${VB_VM_KERNEL:-debian12} tests/vm/build-cache.sh)" >&2; exit 77; }

if [ "$scenario" = kernel-parts ]; then
  exec "$here/run" --timeout 400 bash "$here/guest-kernel-parts.sh"
fi

: "${VBLKD:?}" "${VBMGR:?}" "${VB_SRCDIR:?}"
test=$VB_SRCDIR/tests/integration/$scenario.sh
[ -f "$test" ] || { echo "FAIL: no scenario '$scenario' ($test)" >&2; exit 1; }
# what meson gives the integration tests, handed on into the guest
env=()
for v in VBLKD VBMGR VB_SRCDIR VB_REFMODEL VB_NBD_FILE_SERVER VB_UBLK_CTL VB_FUSE_STALL; do
  env+=("$v=${!v:-}")
done
modules="loop fuse dm-mod raid0 raid1 raid10 dm-flakey nbd"
rc=0
"$here/run" --timeout 700 "
for m in $modules; do modprobe \$m || { echo \"FAIL: modprobe \$m\" >&2; exit 1; }; done
start=\$(date +%s)
rc=0
env $(printf '%q ' "${env[@]}") bash $(printf '%q' "$test") || rc=\$?
echo \"# $scenario: exit status \$rc in \$((\$(date +%s) - start)) s on \$(uname -r)\"
exit \$rc" || rc=$?
if [ "$rc" = 77 ]; then
  echo "FAIL: $scenario skipped inside the guest, where every kernel part is there" >&2
  exit 1
fi
exit "$rc"
