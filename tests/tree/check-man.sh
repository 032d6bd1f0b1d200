#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The man pages and --help cannot drift: every command vbmgr --help lists
# has its entry in vbmgr(8), with every option its own --help prints (the
# policy subcommands' too), no entry names a command vbmgr lacks, and every
# option of vblkd --help is in vblkd(8).
# Usage: check-man.sh VBMGR VBLKD DOC_DIR (the .scd sources)
set -euo pipefail
vbmgr=$1 vblkd=$2 doc=$3
export LC_ALL=C.UTF-8 LANGUAGE=
bad=0
say () { echo "$*"; bad=$((bad + 1)); }

# the entry of COMMAND in vbmgr.8.scd: from its "*COMMAND*" line to the
# next entry (a line starting with "*") or section
entry () {
  awk -v c="*$1*" '
    /^# / { sec = ($0 == "# COMMANDS") }
    sec && index($0, c) == 1 { on = 1; print; next }
    on && (/^\*/ || /^#/) { exit }
    on { print }' "$doc/vbmgr.8.scd"
}
options_of () { # the long options in a --help text, one a line
  grep -oE -- '(^|[ [|])--[a-z][a-z-]*' | sed 's/^[ [|]//' | sort -u
}

commands=$("$vbmgr" --help | awk '/^  [a-z]/ { print $1 }')
[ -n "$commands" ] || { echo "vbmgr --help lists no command"; exit 1; }
n=0
for c in $commands; do
  text=$(entry "$c")
  if [ -z "$text" ]; then
    say "vbmgr(8) has no entry for '$c'"
    continue
  fi
  if [ "$c" = policy ]; then
    help=$("$vbmgr" policy --help 2>&1 || true)
  else
    help=$("$vbmgr" "$c" --help | sed -n '/^Application Options:/,$p')
  fi
  for o in $(options_of <<< "$help"); do
    n=$((n + 1))
    grep -qF -- "*$o*" <<< "$text" || say "vbmgr(8), $c: no $o"
  done
done
# no entry for a command vbmgr does not have
for c in $(sed -n '/^# COMMANDS/,/^# /p' "$doc/vbmgr.8.scd" | sed -n 's/^\*\([a-z]*\)\*.*/\1/p'); do
  grep -qx "$c" <<< "$commands" || say "vbmgr(8) describes '$c', which vbmgr --help does not list"
done
for o in $("$vblkd" --help | sed -n '/^Application Options:/,$p' | options_of); do
  n=$((n + 1))
  grep -qF -- "*$o*" "$doc/vblkd.8.scd" || say "vblkd(8): no $o"
done
echo "$(wc -w <<< "$commands") commands, $n options checked, $bad missing"
[ "$bad" -eq 0 ]
