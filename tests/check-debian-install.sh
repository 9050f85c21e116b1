#!/bin/sh
# SPDX-License-Identifier: MIT
# check-debian-install.sh - every header and manual page that make
# install puts in place is named by exactly one glob of the debian/
# *.install files, so dh_missing cannot fail at package time on a file
# a later change added (ring.h and wait.h once did). Exit 0 pass, 1 fail
# (naming each file and how many globs took it), 77 without debian/.
set -u

top_srcdir=${top_srcdir:-$(dirname "$0")/..}
cd "$top_srcdir" || exit 1
[ -d debian ] || { echo "SKIP: no debian/ directory in $top_srcdir"; exit 77; }

globs=$(cat debian/*.install)
status=0
takers() {
	n=0
	set -f # the globs are patterns for case, not for this directory
	for glob in $globs; do
		# shellcheck disable=SC2254 # the glob is meant to match
		case "$1" in $glob|$glob/*) n=$((n + 1)) ;; esac
	done
	set +f
	echo "$n"
}
check() {
	n=$(takers "$1")
	if [ "$n" -ne 1 ]; then
		echo "FAIL: $1 is named by $n globs of debian/*.install (want 1)"
		status=1
	fi
}

for f in include/aggring.h include/aggring/*.h; do
	check "usr/$f"
done
for f in man/man3/*.3 man/man7/*.7; do
	check "usr/share/$f"
done
[ "$status" -eq 0 ] && echo "PASS: each header and manual page is in one package"
exit "$status"
