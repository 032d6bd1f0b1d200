#!/bin/bash
# Suite 'vm': the harness boots Debian 12's kernel under qemu and the
# guest uses md, device-mapper and nbd for real (guest-kernel-parts.sh).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "SKIP: the VM tests need root" >&2; exit 77; }
command -v "${VB_VM_QEMU:-qemu-system-x86_64}" > /dev/null ||
  { echo "SKIP: no ${VB_VM_QEMU:-qemu-system-x86_64}" >&2; exit 77; }
[ -s "${VB_VM_CACHE:-/var/cache/vblk-vm}/kernel-version" ] ||
  { echo "SKIP: no VM cache (tests/vm/build-cache.sh)" >&2; exit 77; }
exec "$here/run" --timeout 400 bash "$here/guest-kernel-parts.sh"
