# SPDX-License-Identifier: LGPL-2.1-or-later
# tests/vm/accel.sh, sourced by tests/vm/run (the one place that starts a
# guest): decides qemu's accelerator by evidence. A /dev/kvm that opens is
# not proof that KVM runs a guest (on the development machines the vCPU
# spins in the host kernel and the guest never prints), so KVM is used only
# after a probe boot with it answered.
#
# VB_VM_ACCEL=auto (default) probes, tcg or kvm forces one. The probe boots
# the harness's cached kernel and initramfs with -accel kvm alone, busybox
# as init printing one line, for VB_VM_PROBE_TIMEOUT seconds (default 5;
# under KVM it answers in about one). Its verdict is cached per boot of the
# host (keyed by /proc/sys/kernel/random/boot_id) and per qemu binary, in
# VB_VM_ACCEL_CACHE (default /run/vblk-vm, a tmpfs: a reboot re-probes).
# shellcheck shell=bash

# vb_vm_accel_decide QEMU KERNEL INITRD: sets vb_vm_accel (kvm or tcg),
# vb_vm_accel_why (a sentence for people) and vb_vm_accel_args (qemu's
# -accel options). Returns 2 on a bad VB_VM_ACCEL.
vb_vm_accel_decide () {
  local qemu=$1 kernel=$2 initrd=$3
  case ${VB_VM_ACCEL:-auto} in
    tcg) vb_vm_accel_set tcg "forced by VB_VM_ACCEL=tcg" ;;
    kvm) vb_vm_accel_set kvm "forced by VB_VM_ACCEL=kvm" ;;
    auto) vb_vm_accel_auto "$qemu" "$kernel" "$initrd" ;;
    *)
      echo "tests/vm/run: VB_VM_ACCEL=$VB_VM_ACCEL: expected auto, kvm or tcg" >&2
      return 2 ;;
  esac
}

# shellcheck disable=SC2034,SC2054 # read by tests/vm/run; commas are qemu's
vb_vm_accel_set () {
  vb_vm_accel=$1
  vb_vm_accel_why=$2
  case $1 in
    # no TCG behind it: a KVM that fails must show as a failure, not slowly
    kvm) vb_vm_accel_args=(-accel kvm) ;;
    tcg) vb_vm_accel_args=(-accel tcg,thread=multi) ;;
  esac
}

vb_vm_accel_auto () {
  local qemu=$1 kernel=$2 initrd=$3 hint="VB_VM_ACCEL=kvm or tcg forces one"
  if [ ! -e /dev/kvm ]; then
    vb_vm_accel_set tcg "no /dev/kvm ($hint)"
    return 0
  fi
  if [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
    vb_vm_accel_set tcg "/dev/kvm is not readable and writable by $(id -un) ($hint)"
    return 0
  fi

  local dir file boot_id lockfd key
  local c_boot='' c_accel='' c_why='' c_when=''
  boot_id=$(cat /proc/sys/kernel/random/boot_id)
  dir=${VB_VM_ACCEL_CACHE:-/run/vblk-vm}
  [ "$(id -u)" -eq 0 ] || dir=${VB_VM_ACCEL_CACHE:-${XDG_RUNTIME_DIR:-/tmp}/vblk-vm-$(id -u)}
  # one verdict per qemu binary: a wrapper (VB_VM_QEMU) is probed on its own
  key=$(command -v "$qemu" | sha256sum | cut -c1-16)
  file=$dir/accel-$key
  if ! mkdir -p "$dir" 2> /dev/null || [ ! -w "$dir" ]; then
    vb_vm_accel_probe "$qemu" "$kernel" "$initrd"
    vb_vm_accel_set "$vb_vm_accel" "$vb_vm_accel_why (probed now, not cached: $dir is not writable; $hint)"
    return 0
  fi
  # one probe at a time; the others wait for its verdict
  exec {lockfd}> "$file.lock"
  flock -w $((${VB_VM_PROBE_TIMEOUT:-5} + 30)) "$lockfd" || true
  if [ -s "$file" ]; then
    { read -r c_boot; read -r c_accel; read -r c_when; read -r c_why; } < "$file" || true
  fi
  if [ "$c_boot" = "$boot_id" ] && { [ "$c_accel" = kvm ] || [ "$c_accel" = tcg ]; }; then
    vb_vm_accel_set "$c_accel" "$c_why (probed at $c_when on this boot of the host, cached in $file; $hint)"
  else
    vb_vm_accel_probe "$qemu" "$kernel" "$initrd"
    c_when=$(date '+%F %T')
    printf '%s\n' "$boot_id" "$vb_vm_accel" "$c_when" "$vb_vm_accel_why" > "$file.tmp"
    mv "$file.tmp" "$file"
    vb_vm_accel_set "$vb_vm_accel" "$vb_vm_accel_why (probed now, cached for this boot of the host in $file; $hint)"
  fi
  exec {lockfd}>&-
}

# The probe: the kernel passes what follows "--" to init as its arguments,
# so busybox's sh in the initramfs prints a line the command line does not
# contain (the sum is the guest's) and powers off: no 9p, no host root.
vb_vm_accel_probe () {
  local qemu=$1 kernel=$2 initrd=$3 limit=${VB_VM_PROBE_TIMEOUT:-5} out rc=0 start took
  out=$(mktemp /tmp/vblk-vm-probe.XXXXXX)
  start=$EPOCHREALTIME
  # shellcheck disable=SC2016 # $((6*7)) is the guest's to expand
  timeout -k 2 "$limit" "$qemu" -accel kvm -m 512 -smp 2 -nodefaults -no-reboot \
    -display none -serial stdio -kernel "$kernel" -initrd "$initrd" \
    -append 'console=ttyS0 quiet loglevel=0 panic=-1 rdinit=/bin/busybox -- sh -c "echo vblk-vm-probe-$((6*7)); /bin/busybox poweroff -f"' \
    < /dev/null > "$out" 2>&1 || rc=$?
  took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  if grep -q 'vblk-vm-probe-42' "$out"; then
    vb_vm_accel_set kvm "a probe boot with KVM answered in $took s"
  elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    vb_vm_accel_set tcg "/dev/kvm is present but a probe boot with KVM did not answer within $limit s"
  else
    vb_vm_accel_set tcg "/dev/kvm is present but a probe boot with KVM failed (qemu exit $rc: $(grep -v '^$' "$out" | tail -1 | tr -d '\r'))"
  fi
  rm -f "$out"
}
