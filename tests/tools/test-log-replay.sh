#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# vb-log-replay on logs written here byte by byte in dm-log-writes' format
# (no root, no kernel): the listing, a replay in two parts equal to the
# expected image, a replay that stops before a malformed entry, and every
# malformed log or request refused with what is wrong.
set -euo pipefail
tool=${1:?usage: test-log-replay.sh VB_LOG_REPLAY}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail () { echo "FAIL: $*" >&2; exit 1; }

le () { # le BYTES VALUE: VALUE little-endian in BYTES bytes
  local i v=$2
  for ((i = 0; i < $1; i++)); do
    # shellcheck disable=SC2059 # the byte is the format, as an escape
    printf "\\x$(printf %02x $((v & 255)))"
    v=$((v >> 8))
  done
}
pad () { head -c "$1" /dev/zero; }
fill () { head -c "$2" /dev/zero | tr '\0' "$1"; }
# super MAGIC VERSION ENTRIES SECTORSIZE
super () { le 8 "$1"; le 8 "$2"; le 8 "$3"; le 4 "$4"; pad $((512 - 28)); }
# entry SECTOR SECTORS FLAGS [MARK]
entry () {
  local mark=${4:-}
  le 8 "$1"; le 8 "$2"; le 8 "$3"; le 8 "${#mark}"
  printf '%s' "$mark"
  pad $((512 - 32 - ${#mark}))
}
magic=$((0x6a736677736872))
body () {
  entry 2 1 0; fill A 512           # 0: a write
  entry 0 0 1                       # 1: an empty flush
  entry 0 0 8 s1                    # 2: a mark
  entry 0 2 2; fill B 1024          # 3: a FUA write
  entry 1 1 4                       # 4: a discard (no data)
  entry 3 1 16; fill C 512          # 5: a metadata write
}
{ super "$magic" 1 6 512; body; } > "$T/log"

"$tool" list "$T/log" > "$T/list"
cat > "$T/want" << 'EOF'
# sectorsize 512 entries 6
0 - 2 1
1 F 0 0
2 M 0 0 s1
3 U 0 2
4 D 1 1
5 X 3 1
EOF
diff -u "$T/want" "$T/list" || fail "the listing"

fill z 2048 > "$T/img"
"$tool" replay "$T/log" "$T/img" 0 2
{ fill z 1024; fill A 512; fill z 512; } | cmp - "$T/img" || fail "the image after entries 0-2"
"$tool" replay "$T/log" "$T/img" 3 5
{ fill B 512; pad 512; fill A 512; fill C 512; } | cmp - "$T/img" || fail "the image after entries 3-5"

# a replay reads nothing after its last entry: a malformed one there is no matter
{ super "$magic" 1 2 512; entry 0 1 0; fill D 512; entry 0 0 64; } > "$T/tail"
fill z 2048 > "$T/img2"
"$tool" replay "$T/tail" "$T/img2" 0 0 || fail "a replay that stops before a malformed entry"
{ fill D 512; fill z 1536; } | cmp - "$T/img2" || fail "the image after the replay before a malformed entry"

# expect_refused WHAT WORDS -- ARGS: exit status 1 and WORDS in the message
expect_refused () {
  local what=$1 words=$2 rc=0
  shift 3
  "$tool" "$@" > /dev/null 2> "$T/err" || rc=$?
  [ "$rc" = 1 ] || fail "$what: exit status $rc, not 1"
  grep -qF -- "$words" "$T/err" || fail "$what: '$(cat "$T/err")' does not say '$words'"
}
{ super 12345 1 6 512; body; } > "$T/bad"
expect_refused "a wrong magic" "not a dm-log-writes log" -- list "$T/bad"
{ super "$magic" 2 6 512; body; } > "$T/bad"
expect_refused "version 2" "log version 2" -- list "$T/bad"
{ super "$magic" 1 6 1000; body; } > "$T/bad"
expect_refused "a sector size of 1000" "sector size 1000" -- list "$T/bad"
{ super "$magic" 1 7 512; body; } > "$T/bad"
expect_refused "more entries than the log holds" "the log ends inside an entry's header" -- list "$T/bad"
{ super "$magic" 1 2 512; entry 2 1 64; fill A 512; } > "$T/bad"
expect_refused "an unknown flag" "entry 0: unknown flags 0x40" -- list "$T/bad"
{ super "$magic" 1 1 512; entry 0 1 8 s2; } > "$T/bad"
expect_refused "a mark with data" "entry 0: a mark with 1 sectors" -- list "$T/bad"
{ super "$magic" 1 1 512; le 8 0; le 8 0; le 8 0; le 8 5; pad 480; } > "$T/bad"
expect_refused "text on a write" "entry 0: 5 bytes of text" -- list "$T/bad"
{ super "$magic" 1 1 512; entry 2 2 0; fill A 600; } > "$T/bad"
expect_refused "a short write's data" "the log ends inside an entry's data" -- replay "$T/bad" "$T/img" 0 0
{ super "$magic" 1 1 512; entry 4 1 0; fill A 512; } > "$T/bad"
expect_refused "a write past the end" "entry 0: bytes 2048+512 are past the end" -- replay "$T/bad" "$T/img" 0 0
expect_refused "FROM after TO" "FROM 3 is after TO 1" -- replay "$T/log" "$T/img" 3 1
expect_refused "the malformed entry, once asked for" "entry 1: unknown flags 0x40" -- replay "$T/tail" "$T/img2" 0 1
expect_refused "TO past the log" "entry 6 asked for, the log has 6" -- replay "$T/log" "$T/img" 0 6
expect_refused "a TO that is no number" "TO 'x'" -- replay "$T/log" "$T/img" 0 x
# nothing of a refused replay was written
{ fill B 512; pad 512; fill A 512; fill C 512; } | cmp - "$T/img" || fail "a refused replay wrote"
echo "vb-log-replay: listing, replay and 13 malformed inputs checked"
