#!/bin/sh
# SPDX-License-Identifier: MIT
#
# valgrind.sh - runs the core test programs under Valgrind memcheck
# (`make check-valgrind`). Check runs the tests in-process (CK_FORK=no)
# so that Valgrind sees them; the library notices Valgrind and lets its
# workers sleep on an eventfd instead of inside io_uring_enter() (see
# src/wait.h). Exits 77 (skip) without valgrind, 1 on any memcheck error
# or definite leak.
#
# Usage: tests/valgrind.sh [builddir]   (SUITES="check_io soak" to narrow)

builddir=${1:-${top_builddir:-.}}
: "${SUITES:=check_group_key check_worker check_scheduler check_supplier check_options check_dispatcher check_io check_io_ext check_composite check_runtime check_metrics check_ledger_journal check_placement check_dio check_wow_codec check_wow_event_store soak}"

if ! command -v valgrind >/dev/null 2>&1; then
	echo "SKIP: valgrind not found (Debian: apt-get install valgrind)"
	exit 77
fi

CK_FORK=no
CK_DEFAULT_TIMEOUT=600
SOAK_SECONDS=${SOAK_SECONDS:-3}
SOAK_PRODUCERS=${SOAK_PRODUCERS:-3}
export CK_FORK CK_DEFAULT_TIMEOUT SOAK_SECONDS SOAK_PRODUCERS

status=0
for t in $SUITES; do
	# libaggring-redis's suites exist only when configure built it
	case $t in
	check_wow_*)
		[ -x "$builddir/tests/$t" ] || {
			echo "valgrind: $t not built (no libaggring-redis)"
			continue
		} ;;
	esac
	# the ledger's suites are beside it, in examples/ledger/tests
	case $t in
	check_ledger_*|check_crash_*) dir=$builddir/examples/ledger/tests ;;
	*) dir=$builddir/tests ;;
	esac
	start=$(date +%s)
	"$builddir/libtool" --mode=execute valgrind -q --error-exitcode=1 \
		--leak-check=full --errors-for-leak-kinds=definite \
		"$dir/$t"
	ret=$?
	echo "valgrind: $t exit $ret in $(($(date +%s) - start)) s"
	case $ret in
	0) ;;
	77) echo "valgrind: $t skipped" ;;
	*) status=1 ;;
	esac
done
exit $status
