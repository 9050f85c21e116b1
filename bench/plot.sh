#!/bin/sh
# SPDX-License-Identifier: MIT
#
# plot.sh RESULTSDIR - one PNG per workload and metric from the CSVs the
# benchmarks wrote (bench/harness.h documents the columns): bars are the
# medians per variant and engine, error bars span min..max.
#
# Needs gnuplot (Debian: apt-get install gnuplot-nox).
set -eu

dir=${1:?usage: plot.sh RESULTSDIR}
command -v gnuplot >/dev/null 2>&1 || {
	echo "plot.sh: gnuplot not found (apt-get install gnuplot-nox); no plots" >&2
	exit 0
}

for csv in "$dir"/*.csv; do
	[ -e "$csv" ] || continue
	workload=$(basename "$csv" .csv)
	for metric in $(awk -F, 'NR > 1 && !seen[$4]++ { print $4 }' "$csv"); do
		dat="$dir/.$workload-$metric.dat"
		# Pivot: one row per variant, median/min/max per engine.
		awk -F, -v m="$metric" '
			NR == 1 { next }
			$4 == m {
				if (!(($2) in vseen)) { vseen[$2] = 1; v[++nv] = $2 }
				if (!(($3) in eseen)) { eseen[$3] = 1; e[++ne] = $3 }
				med[$2, $3] = $6; lo[$2, $3] = $7; hi[$2, $3] = $8
				unit = $5
			}
			END {
				printf "variant"
				for (j = 1; j <= ne; j++) printf " %s - -", e[j]
				printf "\n"
				for (i = 1; i <= nv; i++) {
					printf "%s", v[i]
					for (j = 1; j <= ne; j++) {
						k = v[i] SUBSEP e[j]
						if (k in med) printf " %s %s %s", med[k], lo[k], hi[k]
						else printf " NaN NaN NaN"
					}
					printf "\n"
				}
				print unit > "/dev/stderr"
			}' "$csv" >"$dat" 2>"$dat.unit"
		unit=$(cat "$dat.unit")
		engines=$(head -1 "$dat" | awk '{ print (NF - 1) / 3 }')
		# Latencies span decades (a p50 of 1 us, a stalled peer's
		# 300 ms): a log scale keeps the small ones visible.
		case $unit in
		us|ms) scale="set logscale y; set yrange [*:*]" ;;
		*) scale="set yrange [0:*]" ;;
		esac
		gnuplot <<-GP
			set terminal pngcairo size 900,500 font "sans,10"
			set output "$dir/$workload-$metric.png"
			set title "$workload: $metric (median of runs; bars: min..max)" noenhanced
			set ylabel "$unit"
			set style data histogram
			set style histogram errorbars gap 1 lw 1
			set style fill solid 0.7 border -1
			set key outside right top noenhanced
			$scale
			set grid ytics
			plot for [i=0:$engines-1] "$dat" using (column(2+3*i)):(column(3+3*i)):(column(4+3*i)):xtic(1) title columnhead(2+3*i)
		GP
		rm -f "$dat" "$dat.unit"
	done
done
