#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The 'valgrind' test setup's wrapper (tests/meson.build):
#   meson test -C BUILD --setup valgrind --suite unit --suite nbd
# A compiled test runs under valgrind itself. A script test (bash, python3)
# runs as it is, with VB_VALGRIND holding the valgrind command line, so that
# it starts the programs it tests under valgrind (tests/nbd/lib.sh) rather
# than valgrind checking the shell. Any error, or a leak valgrind calls
# definite or indirect, makes the program exit with status 99 and the test fail.
set -euo pipefail
# one line: scripts split it on blanks
VB_VALGRIND="valgrind --quiet --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect"
VB_VALGRIND+=" --errors-for-leak-kinds=definite,indirect --num-callers=30"
[ ! -e /usr/share/glib-2.0/valgrind/glib.supp ] ||
  VB_VALGRIND+=" --suppressions=/usr/share/glib-2.0/valgrind/glib.supp"
export VB_VALGRIND
# GLib's own caches are kept until exit on purpose: let them be plain malloc
export G_SLICE=always-malloc G_DEBUG=gc-friendly
case $(basename "$1") in
  bash | sh | python3 | python3.*) exec "$@" ;;
esac
# shellcheck disable=SC2086 # VB_VALGRIND is a command line
exec $VB_VALGRIND "$@"
