#!/bin/sh
# SPDX-License-Identifier: MIT
# abi/check.sh - libaggring.so's ABI against the committed baseline,
# abi/libaggring.abi: the exported functions and variables and the
# layout of the public types they use (those defined in the headers
# under include/), compared by libabigail's abidiff (Debian:
# abigail-tools). Changes to types the headers only name (agr_worker,
# agr_dispatcher, ...) or that come from elsewhere (liburing's struct
# io_uring) do not count (abi/private.suppr).
#
# Passes when the library is unchanged or only adds: functions,
# variables, enumerators. Fails when one is removed or changed (a
# parameter, a return type, a public struct's size or members).
#
#   abi/check.sh BUILDDIR SRCDIR            check (make check-abi)
#   abi/check.sh --update BUILDDIR SRCDIR   write the baseline (make update-abi)
#
# BUILDDIR's libaggring.so needs debug information (-g: configure's
# default CFLAGS have it) and no fault injection (aggring/fault.h is for
# tests, not part of the ABI).
#
# Changing the ABI on purpose:
#   1. Set -version-info (AGR_LT_VERSION in configure.ac) as the libtool
#      manual says: interfaces only added: current+1, revision 0, age+1;
#      an interface removed or changed: current+1, revision 0, age 0,
#      which changes the soname (libaggring.so.N).
#   2. Reconfigure, rebuild from clean (make clean: a new -version-info
#      does not relink by itself), `make update-abi`, and commit
#      abi/libaggring.abi with the change and configure.ac.
# --update refuses an incompatible change under an unchanged soname;
# AGR_ABI_UNRELEASED=1 lets it through for an interface no release has
# shipped yet (the baseline of a version still in development).
set -eu

update=no
if [ "${1:-}" = --update ]; then
	update=yes
	shift
fi
[ $# -eq 2 ] || {
	echo "usage: $0 [--update] BUILDDIR SRCDIR" >&2
	exit 2
}
build=$1
src=$2
baseline=$src/abi/libaggring.abi
so=$build/.libs/libaggring.so
out=$build/abi-check
current=$out/libaggring.abi

fail() {
	echo "abi: $*" >&2
	exit 1
}

command -v abidiff >/dev/null ||
	fail "abidiff not found (Debian: apt-get install abigail-tools)"
[ -e "$so" ] || fail "no $so: build the library first"
grep -q '^#define AGR_FAULT_INJECTION 1' "$build/config.h" &&
	fail "$build has --enable-fault-injection; check a build without it"
readelf -S "$so" | grep -q '\.debug_info' ||
	fail "$so has no debug information: build with -g"

# Paths in the representation made relative to SRCDIR, so that the
# baseline does not depend on where the tree was built.
mkdir -p "$out"
[ "$(cd "$out" && pwd -P)" != "$(cd "$src/abi" && pwd -P)" ] ||
	fail "$current would overwrite the baseline"
abs_src=$(cd "$src" && pwd)
abidw --no-corpus-path --no-comp-dir-path "$so" |
	sed -e "s|filepath='$abs_src/|filepath='|" \
	    -e "s|filepath='\(\.\./\)*|filepath='|" \
	    -e "s|filepath='\./|filepath='|" >"$current"

# The soname a --update must see change with an incompatible change.
soname() {
	sed -n "s/^<abi-corpus .*soname='\([^']*\)'.*/\1/p" "$1"
}

if [ ! -e "$baseline" ]; then
	[ $update = yes ] || fail "no baseline $baseline (make update-abi)"
	cp "$current" "$baseline"
	echo "abi: wrote $baseline ($(soname "$baseline"))"
	exit 0
fi

# abidiff's exit status is a bit set: 1 error, 2 usage, 4 a change,
# 8 an incompatible change (a removed symbol). A changed function
# (its types) sets only 4, as do additions: the report's summary lines
# tell them apart.
rc=0
abidiff --suppressions "$src/abi/private.suppr" \
	"$baseline" "$current" >"$out/abidiff.txt" 2>&1 || rc=$?
[ $((rc & 3)) -eq 0 ] || {
	cat "$out/abidiff.txt" >&2
	fail "abidiff failed (exit $rc)"
}
removed_or_changed=$(grep -E 'summary:' "$out/abidiff.txt" |
	grep -Ec '[1-9][0-9]* (Removed|Changed)' || true)
added=$(grep -E 'summary:' "$out/abidiff.txt" |
	grep -Ec '[1-9][0-9]* Added' || true)

if [ $((rc & 8)) -ne 0 ] || [ "$removed_or_changed" -ne 0 ]; then
	cat "$out/abidiff.txt"
	if [ $update = no ]; then
		fail "incompatible change to the ABI of $baseline (above). If it is on purpose: see abi/check.sh's header."
	fi
	if [ "$(soname "$current")" = "$(soname "$baseline")" ] &&
	   [ "${AGR_ABI_UNRELEASED:-0}" != 1 ]; then
		fail "an incompatible change needs a new soname (still $(soname "$current")): set -version-info first, see abi/check.sh"
	fi
elif [ $update = no ]; then
	if [ "$added" -ne 0 ]; then
		grep -E 'summary:' "$out/abidiff.txt"
		echo "abi: compatible additions, not in the baseline yet (make update-abi)"
	fi
	echo "abi: libaggring's ABI keeps $baseline"
	exit 0
fi

cp "$current" "$baseline"
echo "abi: wrote $baseline ($(soname "$baseline"))"
