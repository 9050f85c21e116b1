#!/bin/sh
# SPDX-License-Identifier: MIT
# abi/check-structs.sh - every public struct that a caller passes in or
# that the library fills can grow without breaking callers built
# against an older header: it keeps reserved words (a member named
# `reserved`), which later fields take, and a struct the caller fills
# and passes in (a name ending in _options, _params or _ops) opens with
# `size_t size`, read as aggring/dispatcher.h says (size 0: the first
# version; older sizes: the fields beyond take defaults; newer sizes:
# the unknown bytes must be zero). The structs exempt are listed below,
# each with why. Exit 0 pass, 1 fail (naming each struct and what it
# lacks).
set -u

top_srcdir=${top_srcdir:-$(dirname "$0")/..}

# NAME: why it need not grow (or, for the Wow documents, why not yet).
exempt='
agr_named_aggregate: a pair of names, whole by definition
agr_message: sent in place and never copied; what the library keeps in it lives in the opaque internal_
agr_histogram: its layout is its bucketing (AGR_HISTOGRAM_BUCKETS); another bucketing would be another type, and agr_dispatcher_metrics, which holds two, has reserved words
agr_wow_named: a named aggregate with its alias, whole by definition
agr_wow_header: a key and a value, whole by definition
agr_wow_decoded: aggring zeroes it before a decoder fills it and only aggring reads it, so fields can be added at its end
agr_wow_aggregate_state: aggring owns it and hands the functions a pointer valid during the call, so fields can be added at its end
agr_wow_command: not versioned yet: mirrors a Wow JSON document field for field; decode allocates it, but encode reads the caller'"'"'s
agr_wow_event: not versioned yet, as agr_wow_command
agr_wow_event_stream: not versioned yet, as agr_wow_command
agr_wow_state_event: not versioned yet, as agr_wow_command
agr_wow_snapshot: not versioned yet, as agr_wow_command
'

names=$(echo "$exempt" | sed -n 's/^\(agr_[a-z0-9_]*\):.*/\1/p')

# One line per struct: FILE NAME FIRST_MEMBER HAS_RESERVED.
structs() {
	for h in "$top_srcdir"/include/aggring/*.h; do
		awk -v file="${h##*/}" '
		{
			line = $0
			# comments out, across lines too
			if (incomment) {
				if (sub(/.*\*\//, "", line)) incomment = 0
				else next
			}
			gsub(/\/\*([^*]|\*+[^*\/])*\*+\//, "", line)
			if (sub(/\/\*.*/, "", line)) incomment = 1
		}
		!depth && match(line, /^typedef struct [a-z0-9_]+ *\{/) {
			name = line
			sub(/^typedef struct /, "", name)
			sub(/ *\{.*/, "", name)
			depth = 1; first = ""; reserved = 0
			next
		}
		depth {
			if (depth == 1 && first == "" && line ~ /[a-z]/) {
				first = line
				gsub(/^[ \t]+|[ \t]+$/, "", first)
				gsub(/[ \t]+/, "_", first)
			}
			if (depth == 1 && line ~ /[^a-z0-9_]reserved[ \t]*\[/)
				reserved = 1
			opens = line; gsub(/[^{]/, "", opens)
			closes = line; gsub(/[^}]/, "", closes)
			depth += length(opens) - length(closes)
			if (!depth)
				print file, name, first, reserved
		}' "$h"
	done
}

status=0
count=0
found=$(structs)
while read -r file name first reserved; do
	[ -n "$name" ] || continue
	count=$((count + 1))
	if echo "$names" | grep -qx "$name"; then
		continue
	fi
	if [ "$reserved" != 1 ]; then
		echo "FAIL: $file: $name has no reserved words (uint64_t reserved[N]) and is not exempt in $0"
		status=1
	fi
	case $name in
	*_options | *_params | *_ops)
		if [ "$first" != "size_t_size;" ]; then
			echo "FAIL: $file: $name, which callers pass in, does not open with size_t size"
			status=1
		fi ;;
	esac
done <<EOF_STRUCTS
$found
EOF_STRUCTS

# An exemption for a struct that no longer exists is stale.
for name in $names; do
	echo "$found" | grep -q " $name " ||
		{ echo "FAIL: $name is exempt in $0 but no header defines it"; status=1; }
done

if [ "$count" -eq 0 ]; then
	echo "FAIL: no public struct found under $top_srcdir/include/aggring"
	exit 1
fi
[ "$status" -eq 0 ] && echo "PASS: $count public structs: each versioned or exempt with a reason"
exit "$status"
