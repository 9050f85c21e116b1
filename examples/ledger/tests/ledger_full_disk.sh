#!/bin/sh
# ledger_server's journal out of room mid-batch (ledger_full_disk.py
# beside it): what was acknowledged comes back after a restart, and
# nothing that was refused. Exit 0 pass, 1 fail, 77 skip.
set -u
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/../../..}
. "$top_srcdir/tests/lib.sh"
require_tools python3
use_tmpdir full-disk
python3 "$top_srcdir/examples/ledger/tests/ledger_full_disk.py" \
	"$top_builddir/examples/ledger/ledger_server" "$tmp/data"
