#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Builds the VM harness's cache (outside the checkout): Debian 12's own
# kernel image and modules, unpacked from the linux-image-*-amd64 package
# (not installed), busybox-static, and an initramfs that loads what it
# takes to mount the host's root over 9p with a writable overlay; and
# ublk_drv, which that kernel lacks, built out of tree from Debian's source
# of the same kernel. VB_VM_CACHE (default /var/cache/vblk-vm). Idempotent:
# an existing cache for the same kernel package is kept (and given ublk_drv
# when it has none).
#
# VB_VM_KERNEL=newer builds a second cache in VB_VM_CACHE/newer instead:
# the newest kernel of Debian 13's backports (trixie-backports, fetched
# through an apt configuration of the cache's own; the host's sources are
# not touched), whose ublk_drv has what 6.1's lacks (user copy, zero copy,
# automatic buffer registration, UPDATE_SIZE). Its modules are Debian's
# own, ublk_drv among them: nothing is built.
set -euo pipefail

CACHE=${VB_VM_CACHE:-/var/cache/vblk-vm}
KERNEL=${VB_VM_KERNEL:-debian12}
case $KERNEL in
  debian12) ;;
  newer) CACHE=$CACHE/newer ;;
  *) echo "build-cache: VB_VM_KERNEL=$KERNEL: expected debian12 or newer" >&2; exit 2 ;;
esac
need=(qemu-system-x86_64 cpio dpkg-deb apt-get depmod gzip xz)
for tool in "${need[@]}"; do
  command -v "$tool" > /dev/null || { echo "build-cache: missing $tool (tools/install-deps.sh)" >&2; exit 1; }
done

# the newer kernel's package lists: trixie-backports alone, in the cache
apt_newer=(-o "Dir::Etc::SourceList=$CACHE/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$CACHE/apt/lists" -o "Dir::Cache=$CACHE/apt/cache"
  -o APT::Sandbox::User=root)
apt_lists () {
  if [ "$KERNEL" = newer ]; then
    mkdir -p "$CACHE/apt/lists/partial" "$CACHE/apt/cache/archives/partial"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie-backports main" \
      > "$CACHE/apt/sources.list"
    apt-get "${apt_newer[@]}" update -q > /dev/null 2>&1 || true
  else
    apt-get update -q > /dev/null 2>&1 || true
  fi
}
kernel_package () {
  local opts=()
  [ "$KERNEL" = debian12 ] || opts=("${apt_newer[@]}")
  apt-cache "${opts[@]}" depends linux-image-amd64 2> /dev/null |
    awk '/Depends: linux-image-[0-9]/ {print $2; exit}'
}
# (the backports' kernel moves on and old ones leave the archive: lists
# older than a day are fetched again)
if [ "$KERNEL" = newer ] && { [ ! -s "$CACHE/apt/sources.list" ] ||
  [ -n "$(find "$CACHE/apt/sources.list" -mmin +1440)" ]; }; then
  apt_lists
fi
kpkg=$(kernel_package)
if [ -z "$kpkg" ]; then
  # a new machine (or cache) whose package lists were never fetched
  apt_lists
  kpkg=$(kernel_package)
