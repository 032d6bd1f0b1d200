#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# run-tests.sh: the README's test command. Installs what is missing, builds with
# -Dwerror=true and runs every test: the suites are the folders of tests/
# (unit, fuzz, nbd; as root also integration and torture, with a private bus,
# polkitd, udevd and loop devices, and vm, which boots Debian's kernel). The
# last line of the output is "N passed, N failed" (", N skipped" when some
# were skipped); the exit status is non-zero when anything failed.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$repo/build
testlog=$build/meson-logs/testlog.json

summary () {
  local passed=$1 failed=$2 skipped=$3 line
  line="$passed passed, $failed failed"
  [ "$skipped" -eq 0 ] || line+=", $skipped skipped"
  echo "$line"
}

if [ "$(id -u)" -eq 0 ]; then
  bash "$repo/tools/install-deps.sh"
  # the VM harness's kernel and initramfs, cached outside the checkout
  bash "$repo/tests/vm/build-cache.sh" ||
    echo "run-tests.sh: the VM cache could not be built: the 'vm' suite will skip" >&2
  # and the newer kernel's (Debian 13's backports: ublk zero copy, resize)
  VB_VM_KERNEL=newer bash "$repo/tests/vm/build-cache.sh" ||
    echo "run-tests.sh: the newer kernel's VM cache could not be built: its 'vm' tests will skip" >&2
else
  echo "run-tests.sh: not root: not installing packages; the 'integration', 'torture' and 'vm' suites will skip" >&2
fi

if [ -d "$build/meson-private" ]; then
  setup=(meson setup --reconfigure "$build" "$repo" -Dwerror=true)
else
  setup=(meson setup "$build" "$repo" -Dwerror=true)
fi
if ! "${setup[@]}" || ! ninja -C "$build"; then
  echo "run-tests.sh: the build failed" >&2
  summary 0 1 0
  exit 1
fi

rm -f "$testlog"
rc=0
meson test -C "$build" --print-errorlogs || rc=$?

if [ ! -s "$testlog" ]; then
  echo "run-tests.sh: meson test wrote no $testlog" >&2
  summary 0 1 0
  exit 1
fi
# testlog.json holds one JSON object per test.
read -r passed failed skipped < <(jq -rs '
  [ .[] | .result ] as $r
  | [ ($r | map(select(. == "OK" or . == "EXPECTEDFAIL")) | length),
      ($r | map(select(. == "FAIL" or . == "TIMEOUT" or . == "ERROR"
                       or . == "UNEXPECTEDPASS")) | length),
      ($r | map(select(. == "SKIP")) | length) ]
  | @tsv' "$testlog")

# meson test failing for a reason no test result shows is a failure too.
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
  echo "run-tests.sh: meson test exited with status $rc" >&2
  failed=1
fi
# which accelerator the VM harness used and why (its cached verdict for this
# boot of the host: no second probe), once, next to the result
if [ "$(id -u)" -eq 0 ] && [ -s "${VB_VM_CACHE:-/var/cache/vblk-vm}/kernel-version" ]; then
  bash "$repo/tests/vm/run" --which-accel 2>&1 > /dev/null | sed "s|^tests/vm/run: |run-tests.sh: the VM harness's |" || true
fi
summary "$passed" "$failed" "$skipped"
[ "$failed" -eq 0 ]
