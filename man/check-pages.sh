#!/bin/sh
# SPDX-License-Identifier: MIT
# check-pages.sh - the manual pages under man/: every page passes
# `mandoc -Tlint -Wstyle` (a link page is one `.so` line naming a page
# that exists), and every function the library exports has a page of
# its own name, man/man3/NAME.3, and every page is listed in
# Makefile.am. Exit 0 pass, 1 fail (listing what is wrong), 77 skip
# (mandoc is not installed).
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/..}
man=$top_srcdir/man
status=0

if ! command -v mandoc >/dev/null 2>&1; then
	echo "SKIP: mandoc is not installed (apt-get install mandoc)"
	exit 77
fi

# ---- lint ----
# mandoc warns about every `.so` (it prefers hard links), so a link page
# is checked here instead: one line, naming a real page, not a link.
is_link() {
	[ "$(wc -l <"$1")" -eq 1 ] && grep -q '^\.so man[37]/[a-z0-9_]*\.[37]$' "$1"
}

for page in "$man"/man3/*.3 "$man"/man7/*.7; do
	if is_link "$page"; then
		target=$man/$(sed 's/^\.so //' "$page")
		if [ ! -f "$target" ] || is_link "$target"; then
			echo "FAIL: $page links to a missing page or a link: $target"
			status=1
		elif ! sed -n '/^\.SH NAME/,/^\.SH SYNOPSIS/p' "$target" |
			grep -qw "$(basename "$page" | sed 's/\.[37]$//')"; then
			echo "FAIL: $page: $target does not name it in NAME"
			status=1
		fi
		continue
	fi
	if grep -q '^\.so' "$page"; then
		echo "FAIL: $page: a link page must be one .so line"
		status=1
		continue
	fi
	if ! sed -n '/^\.SH NAME/,/^\.SH SYNOPSIS/p' "$page" |
		grep -qw "$(basename "$page" | sed 's/\.[37]$//')"; then
		echo "FAIL: $page does not name itself in NAME"
		status=1
	fi
	# A request glued to text (`flight..PP`, `text.PP`) is printed, not
	# run, and mandoc does not see it: requests start a line.
	if glued=$(grep -nE '[^[:space:]]\.(PP|LP|P|TP|IP|SH|SS|EX|EE|nf|fi|RS|RE|in|sp|br)[[:space:]]*$' "$page"); then
		echo "$glued"
		echo "FAIL: $page: a request glued to the text before it"
		status=1
	fi
	if ! out=$(mandoc -Tlint -Wstyle "$page" 2>&1) || [ -n "$out" ]; then
		echo "$out"
		echo "FAIL: $page: mandoc -Tlint -Wstyle"
		status=1
	fi
done

# ---- every page is installed and distributed ----
for page in "$man"/man3/*.3 "$man"/man7/*.7; do
	rel=man/$(basename "$(dirname "$page")")/$(basename "$page")
	if ! grep -q "[[:space:]]$rel\([[:space:]]\|\$\)" "$top_srcdir/Makefile.am"; then
		echo "FAIL: $rel is not listed in Makefile.am (dist_man3_MANS)"
		status=1
	fi
done

# ---- one page per exported function ----
# The shared library's dynamic symbols are the truth; without one (a
# static-only build), the declarations in the public headers.
# libaggring-redis (built when hiredis is found) counts as well.
lib=$top_builddir/.libs/libaggring.so
redis_lib=$top_builddir/.libs/libaggring-redis.so
if [ -f "$lib" ] && command -v nm >/dev/null 2>&1; then
	libs=$lib
	[ -f "$redis_lib" ] && libs="$libs $redis_lib"
	# shellcheck disable=SC2086 # two file names, split on purpose
	names=$(for l in $libs; do nm -D --defined-only "$l"; done |
		awk '$2 ~ /^[TW]$/ { sub(/@.*/, "", $3) }
		     $2 ~ /^[TW]$/ && $3 ~ /^agr_/ && $3 !~ /^agr__/ { print $3 }')
	from=$libs
else
	names=$(sed -n 's/^AGR_API[^(]*[ *]\(agr_[a-z0-9_]*\)(.*/\1/p' \
		"$top_srcdir"/include/aggring/*.h)
	from="the headers"
fi
if [ -z "$names" ]; then
	echo "FAIL: no agr_ function found in $from"
	exit 1
fi

missing=
for name in $names; do
	[ -f "$man/man3/$name.3" ] || missing="$missing $name"
done
if [ -n "$missing" ]; then
	echo "FAIL: exported by $from without a page man/man3/NAME.3:"
	for name in $missing; do
		echo "	$name"
	done
	status=1
fi

count=$(echo "$names" | wc -l)
[ "$status" -eq 0 ] && echo "PASS: every page lints; $count functions of $from have a page"
exit "$status"
