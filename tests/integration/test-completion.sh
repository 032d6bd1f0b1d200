#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# bash completion for vbmgr (data/completion/vbmgr): `complete -p vbmgr`
# after loading it, and the words it offers for scripted command lines
# (COMP_WORDS, COMP_CWORD, then the function, as bash does): commands,
# a command's options, device names, drivers, backends, the attributes of
# the driver on the line and of a device's driver, jobs, paths.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
vb_setup
vb_start_daemon
PATH=$(dirname "$VBMGR"):$PATH
unset -f vbmgr # (the completion runs vbmgr from PATH, as a user's shell does)

# shellcheck source=data/completion/vbmgr
source "$VB_SRCDIR/data/completion/vbmgr"
vb_assert_eq "complete -F _vbmgr vbmgr" "$(complete -p vbmgr)" "complete -p vbmgr"

# offered WORD... — what completing the last word of the line gives,
# sorted, one line
offered () {
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMP_LINE="$*"
  COMPREPLY=()
  _vbmgr
  printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
}

for f in a b c; do vb_mkimg "$T/$f.img" 24M; done
vbmgr create mirror --driver raid1 "$T/a.img" "$T/b.img"
vbmgr create mine --driver linear "$T/c.img"

vb_assert_eq "start status stop" "$(offered vbmgr st)" "commands after 'vbmgr st'"
vb_assert_contains "$(offered vbmgr '')" "reconfigure" "every command"
vb_assert_eq "--recursive" "$(offered vbmgr stop --r)" "stop's options"
vb_assert_eq "--dry-run" "$(offered vbmgr apply --d)" "apply's options"
vb_assert_eq "mine mirror" "$(offered vbmgr show m)" "device names"
vb_assert_eq "mirror" "$(offered vbmgr add mir)" "add's device"
vb_assert_contains "$(offered vbmgr add mirror "$T/a")" "$T/a.img" "add's component (a path)"
vb_assert_eq "raid0 raid1 raid10" "$(offered vbmgr create x --driver raid)" "drivers"
vb_assert_contains "$(offered vbmgr create x --backend '')" "loop" "backends"
vb_assert_contains "$(offered vbmgr create x --backend '')" "auto" "backends"
vb_assert_eq "sync_speed_max= sync_speed_min=" \
  "$(offered vbmgr create x --driver raid1 --attr sync)" "raid1's attributes after --driver"
vb_assert_eq "sync_speed_max= sync_speed_min=" "$(offered vbmgr set mirror sync)" \
  "the attributes of mirror's driver"
vb_assert_eq "chunk_size=" "$(offered vbmgr create x --driver=raid0 --attr ch)" "--driver=raid0"
vb_assert_eq "list reload test" "$(offered vbmgr policy '')" "policy's subcommands"
vb_assert_eq "reload" "$(offered vbmgr policy r)" "policy's subcommands"
# a job that lasts: the first resync held to 1 MiB/s (24 MiB)
vbmgr set mirror sync_speed_max=1M
vbmgr start mirror
job=$(vbmgr jobs --json | jq -r '[.[] | select(.state == "running")][0].id // empty')
[ -n "$job" ] || vb_fail "no job listed while mirror resyncs"
vb_assert_contains " $(offered vbmgr cancel '') " " $job " "cancel's jobs"
vbmgr cancel "$job" > /dev/null
vb_assert_eq "active" "$(offered vbmgr wait mirror --state a)" "--state's values"
vb_assert_eq "--recursive" "$(offered vbmgr start mirror --)" "start's options after the device"
for d in mirror mine; do vbmgr stop "$d" 2> /dev/null || true; vbmgr delete "$d"; done
vb_stop_daemon
