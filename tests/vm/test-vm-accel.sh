#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Suite 'vm': the harness picks its accelerator by evidence (tests/vm/accel.sh).
# A qemu wrapper (VB_VM_QEMU) plays the development machines' broken KVM (with
# -accel kvm it hangs and the guest never prints); another plays a working
# one (KVM swapped for TCG). Checks: auto falls back to TCG and boots, the
# verdict is cached per boot of the host and re-probed after a reboot,
# a probe that answers gives KVM, forced kvm times out within its own
# timeout naming kvm, forced tcg boots.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "SKIP: the VM tests need root" >&2; exit 77; }
command -v qemu-system-x86_64 > /dev/null || { echo "SKIP: no qemu-system-x86_64" >&2; exit 77; }
[ -s "${VB_VM_CACHE:-/var/cache/vblk-vm}/kernel-version" ] ||
  { echo "SKIP: no VM cache (tests/vm/build-cache.sh)" >&2; exit 77; }
fail () { echo "FAIL: $*" >&2; exit 1; }
log () { echo "# $*"; }

work=$(mktemp -d /tmp/vblk-vm-accel.XXXXXX)
trap 'rm -rf "$work"' EXIT
real=$(command -v qemu-system-x86_64)
cat > "$work/qemu-kvm-hangs" << EOF
#!/bin/bash
echo "\$*" >> "$work/hangs.calls"
for a in "\$@"; do
  case \$a in kvm|kvm,*) exec sleep 3600 ;; esac
done
exec $real "\$@"
EOF
cat > "$work/qemu-kvm-works" << EOF
#!/bin/bash
echo "\$*" >> "$work/works.calls"
exec $real "\${@/#kvm/tcg}"
EOF
chmod +x "$work"/qemu-*
export VB_VM_ACCEL_CACHE=$work/cache
unset VB_VM_ACCEL VB_VM_PROBE_TIMEOUT
hangs=$work/qemu-kvm-hangs
calls () { grep -c . "$work/$1.calls" 2> /dev/null || echo 0; }

# run NAME SECONDS-AT-MOST ENV... -- ARGS...: tests/vm/run under env,
# stdout to NAME.out, stderr to NAME.err, status to $rc, bounded in time
run () {
  local name=$1 most=$2 env=() start took
  shift 2
  while [ "$1" != -- ]; do env+=("$1"); shift; done
  shift
  start=$SECONDS
  rc=0
  env "${env[@]}" "$here/run" "$@" > "$work/$name.out" 2> "$work/$name.err" || rc=$?
  took=$((SECONDS - start))
  log "$name: status $rc in $took s: $(grep 'accelerator\|did not finish' "$work/$name.err" | tail -1)"
  [ "$took" -le "$most" ] || fail "$name took $took s, more than $most s"
}
accel_line () { grep '^tests/vm/run: accelerator ' "$work/$1.err" || fail "$1: no decision printed: $(cat "$work/$1.err")"; }

log "auto, KVM hangs: the probe times out and TCG is chosen"
run probe 15 VB_VM_QEMU="$hangs" -- --which-accel
[ "$rc" = 0 ] && [ "$(cat "$work/probe.out")" = tcg ] || fail "probe: status $rc, chose '$(cat "$work/probe.out")'"
accel_line probe | grep -q 'accelerator tcg: .*probe boot with KVM did not answer within 5 s (probed now' ||
  fail "probe: $(accel_line probe)"
[ "$(calls hangs)" = 1 ] || fail "probe: $(calls hangs) qemu runs, expected 1"
[ "$(grep -c '^tests/vm/run: accelerator' "$work/probe.err")" = 1 ] || fail "probe: the decision printed more than once"

log "auto again: the cached verdict, no second probe"
run cached 3 VB_VM_QEMU="$hangs" -- --which-accel
[ "$(cat "$work/cached.out")" = tcg ] || fail "cached: chose '$(cat "$work/cached.out")'"
accel_line cached | grep -q 'probed at .* on this boot of the host, cached in' || fail "cached: $(accel_line cached)"
[ "$(calls hangs)" = 1 ] || fail "cached: qemu ran again"

log "a verdict from another boot of the host is not trusted: probed again"
for file in "$work"/cache/accel-*; do [[ $file == *.lock ]] || break; done
sed -i '1s/.*/00000000-0000-0000-0000-000000000000/; 2s/.*/kvm/' "$file"
run reboot 15 VB_VM_QEMU="$hangs" -- --which-accel
[ "$(cat "$work/reboot.out")" = tcg ] || fail "reboot: chose '$(cat "$work/reboot.out")' from a stale cache"
[ "$(calls hangs)" = 2 ] || fail "reboot: no new probe"
[ "$(head -1 "$file")" = "$(cat /proc/sys/kernel/random/boot_id)" ] || fail "reboot: cache not keyed to this boot"

log "auto, KVM works: the probe answers and KVM is chosen"
run works 40 VB_VM_QEMU="$work/qemu-kvm-works" VB_VM_PROBE_TIMEOUT=30 -- --which-accel
[ "$(cat "$work/works.out")" = kvm ] || fail "works: chose '$(cat "$work/works.out")': $(cat "$work/works.err")"
accel_line works | grep -q 'accelerator kvm: a probe boot with KVM answered in' || fail "works: $(accel_line works)"

log "auto, KVM hangs: a guest boots on TCG"
run auto-boot 120 VB_VM_QEMU="$hangs" -- --timeout 90 'echo answer-$((6*7)) from $(uname -r)'
[ "$rc" = 0 ] || fail "auto-boot: status $rc: $(cat "$work/auto-boot.err")"
grep -q '^answer-42 from ' "$work/auto-boot.out" || fail "auto-boot: no answer: $(cat "$work/auto-boot.out")"
accel_line auto-boot | grep -q 'accelerator tcg' || fail "auto-boot: $(accel_line auto-boot)"
tail -1 "$work/hangs.calls" | grep -q -- '-accel tcg' || fail "auto-boot: qemu ran with $(tail -1 "$work/hangs.calls")"

log "forced kvm, KVM hangs: the guest's own timeout, naming kvm"
before=$(calls hangs)
run forced-kvm 20 VB_VM_QEMU="$hangs" VB_VM_ACCEL=kvm -- --timeout 8 true
[ "$rc" = 124 ] || fail "forced-kvm: status $rc, expected 124: $(cat "$work/forced-kvm.err")"
grep -q 'did not finish within 8 s (accelerator kvm: forced by VB_VM_ACCEL=kvm)' "$work/forced-kvm.err" ||
  fail "forced-kvm: the message does not name kvm: $(cat "$work/forced-kvm.err")"
[ "$(calls hangs)" = $((before + 1)) ] || fail "forced-kvm: a probe ran although kvm was forced"

log "forced tcg: boots"
run forced-tcg 120 VB_VM_QEMU="$hangs" VB_VM_ACCEL=tcg -- --timeout 90 'echo answer-$((6*7))'
[ "$rc" = 0 ] && grep -q '^answer-42$' "$work/forced-tcg.out" || fail "forced-tcg: status $rc: $(cat "$work/forced-tcg.err")"
accel_line forced-tcg | grep -q 'accelerator tcg: forced by VB_VM_ACCEL=tcg' || fail "forced-tcg: $(accel_line forced-tcg)"

log "a bad VB_VM_ACCEL is refused"
run bad 3 VB_VM_ACCEL=fast -- --which-accel
[ "$rc" = 2 ] && grep -q 'VB_VM_ACCEL=fast: expected auto, kvm or tcg' "$work/bad.err" || fail "bad: status $rc"
log "the accelerator is decided by evidence and forced both ways"
