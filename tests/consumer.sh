#!/bin/sh
# SPDX-License-Identifier: MIT
# consumer.sh - builds a program as a user of an installed aggring does,
# with nothing but pkg-config: `make install` into a DESTDIR under the
# build directory, then tests/consumer.c (which calls agr_worker_ring()
# and liburing on the ring) compiled and linked with
# `pkg-config --cflags --libs aggring`, and again fully static with
# `pkg-config --static`, and both run. A missing liburing in aggring.pc
# fails the first link ("DSO missing from command line").
#
# Usage: consumer.sh BUILDDIR SRCDIR LIBDIR (`make check-consumer`).
# CC may name the compiler (default cc). Exit 0 pass, 1 fail.
set -eu

build=$1
src=$2
libdir=$3
dir=$build/consumer
root=$dir/root
cc=${CC:-cc}

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

rm -rf "$dir"
mkdir -p "$dir"
make -C "$build" install DESTDIR="$root" >"$dir/install.log" 2>&1 ||
	fail "make install DESTDIR=$root (see $dir/install.log)"

# The tree was built for one prefix; installing it under another
# relinks the libraries (libdir.stamp) instead of failing in libtool
# ("cannot install 'libaggring-redis.la' to a directory not ending in
# ...") half-way. `make install prefix=...` moves libdir as a
# reconfigure does. The next `make` relinks them back.
moved=/opt/aggring-moved
make -C "$build" install prefix="$moved" DESTDIR="$root" \
	>"$dir/install-moved.log" 2>&1 ||
	fail "make install under a changed prefix (see $dir/install-moved.log)"
for la in "$root$moved"/lib/*.la; do
	grep -q "^libdir='$moved/lib'" "$la" ||
		fail "$la does not record libdir $moved/lib"
done
[ -e "$root$moved/lib/libaggring.so" ] ||
	fail "no libaggring.so under the changed prefix"
make -C "$build" >"$dir/relink.log" 2>&1 ||
	fail "make after the install under a changed prefix (see $dir/relink.log)"

# The installed .pc as found at $libdir/pkgconfig, its paths moved under
# the DESTDIR by the sysroot.
PKG_CONFIG_PATH=$root$libdir/pkgconfig
PKG_CONFIG_SYSROOT_DIR=$root
export PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
pkg-config --exists aggring || fail "pkg-config does not find aggring.pc"
flags=$(pkg-config --cflags --libs aggring)
static_flags=$(pkg-config --static --cflags --libs aggring)
echo "pkg-config --cflags --libs aggring: $flags"
echo "pkg-config --static --cflags --libs aggring: $static_flags"

# $flags is split into words on purpose.
# shellcheck disable=SC2086
"$cc" -o "$dir/consumer" "$src/tests/consumer.c" $flags ||
	fail "link with pkg-config --libs aggring"
# shellcheck disable=SC2086
"$cc" -static -o "$dir/consumer-static" "$src/tests/consumer.c" \
	$static_flags || fail "static link with pkg-config --static --libs aggring"

# run NAME ENV...: runs a consumer; 77 (no io_uring here) still shows
# that the program was linked and loaded.
run() {
	name=$1
	shift
	rc=0
	env "$@" "$dir/$name" || rc=$?
	case $rc in
	0) ;;
	77) echo "$name: linked and loaded; not run further (no io_uring)" ;;
	*) fail "$name exited $rc" ;;
	esac
}
run consumer LD_LIBRARY_PATH="$root$libdir"
run consumer-static
echo "PASS: a consumer links with pkg-config's flags alone, shared and static"
