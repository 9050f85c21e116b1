#!/bin/sh
# SPDX-License-Identifier: MIT
# consumer.sh - builds a program as a user of an installed aggring does,
# with nothing but pkg-config: `make install` into a DESTDIR under the
# build directory, then tests/consumer.c (which calls agr_worker_ring()
# and liburing on the ring) compiled and linked with
# `pkg-config --cflags --libs aggring`, and again fully static with
# `pkg-config --static`, and both run. A missing liburing in aggring.pc
# fails the first link ("DSO missing from command line"). Before that,
# `make install prefix=BUILDDIR/consumer/prefix` into a prefix the tree
# was not configured for, and the examples' sources installed under it
# (share/doc/aggring/examples) built with their Makefile.
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
# reconfigure does; the next `make` relinks them back.
moved=$dir/prefix
make -C "$build" install prefix="$moved" >"$dir/install-moved.log" 2>&1 ||
	fail "make install under a changed prefix (see $dir/install-moved.log)"
for la in "$moved"/lib/*.la; do
	grep -q "^libdir='$moved/lib'" "$la" ||
		fail "$la does not record libdir $moved/lib"
done
make -C "$build" >"$dir/relink.log" 2>&1 ||
	fail "make after the install under a changed prefix (see $dir/relink.log)"

# The examples' sources are installed with a Makefile that builds them
# against the installed library through pkg-config alone; a copy of
# them builds, and the programs start.
docex=$moved/share/doc/aggring/examples
[ -f "$docex/Makefile" ] || fail "no $docex/Makefile"
cp -R "$docex" "$dir/examples"
# The .pc files keep the configured prefix (configure wrote them), so
# pkg-config is told the one they were installed under.
PKG_CONFIG_PATH=$moved/lib/pkgconfig make -C "$dir/examples" CC="$cc" \
	PKG_CONFIG="pkg-config --define-variable=prefix=$moved" \
	>"$dir/examples.log" 2>&1 ||
	fail "the installed examples do not build (see $dir/examples.log)"
for prog in basic/journal basic/echo_server basic/append_store \
	ledger/ledger_server; do
	LD_LIBRARY_PATH=$moved/lib "$dir/examples/$prog" --help >/dev/null ||
		fail "installed example $prog --help failed"
done
if [ -e "$moved/lib/libaggring-redis.so" ]; then
	for prog in ledger/ledger_load wow/wow_ledger wow/wow_produce \
		wow/wow_project; do
		[ -x "$dir/examples/$prog" ] ||
			fail "installed example $prog not built with aggring-redis installed"
	done
fi
echo "PASS: installed under a changed prefix; the installed examples build"

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
