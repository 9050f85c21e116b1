#!/bin/sh
# SPDX-License-Identifier: MIT
# sizes.sh - the project's size rules over the C sources of src/,
# redis/, examples/, tests/ and bench/: no file over 800 lines, no
# function over 60 (from the line that starts its declaration to its
# closing brace), and, for every program or library the build made,
# no two functions of one name among the sources it is built from
# (static or not: one name, one meaning, in a program).
#
# The sources are in kernel style, so a function is a declaration at
# column 0 followed by a `{` alone at column 0, and ends at the next
# `}` at column 0; awk is enough, no ctags needed.
#
# Which sources make a program is read from the objects automake wrote
# in $top_builddir (DIR/PROG-SOURCE.o, DIR/.libs or DIR/LIB_la-SOURCE.lo);
# without a build that part is skipped.
#
# `sh tests/sizes.sh --list` prints every offender, allowed or not.
# Exit 0 pass, 1 fail (listing what is wrong).
set -u

top_srcdir=${top_srcdir:-$(dirname "$0")/..}
top_builddir=${top_builddir:-.}
list_all=no
[ "${1:-}" = --list ] && list_all=yes

MAX_FILE_LINES=800
MAX_FUNC_LINES=60

# ---- allowed to stay, for now ----
# Each line: a file, FILE:FUNCTION, or PROGRAM:NAME (two functions of
# that name in that program or library), over its limit today and not
# to grow. Removing a line once its file is split is the point of the
# list; nothing may be added to it without a reason beside it.
#
# src/worker.c: the worker's loop, its I/O bookkeeping and its
# doorbell side, 1,594 lines (none of its functions is over 60): the
# hot path of every message, to be split with measurements beside it
# (bench/dispatch, bench/producers), not blind.
ALLOWED='
src/worker.c
'

top_builddir=$(cd "$top_builddir" && pwd) || exit 1
cd "$top_srcdir" || exit 1
srcs=$(find src redis examples tests bench -name '*.[ch]' 2>/dev/null |
	LC_ALL=C sort)

allowed() {
	printf '%s\n' "$ALLOWED" | grep -qxF "$1"
}

status=0
report() {
	# $1 what (a file or FILE:FUNCTION), $2 the complaint
	if allowed "$1"; then
		[ "$list_all" = yes ] && echo "allowed: $1: $2"
		return 0
	fi
	echo "$1: $2"
	status=1
}

# Prints FILE<TAB>FUNCTION<TAB>LINES for every function definition.
functions() {
	awk '
	FNR == 1 { start = 0; name = ""; inside = 0 }
	inside && /^}/ {
		printf "%s\t%s\t%d\n", FILENAME, name, FNR - start + 1
		inside = 0; start = 0; next
	}
	inside { next }
	/^\{/ {
		if (start) {
			text = decl
			sub(/\(.*/, "", text)
			n = split(text, w, /[^A-Za-z0-9_]+/)
			name = w[n]; if (name == "" && n > 1) name = w[n - 1]
			# START_TEST(name) is a test of that name.
			if (name == "START_TEST") {
				name = decl
				sub(/^[^(]*\( */, "", name)
				sub(/[ )].*/, "", name)
			}
			inside = 1
		}
		next
	}
	/^[A-Za-z_]/ && !start { start = FNR; decl = "" }
	/^[A-Za-z_]/ || (start && /^[ \t]/) { decl = decl " " $0 }
	/;[ \t]*$/ || /^[#}]/ || /^$/ { start = 0; decl = "" }
	' "$@"
}

# ---- files ----
for f in $srcs; do
	n=$(wc -l <"$f")
	[ "$n" -gt "$MAX_FILE_LINES" ] &&
		report "$f" "$n lines (at most $MAX_FILE_LINES)"
done

# ---- functions ----
tab=$(printf '\t')
# shellcheck disable=SC2086
functions $srcs >"${TMPDIR:-/tmp}/sizes.$$"
while IFS=$tab read -r f name n; do
	[ "$n" -gt "$MAX_FUNC_LINES" ] || continue
	report "$f:$name" "$n lines (at most $MAX_FUNC_LINES)"
done <"${TMPDIR:-/tmp}/sizes.$$"

# ---- one name per function in a program ----
# From the build's objects: DIR/PREFIX-BASE.o was built from DIR/BASE.c
# for the program whose canonical name (a NAME_SOURCES of the Makefile)
# is PREFIX, or PREFIX with some of DIR's leading folders before it
# (automake leaves out the folders the program and the object share).
progs=$(sed -n 's/^\([A-Za-z0-9_]*\)_SOURCES *=.*/\1/p' \
	"$top_builddir/Makefile" 2>/dev/null | LC_ALL=C sort -u)
objs=$(cd "$top_builddir" 2>/dev/null &&
	find src redis examples tests bench \( -name '*-*.o' -o -name '*-*.lo' \) \
		2>/dev/null | grep -v '/\.libs/')
if [ -z "$objs" ] || [ -z "$progs" ]; then
	echo "no objects in $top_builddir: the one-name check is skipped"
fi
progs=" $(echo $progs) "
is_prog() {
	case $progs in *" $1 "*) return 0 ;; esac
	return 1
}
for o in $objs; do
	base=${o##*/}
	dir=${o%/*}
	src=$dir/${base#*-}
	src=${src%.o}; src=${src%.lo}.c
	prefix=${base%%-*}
	prog=
	lead=
	rest=$dir/
	while :; do
		is_prog "$lead$prefix" && prog=$lead$prefix
		[ -n "$rest" ] || break
		lead=$lead${rest%%/*}_
		rest=${rest#*/}
	done
	[ -n "$prog" ] && printf '%s\t%s\n' "$prog" "$src"
done | LC_ALL=C sort -u >"${TMPDIR:-/tmp}/sizes-progs.$$"
while IFS=$tab read -r prog src; do
	[ -f "$src" ] || continue
	awk -F"$tab" -v src="$src" -v prog="$prog" \
		'$1 == src { print prog "\t" $2 "\t" src }' \
		"${TMPDIR:-/tmp}/sizes.$$"
done <"${TMPDIR:-/tmp}/sizes-progs.$$" | LC_ALL=C sort |
	awk -F"$tab" '
	$1 == p && $2 == n && f != $3 { printf "%s:%s\t%s and %s\n", $1, $2, f, $3 }
	{ p = $1; n = $2; f = $3 }' >"${TMPDIR:-/tmp}/sizes-dups.$$"
while IFS=$tab read -r what where; do
	report "$what" "two functions of one name, in $where"
done <"${TMPDIR:-/tmp}/sizes-dups.$$"
rm -f "${TMPDIR:-/tmp}/sizes.$$" "${TMPDIR:-/tmp}/sizes-progs.$$" \
	"${TMPDIR:-/tmp}/sizes-dups.$$"

[ "$status" -eq 0 ] && echo "sizes: every file and function within the limits"
exit "$status"