fi
[ -n "$kpkg" ] || { echo "build-cache: no linux-image-amd64 in the package lists (apt-get update?)" >&2; exit 1; }
kver=${kpkg#linux-image-}

# Debian 12 does not build ublk_drv (CONFIG_BLK_DEV_UBLK unset): built here
# from linux-source of the version the cached image was built from, against
# that image's headers (all unpacked under $CACHE, none installed), into
# the module tree's extra/
ublk_module () {
  local mods="$CACHE/kernel/lib/modules/$kver" build="$CACHE/ublk-build"
  local ko="$mods/extra/ublk_drv.ko" ver mm hdr common p tool out missing=() get=()
  if [ -e "$ko" ] && grep -q '^extra/ublk_drv.ko:' "$mods/modules.dep"; then
    return 0
  fi
  for tool in make gcc-12 xz strip modinfo; do
    command -v "$tool" > /dev/null || missing+=("$tool")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "build-cache: ublk_drv: missing ${missing[*]} (tools/install-deps.sh)" >&2
    return 1
  fi
  # the banner ("... Debian 6.1.192-3 (date)") names the source version
  ver=$(LC_ALL=C grep -aoE -m1 'Debian [0-9][^ ]* \(' "$CACHE/kernel/boot/vmlinuz-$kver" |
    sed -n '1s/^Debian \(.*\) ($/\1/p') || true
  if [ -z "$ver" ]; then
    echo "build-cache: ublk_drv: no Debian version in the banner of vmlinuz-$kver" >&2
    return 1
  fi
  IFS=. read -r mm p _ <<< "$kver"
  mm=$mm.$p
  common=linux-headers-${kver%-*}-common
  local pkgs=("linux-source-$mm" "linux-headers-$kver" "$common" "linux-kbuild-$mm")
  for p in "${pkgs[@]}"; do
    compgen -G "$CACHE/dl/${p}_${ver}_*.deb" > /dev/null || get+=("$p=$ver")
  done
  mkdir -p "$CACHE/dl"
  if [ "${#get[@]}" -gt 0 ] && ! out=$(cd "$CACHE/dl" && apt-get download "${get[@]}" 2>&1); then
    # lists older than the cached kernel: fetched once more
    apt-get update -q > /dev/null 2>&1 || true
    out=$(cd "$CACHE/dl" && apt-get download "${get[@]}" 2>&1) || {
      echo "$out" >&2
      echo "build-cache: ublk_drv: cannot download ${get[*]} (gone from the archive? remove $CACHE to rebuild for the current kernel)" >&2
      return 1
    }
  fi

  rm -rf "$build"
  mkdir -p "$build/src"
  for p in "${pkgs[@]:1}"; do
    dpkg-deb -x "$CACHE/dl/${p}_${ver}_"*.deb "$build/root"
  done
  # lib/modules/*/build and source point at the host's /usr/src: dropped
  find "$build/root" -lname '/*' -delete
  hdr=$build/root/usr/src/linux-headers-$kver
  [ -e "$hdr/Module.symvers" ] || { echo "build-cache: ublk_drv: no Module.symvers in linux-headers-$kver $ver" >&2; return 1; }
  [ -e "$build/root/usr/src/$common/include/uapi/linux/ublk_cmd.h" ] ||
    { echo "build-cache: ublk_drv: no include/uapi/linux/ublk_cmd.h in $common $ver" >&2; return 1; }
  # the flavour's Makefile includes the common one by its absolute path
  sed -i "s|^include /usr/src/|include $build/root/usr/src/|" "$hdr/Makefile"
  grep -q "^include $build/root/usr/src/$common/Makefile\$" "$hdr/Makefile" ||
    { echo "build-cache: ublk_drv: unexpected $hdr/Makefile: $(head -1 "$hdr/Makefile")" >&2; return 1; }
  # only the one file from the 1.3 GB tree (xz -T0: its blocks in parallel)
  dpkg-deb --fsys-tarfile "$CACHE/dl/linux-source-${mm}_${ver}_all.deb" |
    tar -xO "./usr/src/linux-source-$mm.tar.xz" | xz -dc -T0 |
    tar -x -C "$build/src" --strip-components=3 "linux-source-$mm/drivers/block/ublk_drv.c" ||
    { echo "build-cache: ublk_drv: no drivers/block/ublk_drv.c in linux-source-$mm $ver" >&2; return 1; }
  echo 'obj-m := ublk_drv.o' > "$build/src/Kbuild"
  if ! make -C "$hdr" M="$build/src" modules > "$build/make.log" 2>&1; then
    tail -20 "$build/make.log" >&2
    echo "build-cache: ublk_drv: the build failed (all of it in $build/make.log)" >&2
    return 1
  fi
  local vermagic
  vermagic=$(modinfo -F vermagic "$build/src/ublk_drv.ko")
  [ "${vermagic%% *}" = "$kver" ] || { echo "build-cache: ublk_drv: built for '$vermagic', not $kver" >&2; return 1; }
  strip --strip-debug "$build/src/ublk_drv.ko"
  mkdir -p "$mods/extra"
  cp "$build/src/ublk_drv.ko" "$ko.tmp"
  mv "$ko.tmp" "$ko"
  depmod -b "$CACHE/kernel" "$kver"
  grep -q '^extra/ublk_drv.ko:' "$mods/modules.dep" || { echo "build-cache: ublk_drv: depmod did not list $ko" >&2; return 1; }
  rm -rf "$build"
  echo "$CACHE: ublk_drv for $kver built from linux-source-$mm $ver"
}

# ublk_drv is Debian's own in the newer kernel
[ "$KERNEL" = debian12 ] || ublk_module () { :; }

if [ -s "$CACHE/initrd-$kver.img" ] && [ -e "$CACHE/kernel/boot/vmlinuz-$kver" ]; then
  ublk_module
  echo "$CACHE: kernel $kver ready"
  exit 0
fi

# the packages first, into a folder of their own: a download that fails
# leaves the cache that was there as it was
rm -rf "$CACHE/dl.new"
mkdir -p "$CACHE/dl.new"
if [ "$KERNEL" = debian12 ]; then
  pkgs=(busybox-static "$kpkg")
  get=(apt-get download "${pkgs[@]}")
else
  # Debian 13 splits the image: the kernel in linux-binary, the modules in
  # linux-modules, both under /usr/lib/modules/KVER (moved below to where
  # the guest's bind mount and the host's depmod look)
  pkgs=("linux-binary-$kver" "linux-modules-$kver" "linux-base-$kver")
  get=(apt-get "${apt_newer[@]}" download "${pkgs[@]}")
fi
(cd "$CACHE/dl.new" && "${get[@]}" > /dev/null 2>&1) ||
  { rm -rf "$CACHE/dl.new"; echo "build-cache: cannot download ${pkgs[*]}" >&2; exit 1; }
[ "$KERNEL" = debian12 ] || (cd "$CACHE/dl.new" && apt-get download busybox-static > /dev/null 2>&1) ||
  { rm -rf "$CACHE/dl.new"; echo "build-cache: cannot download busybox-static" >&2; exit 1; }
rm -rf "$CACHE/dl" "$CACHE/kernel" "$CACHE/busybox" "$CACHE/initrd" "$CACHE/ublk-build"
mv "$CACHE/dl.new" "$CACHE/dl"
dpkg-deb -x "$CACHE"/dl/busybox-static_*.deb "$CACHE/busybox"
mods="$CACHE/kernel/lib/modules/$kver"
if [ "$KERNEL" = debian12 ]; then
  dpkg-deb -x "$CACHE"/dl/linux-image-*.deb "$CACHE/kernel"
else
  for deb in "$CACHE"/dl/linux-{binary,modules,base}-*.deb; do
    dpkg-deb -x "$deb" "$CACHE/kernel"
  done
  mkdir -p "$CACHE/kernel/lib/modules" "$CACHE/kernel/boot"
  mv "$CACHE/kernel/usr/lib/modules/$kver" "$mods"
  cp "$mods/vmlinuz" "$CACHE/kernel/boot/vmlinuz-$kver"
fi
# the package leaves modules.dep to its postinst: made here, for the
# initramfs's order and the guest's modprobe
depmod -b "$CACHE/kernel" "$kver"
[ -e "$mods/modules.dep" ] || { echo "build-cache: depmod wrote no modules.dep for $kver" >&2; exit 1; }

# what the initramfs loads: virtio, 9p and overlayfs with their dependencies,
# in an order where each module comes after what it depends on
declare -A seen=()
order=()
add_module () {
  local name=$1 path dep
  path=$(awk -F: -v m="/$name.ko" '{ p = $1; sub(/\.xz$/, "", p); if (substr(p, length(p) - length(m) + 1) == m) { print $1; exit } }' "$mods/modules.dep")
  [ -n "$path" ] || return 0 # built in
  [ -z "${seen[$path]:-}" ] || return 0
  seen[$path]=1
  for dep in $(awk -F: -v p="$path" '$1 == p { print $2 }' "$mods/modules.dep"); do
    dep=$(basename "${dep%.xz}"); add_module "${dep%.ko}"
  done
  order+=("$path")
}
for m in virtio virtio_ring virtio_pci 9pnet 9pnet_virtio 9p overlay; do add_module "$m"; done

root="$CACHE/initrd"
mkdir -p "$root"/{bin,dev,proc,sys,lower,upper,newroot,modules}
cp "$CACHE/busybox/bin/busybox" "$root/bin/busybox"
: > "$root/modules/order"
for path in "${order[@]}"; do
  # busybox's insmod takes them uncompressed
  base=$(basename "$path" .xz)
  case $path in
    *.xz) xz -dc "$mods/$path" > "$root/modules/$base" ;;
    *) cp "$mods/$path" "$root/modules/" ;;
  esac
  echo "$base" >> "$root/modules/order"
done
cat > "$root/init" <<'INIT'
#!/bin/busybox sh
# Stage 1: the host's root over 9p, read-only, under a tmpfs overlay; then
# stage 2 (the harness's script in the results share) as the new root's init.
/bin/busybox mkdir -p /usr/bin /sbin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules/order); do insmod "/modules/$m" || echo "stage 1: insmod $m failed"; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /lower || {
  echo "stage 1: cannot mount the host root"; poweroff -f; }
mount -t tmpfs -o size=75% upper /upper
mkdir -p /upper/u /upper/w
mount -t overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w overlay /newroot || {
  echo "stage 1: cannot mount the overlay"; poweroff -f; }
mkdir -p /newroot/vm-results
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 results /newroot/vm-results || {
  echo "stage 1: cannot mount the results share"; poweroff -f; }
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /bin/bash /vm-results/stage2
INIT
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$CACHE/initrd-$kver.img.tmp"
mv "$CACHE/initrd-$kver.img.tmp" "$CACHE/initrd-$kver.img"
echo "$kver" > "$CACHE/kernel-version"
echo "$CACHE: kernel $kver, initramfs with ${#order[@]} modules"
ublk_module
