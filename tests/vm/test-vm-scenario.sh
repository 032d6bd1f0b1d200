#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Suite 'vm': kernel scenarios in one guest (tests/vm/run), on Debian 12's
# kernel (6.1), one after another, each named with its exit status and time.
#   test-vm-scenario.sh SCENARIO...
#   kernel-parts   md, dm, nbd and ublk_drv used for real with mdadm and
#                  dmsetup (guest-kernel-parts.sh; first in its guest: it
#                  checks that no ublk device is there yet)
#   test-NAME      tests/integration/test-NAME.sh in the guest
# The groups are tests/vm/meson.build's. A boot costs about 7 s under TCG;
# scenarios share a guest as the integration tests share the host, each
# undoing what it made. Each has VB_VM_SCENARIO_TIMEOUT (600 s) inside the
# guest (and 120 s more for its cleanup after the TERM), the guest that and
# three minutes per scenario: a hang costs its own time, not the run's. The others run after a failure; the test fails if
# any did. Inside the guest every kernel part is there, so a test that
# skips (77) fails here. VB_VM_KERNEL=newer: the guest runs the newer
# kernel (build-cache.sh's, Debian 13's backports) instead. For a long run
# by hand, VB_VM_SCENARIO_TIMEOUT and meson test -t N.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ "$#" -gt 0 ] || { echo "usage: test-vm-scenario.sh kernel-parts|test-NAME..." >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: the VM tests need root" >&2; exit 77; }
command -v "${VB_VM_QEMU:-qemu-system-x86_64}" > /dev/null ||
  { echo "SKIP: no ${VB_VM_QEMU:-qemu-system-x86_64}" >&2; exit 77; }
if [ "${VB_VM_KERNEL:-debian12}" = newer ]; then
  export VB_VM_CACHE=${VB_VM_CACHE:-/var/cache/vblk-vm}/newer
fi
[ -s "${VB_VM_CACHE:-/var/cache/vblk-vm}/kernel-version" ] ||
  { echo "SKIP: no VM cache in ${VB_VM_CACHE:-/var/cache/vblk-vm} (VB_VM_KERNEL=${VB_VM_KERNEL:-debian12} tests/vm/build-cache.sh)" >&2; exit 77; }

each=${VB_VM_SCENARIO_TIMEOUT:-600}
: "${VBLKD:?}" "${VB_SRCDIR:?}"
cmds=()
for scenario in "$@"; do
  if [ "$scenario" = kernel-parts ]; then
    cmds+=("$scenario $here/guest-kernel-parts.sh")
    continue
  fi
  test=$VB_SRCDIR/tests/integration/$scenario.sh
  [ -f "$test" ] || { echo "FAIL: no scenario '$scenario' ($test)" >&2; exit 1; }
  cmds+=("$scenario $test")
done
# what meson gives the integration tests, handed on into the guest
env=()
for v in VBLKD VBMGR VB_SRCDIR VB_REFMODEL VB_NBD_FILE_SERVER VB_UBLK_CTL VB_FUSE_STALL VB_LOG_REPLAY; do
  env+=("$v=${!v:-}")
done
# and the settings of test-power-loss, where the caller gave them
for v in VB_PL_CUTS VB_PL_STEPS VB_PL_SEED VB_PL_BACKENDS; do
  [ -z "${!v:-}" ] || env+=("$v=${!v}")
done
modules="loop fuse dm-mod raid0 raid1 raid10 dm-flakey dm-log-writes nbd"
"$here/run" --timeout $(( (each + 180) * $# )) "
for m in $modules; do modprobe \$m || { echo \"FAIL: modprobe \$m\" >&2; exit 1; }; done
failed=
while read -r name script; do
  start=\$(date +%s)
  rc=0
  env $(printf '%q ' "${env[@]}") timeout -k 120 $each bash \"\$script\" < /dev/null || rc=\$?
  echo \"# \$name: exit status \$rc in \$((\$(date +%s) - start)) s on \$(uname -r)\"
  case \$rc in
    0) ;;
    77) echo \"FAIL: \$name skipped inside the guest, where every kernel part is there\" >&2
        failed+=\" \$name\" ;;
    124) echo \"FAIL: \$name did not end within $each s\" >&2; failed+=\" \$name\" ;;
    *) failed+=\" \$name\" ;;
  esac
done << 'SCENARIOS'
$(printf '%s\n' "${cmds[@]}")
SCENARIOS
[ -z \"\$failed\" ] || { echo \"FAIL:\$failed\" >&2; exit 1; }"
