#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# vbmgr and vblkd speak German with LC_ALL=de_DE.UTF-8 (po/de.po): a usage
# error, vbmgr's own refusal, vblkd's refusal (vblkd answers in its own
# locale, as a system service does), a plural form, vblkd's option help.
# The build's catalogue is put where the binaries look (their LOCALEDIR) in
# a private mount namespace, so the host's files stay as they are (a
# directory made for it is removed).
if [ -z "${VB_IN_NS:-}" ]; then
  exec unshare --mount --propagation private env VB_IN_NS=1 bash "$0" "$@"
fi
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [ -z "${VB_LOCALEDIR:-}" ] || [ -z "${VB_MO:-}" ]; then
  vb_fail "VB_LOCALEDIR and VB_MO are not set (meson test sets them)"
fi
locale -a | grep -qix 'de_DE.utf8' || vb_fail "no de_DE.UTF-8 locale (tools/install-deps.sh generates it)"
# where no catalogue was ever installed (/usr/local/share/locale on a fresh
# machine) the directory is made for the mount and removed afterwards
made=$VB_LOCALEDIR
while [ ! -e "$(dirname "$made")" ]; do made=$(dirname "$made"); done
if [ -e "$made" ]; then
  made=
else
  mkdir -p "$VB_LOCALEDIR"
fi
vb_on_cleanup "umount '$VB_LOCALEDIR'; [ -z '$made' ] || find '$made' -depth -type d -empty -delete"
mkdir -p "$T/locale/de/LC_MESSAGES"
cp "$VB_MO" "$T/locale/de/LC_MESSAGES/vblk.mo"
mount --bind "$T/locale" "$VB_LOCALEDIR"

vb_setup
# (vblkd answers in its own locale: a German system)
vb_start_daemon LC_ALL=de_DE.UTF-8
de () { LC_ALL=de_DE.UTF-8 LANGUAGE='' "$VBMGR" "$@"; }

vb_log "a usage error"
rc=0
de create > "$T/out" 2> "$T/err" || rc=$?
vb_assert_eq 2 "$rc" "exit status of a usage error"
vb_assert_contains "$(cat "$T/err")" "vbmgr: usage: create: Gerätename fehlt" "the usage error"
vb_assert_contains "$(cat "$T/err")" "'vbmgr create --help' zeigt seinen Aufruf." "the usage hint"
vb_assert_contains "$(de --help)" "Befehle:" "vbmgr --help"
vb_assert_contains "$(de --help)" "Die Geräte auflisten" "a command's summary"

vb_log "vbmgr's own refusal, and vblkd's"
rc=0
de show nosuch 2> "$T/err" || rc=$?
vb_assert_eq 1 "$rc" "exit status of a refusal"
vb_assert_eq "vbmgr: show nosuch: NotFound: kein Gerät namens 'nosuch'" "$(cat "$T/err")" "vbmgr's refusal"
vb_mkimg "$T/a.img" 8M
rc=0
de create x --driver nosuchdriver "$T/a.img" 2> "$T/err" || rc=$?
vb_assert_eq 1 "$rc" "exit status of vblkd's refusal"
vb_assert_contains "$(cat "$T/err")" "InvalidArgument: " "vblkd's refusal"
vb_assert_contains "$(cat "$T/err")" "Treiber 'nosuchdriver': unbekannt (bekannt: " "vblkd's refusal in German"

vb_log "a plural form (ngettext)"
mkdir -p "$T/policy"
printf '[rule a]\naction=ignore\n' > "$T/policy/10-a.rules"
vb_stop_daemon
VB_DAEMON_ARGS="--policy-dir $T/policy" vb_start_daemon LC_ALL=de_DE.UTF-8
vb_assert_contains "$(de policy reload)" "Neu geladen: 1 Regel aus" "one rule"
printf '[rule b]\naction=ignore\n' > "$T/policy/20-b.rules"
vb_assert_contains "$(de policy reload)" "Neu geladen: 2 Regeln aus" "two rules"

vb_log "vblkd's option help"
vb_assert_contains "$(LC_ALL=de_DE.UTF-8 "$VBLKD" --help)" "Verzeichnis des Sollzustands (Vorgabe " "vblkd --help"
vb_assert_contains "$(LC_ALL=C.UTF-8 "$VBMGR" show nosuch 2>&1 || true)" "no device named 'nosuch'" \
  "the same refusal in the C locale"
vb_stop_daemon
