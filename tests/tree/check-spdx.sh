#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Every source file of the tree says its licence (the one meson.build
# declares, whose text is COPYING) in an SPDX line within its first five
# lines. Not: documentation (*.md), JSON (no comments), the generated
# message template, the licence itself, the fuzzers' seed inputs, and
# debian/changelog, copyright (its own licence stanza) and source/format.
# Usage: check-spdx.sh SOURCE_ROOT
set -euo pipefail
cd "$1"
tag="SPDX-License-Identifier: $(sed -n "s/^ *license : '\(.*\)',/\1/p" meson.build)"
[ "$tag" != "SPDX-License-Identifier: " ] || { echo "no licence in meson.build" >&2; exit 1; }
grep -q "GNU LESSER GENERAL PUBLIC LICENSE" COPYING || { echo "COPYING is not the LGPL" >&2; exit 1; }
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  list=$(git ls-files)
else
  list=$(find . -type f ! -path './.git/*' ! -path '*/meson-private/*' ! -path './build*' | sed 's|^\./||')
fi
missing=0 n=0
while IFS= read -r f; do
  case $f in
    *.md | *.json | *.pot | COPYING | tests/fuzz/corpus/*) continue ;;
    # Debian's formats without comments, or stating the licence themselves
    debian/changelog | debian/copyright | debian/source/format) continue ;;
  esac
  [ -f "$f" ] || continue
  n=$((n + 1))
  if ! head -n 5 "$f" | grep -qF "$tag"; then
    echo "no '$tag' line: $f"
    missing=$((missing + 1))
  fi
done <<< "$list"
echo "$n files, $missing without the SPDX line"
[ "$missing" -eq 0 ]
