#!/bin/sh
# SPDX-License-Identifier: MIT
# check-settings.sh - the environment variables cannot drift apart: the
# settings table (src/settings.c) has a row for every AGR_ variable
# named in src/ and redis/ (every AGR_ name there that is not a public
# identifier, a macro of their own or a configure symbol), the manual
# page aggring-environment(7) describes exactly the table's rows, and no
# file but src/settings.c calls getenv(). Exit 0 pass, 1 fail (listing
# what is wrong).
set -u

top_srcdir=${top_srcdir:-$(dirname "$0")/..}
cd "$top_srcdir" || exit 1
page=man/man7/aggring-environment.7
status=0
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

names() { grep -oE 'AGR_[A-Z][A-Z0-9_]*' | grep -v '_$' | sort -u; }

# The table's rows: `.name = "AGR_..."`.
sed -n 's/^[[:space:]]*\.name = "\(AGR_[A-Z0-9_]*\)",$/\1/p' \
	src/settings.c | sort -u >"$tmp/table"
if [ ! -s "$tmp/table" ]; then
	echo "FAIL: no .name = \"AGR_...\" rows found in src/settings.c"
	exit 1
fi

# Names that are not variables: public macros and enum constants,
# macros of src/ and redis/ (include guards), configure's symbols.
{
	grep -rhE '^[[:space:]]*#[[:space:]]*define[[:space:]]+AGR_' \
		include src redis | sed 's/define/ /' | names
	grep -rhE '^[[:space:]]*AGR_[A-Z0-9_]+[[:space:]]*(=|,|$)' \
		include | names
	grep -E 'AC_DEFINE|AM_CONDITIONAL' configure.ac | names
} | sort -u >"$tmp/not_vars"

find src redis -name '*.[ch]' -exec cat {} + | names |
	comm -23 - "$tmp/not_vars" >"$tmp/source"
sed -n '/^\.SH ENVIRONMENT/,/^\.SH /{
/^\.TP/{
n
s/^\.B \(AGR_[A-Z0-9_]*\)$/\1/p
}
}' "$page" | sort -u >"$tmp/page"

report() { # what, file of names
	if [ -s "$2" ]; then
		echo "FAIL: $1:"
		sed 's/^/	/' "$2"
		status=1
	fi
}
comm -23 "$tmp/source" "$tmp/table" >"$tmp/d1"
report "named in src/ or redis/ but not a row of src/settings.c" "$tmp/d1"
comm -23 "$tmp/table" "$tmp/page" >"$tmp/d3"
report "rows of src/settings.c missing from $page (ENVIRONMENT)" "$tmp/d3"
comm -13 "$tmp/table" "$tmp/page" >"$tmp/d4"
report "variables of $page that src/settings.c has no row for" "$tmp/d4"

grep -rnE '\b(secure_)?getenv[[:space:]]*\(' src redis |
	grep -v '^src/settings\.c:' >"$tmp/d5"
report "getenv() outside src/settings.c (read settings there)" "$tmp/d5"

[ "$status" -eq 0 ] && echo "PASS: $(wc -l <"$tmp/table") variables" \
	"in src/settings.c, src/ and $page agree"
exit "$status"
