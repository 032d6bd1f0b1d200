#!/bin/bash
# Builds the VM harness's cache (outside the checkout): Debian 12's own
# kernel image and modules, unpacked from the linux-image-*-amd64 package
# (not installed), busybox-static, and an initramfs that loads what it
# takes to mount the host's root over 9p with a writable overlay.
# VB_VM_CACHE (default /var/cache/vblk-vm). Idempotent: an existing cache
# for the same kernel package is kept.
set -euo pipefail

CACHE=${VB_VM_CACHE:-/var/cache/vblk-vm}
need=(qemu-system-x86_64 cpio dpkg-deb apt-get depmod gzip)
for tool in "${need[@]}"; do
  command -v "$tool" > /dev/null || { echo "build-cache: missing $tool (tools/install-deps.sh)" >&2; exit 1; }
done

kernel_package () {
  apt-cache depends linux-image-amd64 2> /dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'
}
kpkg=$(kernel_package)
if [ -z "$kpkg" ]; then
  # a new machine whose package lists were never fetched
  apt-get update -q > /dev/null 2>&1 || true
  kpkg=$(kernel_package)
fi
[ -n "$kpkg" ] || { echo "build-cache: no linux-image-amd64 in the package lists (apt-get update?)" >&2; exit 1; }
kver=${kpkg#linux-image-}
if [ -s "$CACHE/initrd-$kver.img" ] && [ -e "$CACHE/kernel/boot/vmlinuz-$kver" ]; then
  echo "$CACHE: kernel $kver ready"
  exit 0
fi

mkdir -p "$CACHE/dl"
rm -rf "$CACHE/kernel" "$CACHE/busybox" "$CACHE/initrd"
(cd "$CACHE/dl" && rm -f ./*.deb && apt-get download "$kpkg" busybox-static 2> /dev/null)
dpkg-deb -x "$CACHE"/dl/linux-image-*.deb "$CACHE/kernel"
dpkg-deb -x "$CACHE"/dl/busybox-static_*.deb "$CACHE/busybox"
mods="$CACHE/kernel/lib/modules/$kver"
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
  path=$(awk -F: -v m="/$name.ko" '{ if (substr($1, length($1) - length(m) + 1) == m) { print $1; exit } }' "$mods/modules.dep")
  [ -n "$path" ] || return 0 # built in
  [ -z "${seen[$path]:-}" ] || return 0
  seen[$path]=1
  for dep in $(awk -F: -v p="$path" '$1 == p { print $2 }' "$mods/modules.dep"); do
    add_module "$(basename "$dep" .ko)"
  done
  order+=("$path")
}
for m in virtio virtio_ring virtio_pci 9pnet 9pnet_virtio 9p overlay; do add_module "$m"; done

root="$CACHE/initrd"
mkdir -p "$root"/{bin,dev,proc,sys,lower,upper,newroot,modules}
cp "$CACHE/busybox/bin/busybox" "$root/bin/busybox"
: > "$root/modules/order"
for path in "${order[@]}"; do
  cp "$mods/$path" "$root/modules/"
  basename "$path" >> "$root/modules/order"
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
