#!/bin/sh
# SPDX-License-Identifier: MIT
#
# valgrind.sh - runs the core test programs under Valgrind memcheck
# (`make check-valgrind`). Check runs the tests in-process (CK_FORK=no)
# so that Valgrind sees them; the library notices Valgrind and lets its
# workers sleep on an eventfd instead of inside io_uring_enter() (see
# src/wait.h). Exits 77 (skip) without valgrind, 1 on any memcheck error,
# definite leak or suite that ran past its time.
#
# Valgrind runs each program's threads one at a time, under one lock.
# Its default lock is not fair: a worker that resubmits I/O from its own
# callbacks (check_dispatcher's force_stop_ends_resubmitting_chains) can
# take it again and again while the test thread waits to run; alone,
# that case ran past 240 s in two tries out of two, and in 29 s with
# --fair-sched=yes (a ticket lock, round robin), which is used here.
# The suites run VALGRIND_JOBS at once (default: one per CPU), the
# longest first, each under VALGRIND_TIMEOUT seconds (default 1500):
# with CK_FORK=no Check has no timeout of its own, and a suite that runs
# past it is killed and named. Each suite's output is printed whole,
# in one piece, when it ends.
#
# Usage: tests/valgrind.sh [builddir]   (SUITES="check_io soak" to narrow)

if [ "$1" = --one ]; then
	# One suite: tests/valgrind.sh --one builddir logdir name
	builddir=$2 logdir=$3 t=$4
	case $t in
	check_wow_*)
		# libaggring-redis's suites exist only when configure built it
		[ -x "$builddir/tests/$t" ] || {
			echo "valgrind: $t not built (no libaggring-redis)"
			exit 0
		} ;;
	esac
	# the ledger's suites are beside it, in examples/ledger/tests
	case $t in
	check_ledger_*|check_crash_*) dir=$builddir/examples/ledger/tests ;;
	*) dir=$builddir/tests ;;
	esac
	log=$logdir/$t.log
	start=$(date +%s)
	timeout -k 30 "$VALGRIND_TIMEOUT" \
		"$builddir/libtool" --mode=execute valgrind -q --fair-sched=yes \
		--error-exitcode=1 --leak-check=full \
		--errors-for-leak-kinds=definite "$dir/$t" >"$log" 2>&1
	ret=$?
	secs=$(($(date +%s) - start))
	cat "$log"
	case $ret in
	0) echo "valgrind: $t passed in $secs s" ;;
	77) echo "valgrind: $t skipped (its log says why)" ;;
	124|137)
		echo "valgrind: $t ran past VALGRIND_TIMEOUT" \
			"($VALGRIND_TIMEOUT s) and was killed; its output ends" \
			"above"
		exit 1 ;;
	*)
		echo "valgrind: $t failed (exit $ret) in $secs s"
		exit 1 ;;
	esac
	exit 0
fi

builddir=${1:-${top_builddir:-.}}
# The longest first, so that the last to start are short.
: "${SUITES:=check_dispatcher soak check_io check_io_ext check_runtime check_scheduler check_supplier check_worker check_composite check_metrics check_ledger_journal check_placement check_dio check_wow_event_store check_wow_codec check_options check_group_key}"
: "${VALGRIND_JOBS:=$(nproc 2>/dev/null || echo 2)}"
: "${VALGRIND_TIMEOUT:=1500}"

if ! command -v valgrind >/dev/null 2>&1; then
	echo "SKIP: valgrind not found (Debian: apt-get install valgrind)"
	exit 77
fi

CK_FORK=no
CK_DEFAULT_TIMEOUT=600
SOAK_SECONDS=${SOAK_SECONDS:-3}
SOAK_PRODUCERS=${SOAK_PRODUCERS:-3}
export CK_FORK CK_DEFAULT_TIMEOUT SOAK_SECONDS SOAK_PRODUCERS VALGRIND_TIMEOUT

logdir=$builddir/tests/valgrind-logs
rm -rf "$logdir"
mkdir -p "$logdir" || exit 1
echo "valgrind: $(echo $SUITES | wc -w) suites, $VALGRIND_JOBS at once," \
	"each under $VALGRIND_TIMEOUT s; logs in $logdir"
# xargs exits 123 if any suite failed (its line above says which).
printf '%s\n' $SUITES |
	xargs -P "$VALGRIND_JOBS" -I{} sh "$0" --one "$builddir" "$logdir" {}
[ $? -eq 0 ] || exit 1
