#!/bin/sh
# SPDX-License-Identifier: MIT
# check-statements.sh - the statements that matter (what a force stop
# does, who owns what, what allocates) say the same in a header comment
# and in its manual page. Each rule names a header and a page, a phrase
# both must hold, and optionally a phrase the page must not hold (what
# it used to say when it contradicted the header). Text is compared
# with line breaks, comment stars, roff requests and escapes taken out.
# Exit 0 pass, 1 fail (listing each broken rule).
set -u

top_srcdir=${top_srcdir:-$(dirname "$0")/..}
status=0

# The words of a header comment or a page, on one line.
flat() {
	sed -E -e 's@^[[:space:]]*/?\*+/?@@' \
		-e 's/^\.(B|I|BR|IR|RB|RI|BI|IB|TP|PP|IP|SH|SS)( |$)//' \
		-e 's/\\-/-/g; s/\\\(dq/"/g; s/\\\(em/--/g; s/\\&//g' \
		-e 's/\\f[BIRP]//g; s/"//g' "$1" | tr '\n' ' ' | tr -s ' \t' '  ' |
		sed -E 's/ ([,.;:)])/\1/g; s/\( /(/g'
}

# rule NAME HEADER PAGE PHRASE [FORBIDDEN]
rule() {
	h=$top_srcdir/include/aggring/$2
	p=$top_srcdir/man/$3
	if ! flat "$h" | grep -qiF -- "$4"; then
		echo "FAIL: $1: $2 does not say \"$4\""
		status=1
	fi
	if ! flat "$p" | grep -qiF -- "$4"; then
		echo "FAIL: $1: $3 does not say \"$4\" (as $2 does)"
		status=1
	fi
	if [ -n "${5:-}" ] && flat "$p" | grep -qiF -- "$5"; then
		echo "FAIL: $1: $3 still says \"$5\", which $2 contradicts"
		status=1
	fi
}

# ---- force stop ----
rule "a pending function cannot hold a force stop" dispatcher.h \
	man3/agr_dispatcher_stop_gracefully.3 \
	"AGR_PENDING and never finishes cannot hold the stop" \
	"keeps its message, and its group, in progress"
rule "a force stop ends a pending message" dispatcher.h \
	man3/agr_exchange_done.3 "with AGR_INTERRUPTED" \
	"A force stop does not finish a pending function"
rule "AGR_DISCARDED: no function saw it" dispatcher.h \
	man3/agr_dispatcher_new.3 "-ECANCELED becomes AGR_INTERRUPTED"
rule "a function's own -EINTR reads as AGR_INTERRUPTED" dispatcher.h \
	man3/agr_dispatcher_new.3 "A function's own -EINTR has the value of AGR_INTERRUPTED"
rule "a free waits, and names what it waits for" supplier.h \
	man3/agr_supplier_free.3 "every 5 s"
rule "a supplier's free names each worker that has not ended" supplier.h \
	man3/agr_supplier_free.3 "names every 5 s each worker that has not ended"
rule "a pending function cannot hold a dispatcher's free" dispatcher.h \
	man3/agr_dispatcher_free.3 \
	"only a function blocked in a call, or I/O the kernel does not cancel, can keep it waiting" \
	"It blocks while a function never calls"
rule "a dispatcher's free and a zero-copy notification" dispatcher.h \
	man3/agr_dispatcher_free.3 "given up on 10 s into the force stop"
rule "a zero-copy notification is given up on" io.h \
	man3/agr_io_send_zc.3 "gives up 10 s into the stop"
rule "what becomes of a zero-copy buffer then" io.h \
	man3/agr_io_send_zc.3 "the kernel holds its own page references"
rule "a supplier's free and a zero-copy buffer" io.h \
	man3/agr_supplier_free.3 "until the peer reads or closes"

# ---- allocation ----
rule "a forwarded agr_exchange_done() never allocates" dispatcher.h \
	man3/agr_exchange_done.3 "it never allocates and cannot fail" \
	"forwarding allocates"

# ---- ownership ----
rule "an unsupported socket still gets its notification" io.h \
	man3/agr_io_send_zc.3 \
	"still with IORING_CQE_F_MORE, and the notification follows"
rule "sends on one stream socket are sequenced" io.h \
	man3/agr_io_recv.3 "Several sends in flight on one stream socket are not ordered"
rule "a call to one's own worker" scheduler.h \
	man3/agr_scheduler_call_on.3 "-EDEADLK"

if [ $status -eq 0 ]; then
	echo "PASS: header comments and manual pages agree on every rule"
fi
exit $status
