#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# install-deps.sh: install every Debian 12 package vblk needs to build, run its
# demo and run its tests. Idempotent: apt-get runs only when something is missing.
set -euo pipefail

packages=(
  # build
  gcc libc6-dev pkgconf meson ninja-build gettext
  # build: the man pages (doc/*.scd)
  scdoc
  libglib2.0-dev libglib2.0-dev-bin libjson-glib-dev libpolkit-gobject-1-dev
  libudev-dev libmount-dev libblockdev-dev libblockdev-loop-dev liburing-dev libfuse3-dev
  libnbd-dev libdevmapper-dev libgnutls28-dev
  # run: system bus, polkit, udev, gdbus; systemd (systemd-analyze in the tests, and the
  # package's build dependency for systemd.pc)
  dbus dbus-daemon dbus-system-bus-common polkitd udev libglib2.0-bin systemd
  # tests: loop devices, filesystems, JSON, process control
  util-linux mount fdisk e2fsprogs xfsprogs kmod jq diffutils coreutils fuse3
  # tests: real clients nobody here wrote
  fio qemu-utils libnbd-bin python3
  # tests: TLS keys and certificates for NBD exports (psktool, certtool)
  gnutls-bin
  # tests: D-Bus clients standing in for desktop tools (/usr/bin/python3), UDisks itself
  python3-gi udisks2
  # tests: the spec's JSON Schema (data/schema) checked against specs
  python3-jsonschema
  # tests: meson test --setup valgrind (tests/valgrind.sh)
  valgrind
  # tests: the VM harness (tests/vm) and the kernel parts used inside it
  qemu-system-x86 cpio mdadm dmsetup
  # tests: initramfs images made by vblk's own initramfs-tools hook and dracut
  # module (data/initramfs-tools, data/dracut); dracut-core, not dracut, which
  # would replace initramfs-tools
  initramfs-tools busybox dracut-core
  # tests: ublk_drv for the VM's kernel, built out of tree (objtool needs libelf1)
  make gcc-12 binutils xz-utils libelf1
  # tests: the Debian package built from the tree (debian/), installed, checked
  debhelper dpkg-dev fakeroot lintian
  # tests: German messages (po/de.po) under LANG=de_DE.UTF-8
  locales
  # tests: the libFuzzer targets (tests/fuzz/run-libfuzzer.sh: clang with
  # libFuzzer, ASan and UBSan)
  clang libclang-rt-14-dev
)

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps.sh: run as root (sudo bash tools/install-deps.sh)" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2> /dev/null || true)
  [ "$status" = installed ] || missing+=("$p")
done

# the German locale test-translation.sh runs vbmgr and vblkd under
vblk_locale () {
  if ! locale -a 2> /dev/null | grep -qix 'de_DE.utf8'; then
    sed -i 's/^# *de_DE.UTF-8 UTF-8/de_DE.UTF-8 UTF-8/' /etc/locale.gen
    grep -q '^de_DE.UTF-8 UTF-8' /etc/locale.gen || echo 'de_DE.UTF-8 UTF-8' >> /etc/locale.gen
    locale-gen > /dev/null
  fi
}

if [ "${#missing[@]}" -eq 0 ]; then
  vblk_locale
  echo "install-deps.sh: all ${#packages[@]} packages are installed"
  exit 0
fi

echo "install-deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
vblk_locale
