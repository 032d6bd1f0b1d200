#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# CI's bounded libFuzzer run: builds the fuzz targets with clang (libFuzzer,
# ASan, UBSan) in a scratch build directory of its own, runs each for
# FUZZ_SECONDS (default 5) over a scratch copy of its seed corpus, and
# fails on whatever libFuzzer reports (a crash, a sanitizer's finding, a
# leak, a timeout), naming the target and keeping the input. Prints the
# runs each target made. Skips (77) where clang cannot link libFuzzer.
# FUZZ_TARGETS (words) picks targets; a long run: FUZZ_SECONDS=600.
#   run-libfuzzer.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: run-libfuzzer.sh SOURCE_DIR}
seconds=${FUZZ_SECONDS:-5}
read -ra targets <<< "${FUZZ_TARGETS:-fuzz-superblock fuzz-md1 fuzz-bitmap fuzz-policy fuzz-state fuzz-dbus fuzz-nbd}"

command -v clang > /dev/null || { echo "SKIP: no clang" >&2; exit 77; }
work=$(mktemp -d /tmp/vblk-libfuzzer.XXXXXX)
keep=0
cleanup () { [ "$keep" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT
echo 'int LLVMFuzzerTestOneInput (const unsigned char *d, unsigned long n) { return 0; }' > "$work/probe.c"
clang -fsanitize=fuzzer,address,undefined -o "$work/probe" "$work/probe.c" 2> /dev/null ||
  { echo "SKIP: clang cannot link -fsanitize=fuzzer,address,undefined (libclang-rt-*-dev)" >&2; exit 77; }

CC=clang meson setup "$work/build" "$src" -Dman=disabled > "$work/setup.log" 2>&1 ||
  { cat "$work/setup.log" >&2; echo "FAIL: meson setup with clang" >&2; exit 1; }
wanted=()
for t in "${targets[@]}"; do wanted+=("tests/fuzz/$t-libfuzzer"); done
ninja -C "$work/build" "${wanted[@]}" > "$work/build.log" 2>&1 ||
  { tail -30 "$work/build.log" >&2; echo "FAIL: building the libFuzzer targets" >&2; exit 1; }

# GSlice's per-thread magazines (GLib 2.74) look leaked to LeakSanitizer
# once a thread that used them ends (the NBD server's workers do):
# plain malloc instead, as GLib's own fuzzing does
export G_SLICE=always-malloc
failed=0
for t in "${targets[@]}"; do
  corpus=$work/corpus-${t#fuzz-}
  cp -r "$src/tests/fuzz/corpus/${t#fuzz-}" "$corpus"
  mkdir -p "$work/found-$t"
  if "$work/build/tests/fuzz/$t-libfuzzer" -max_total_time="$seconds" -timeout=10 \
       -artifact_prefix="$work/found-$t/" "$corpus" > "$work/$t.log" 2>&1; then
    runs=$(grep -o 'Done [0-9]* runs' "$work/$t.log" | tail -1 || true)
    echo "# $t: ${runs:-?} in $seconds s, no finding"
  else
    tail -40 "$work/$t.log" >&2
    echo "FAIL: $t: libFuzzer found something; input kept in $work/found-$t" >&2
    failed=1
    keep=1
  fi
done
exit "$failed"
