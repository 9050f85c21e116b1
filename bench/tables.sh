#!/bin/sh
# SPDX-License-Identifier: MIT
#
# tables.sh RESULTSDIR - the CSVs the benchmarks wrote as Markdown
# tables, one per workload (for bench/RESULTS.md).
set -eu

dir=${1:?usage: tables.sh RESULTSDIR}
for csv in "$dir"/*.csv; do
	[ -e "$csv" ] || continue
	printf '### %s\n\n' "$(basename "$csv" .csv)"
	awk -F, 'NR == 1 {
			print "| variant | engine | metric | median | min | max | unit | runs |"
			print "|---|---|---|--:|--:|--:|---|--:|"
			next
		}
		{ printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n",
			$2, $3, $4, $6, $7, $8, $5, $9 }' "$csv"
	printf '\n'
done
