#!/bin/sh
# ledger_server's checkpoints under load: killed in the middle of a
# checkpoint cycle and at random, nothing acknowledged is lost or
# doubled, and a restart starts from a checkpoint.
#
# Rounds, each under redis-benchmark's INCR load and examples/
# ledger/tests/ledger_acked.py (which checks every reply and remembers what was
# acknowledged), with a checkpoint every 2000 events, replayed from the
# journal in the first round and copied from the workers' tables in the
# others:
#   checkpoint-write     the server kills itself (SIGKILL) once a new
#                        checkpoint is written but not yet fsync'd;
#   checkpoint-rename    once it is renamed, the directory not fsync'd;
#   compaction           once one journal of two is freed, not the other;
#   kill9                kill -9 from outside, at a random moment.
# After each, a restart must hold every acknowledged INCRBY exactly
# (plus a prefix of the unanswered ones). Then a clean stop takes a last
# checkpoint; --verify must say it uses it, and the restart must replay
# nothing after it; with that checkpoint damaged, --verify must fall
# back to the one before and find the same balances. Last, after some
# cycles of a 1 MiB byte threshold and a clean stop, the directory must
# take under 2 x (checkpoint + threshold) of disk.
#
# Exit 0 pass, 1 fail, 77 skip (no python3, no redis-benchmark, or no
# io_uring).
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/../../..}
. "$top_srcdir/tests/lib.sh"
require_tools python3 redis-benchmark
server=$top_builddir/examples/ledger/ledger_server
acked="python3 $top_srcdir/examples/ledger/tests/ledger_acked.py"

use_tmpdir ckpt

data=$tmp/data
opts="--port 0 --dir $data --workers 2 --groups 256 --checkpoint-events 2000"
: >"$tmp/base"
round=0
for crash in checkpoint-write checkpoint-rename compaction kill9; do
	round=$((round + 1))
	: >"$tmp/server$round.log"
	# The first round's cycles replay the journal, the others copy the
	# workers' tables.
	from=tables
	[ $round -gt 1 ] || from=journal
	echo "== round $round: load, then $crash (cycles from the $from)"
	extra="--checkpoint-from $from"
	[ $crash = kill9 ] || extra="$extra --crash-after $crash"
	# shellcheck disable=SC2086
	start_server "$tmp/server$round.log" "$server" $opts $extra
	redis-benchmark -p "$port" -c 8 -n 100000000 -r 1000 -P 8 -t incr -q \
		>"$tmp/bench$round.log" 2>&1 &
	bench=$!
	pids="$pids $bench"
	$acked load --port "$port" --state "$tmp/state" --base "$tmp/base" \
		--progress "$tmp/progress$round" --seed "$round" \
		>"$tmp/load$round.log" 2>&1 &
	client=$!
	pids="$pids $client"
	if [ $crash = kill9 ]; then
		wait_progress "$tmp/progress$round" 300 "$client"
		kill -KILL "$pid"
	fi
	wait_gone "$pid" 120 "the server (--crash-after $crash)"
	wait "$pid" 2>/dev/null
	[ $crash = kill9 ] ||
		grep -q 'killing myself in a checkpoint cycle' \
			"$tmp/server$round.log" ||
		{ cat "$tmp/server$round.log" >&2; fail "no crash at $crash"; }
	wait_gone "$client" 30 "the client"
	wait "$client" || { cat "$tmp/load$round.log" >&2; fail "client"; }
	kill "$bench" 2>/dev/null
	wait_gone "$bench" 30 "redis-benchmark"
	wait "$bench" 2>/dev/null

	echo "== round $round: restart, every acknowledged INCRBY is there"
	: >"$tmp/restart$round.log"
	# shellcheck disable=SC2086
	start_server "$tmp/restart$round.log" "$server" $opts
	grep 'recovered\|cut off\|INVALID\|torn' "$tmp/restart$round.log"
	$acked check --port "$port" --state "$tmp/state" --out "$tmp/base" ||
		fail "round $round: acknowledged INCRBYs lost or wrong"
	stop_server "$tmp/restart$round.log" >/dev/null
done

echo "== a clean stop takes a checkpoint; a restart starts from it"
grep 'the last at this stop' "$tmp/restart$round.log" ||
	fail "no checkpoint at the clean stop"
"$server" --verify --dir "$data" --dump "$tmp/dump" >"$tmp/verify" ||
	{ cat "$tmp/verify"; fail "verify"; }
cat "$tmp/verify"
grep -q 'checkpoint [0-9]* .* valid and used; ' "$tmp/verify" ||
	fail "--verify does not say which checkpoint it used"
grep -q 'valid and used; 0 events after it$' "$tmp/verify" ||
	fail "the checkpoint at the stop does not cover the whole journal"
awk 'NR == FNR { bal[$1] = $2; next }
     (bal[$1] + 0) != $2 { print "  " $1 ": " (bal[$1] + 0) " != " $2; bad++ }
     END { exit bad > 0 }' "$tmp/dump" "$tmp/base" ||
	fail "the checkpoint and journals disagree with the last check"

echo "== INFO and /metrics show the checkpoint and the recovery"
: >"$tmp/info.log"
# shellcheck disable=SC2086
start_server "$tmp/info.log" "$server" $opts --metrics-port 0
grep 'recovered' "$tmp/info.log"
grep -q 'recovered in .* from checkpoint .* and the 0 events after it' \
	"$tmp/info.log" || fail "the restart replayed past the checkpoint"
seq=$(sed -n 's/^verify: checkpoint \([0-9]*\) .*/\1/p' "$tmp/verify")
mport=$(sed -n 's/^metrics on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$tmp/info.log")
python3 - "$port" "$mport" "$seq" <<'PY' || fail "INFO or /metrics"
import socket, sys, urllib.request
port, mport, seq = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"*2\r\n$4\r\nINFO\r\n$11\r\npersistence\r\n")
info = b""
while b"recovery_time_ms" not in info or not info.endswith(b"\r\n\r\n"):
    chunk = s.recv(65536)
    if not chunk:
        break
    info += chunk
fields = dict(l.split(":", 1) for l in info.decode().split("\r\n") if ":" in l)
for k in ("checkpoint_position", "checkpoint_age_sec", "checkpoint_size",
          "checkpoint_duration_ms", "journal_bytes_since_checkpoint",
          "recovery_time_ms"):
    assert k in fields, k
assert fields["checkpoint_seq"] == seq, fields
assert fields["journal_bytes_since_checkpoint"] == "0", fields
page = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport).read()
page = page.decode()
assert "ledger_checkpoint_seq %s\n" % seq in page, page[-2000:]
for k in ("ledger_checkpoint_position_bytes", "ledger_checkpoint_age_seconds",
          "ledger_checkpoint_size_bytes", "ledger_checkpoint_duration_seconds",
          "ledger_journal_bytes_since_checkpoint", "ledger_recovery_seconds"):
    assert k in page, k
print("INFO and /metrics: checkpoint", seq, "recovery",
      fields["recovery_time_ms"], "ms")
PY
stop_server "$tmp/info.log" >/dev/null

echo "== the newest checkpoint damaged: the one before, and a longer replay"
newest=$(ls "$data"/checkpoint-*.ckpt | tail -1)
[ "$(ls "$data"/checkpoint-*.ckpt | wc -l)" -eq 2 ] ||
	fail "not exactly two checkpoints kept: $(ls "$data")"
size=$(wc -c <"$newest")
printf 'X' | dd of="$newest" bs=1 seek=$((size / 2)) conv=notrunc \
	2>/dev/null
"$server" --verify --dir "$data" --dump "$tmp/dump2" >"$tmp/verify2" 2>&1 ||
	{ cat "$tmp/verify2"; fail "verify with a damaged checkpoint"; }
cat "$tmp/verify2"
grep -q 'torn or corrupt' "$tmp/verify2" ||
	fail "the damaged checkpoint was not reported"
grep -q 'newer ones INVALID' "$tmp/verify2" ||
	fail "--verify does not say it passed a checkpoint over"
sort "$tmp/dump" >"$tmp/dump.sorted"
sort "$tmp/dump2" >"$tmp/dump2.sorted"
cmp -s "$tmp/dump.sorted" "$tmp/dump2.sorted" ||
	fail "the checkpoint before and its longer replay disagree"

echo "== the disk stays under 2 x (checkpoint + threshold)"
# What stays: the two checkpoints; the journal from the previous one's
# positions, less than a threshold once the load is over and INFO shows
# no cycle due (the stop's checkpoint covers the rest); the zeros each
# journal writes ahead, chunks of an eighth of its share of the
# threshold, at least 64 KiB (ledger_journal.h): under 96 KiB each here.
# Slack for blocks: a partial one at each end of each journal, each
# checkpoint's last, the directory's. The old fixed 4 MiB chunk kept
# 2 to 6 MiB of zeros a journal.
limit=1048576
: >"$tmp/disk.log"
start_server "$tmp/disk.log" "$server" --port 0 --dir "$tmp/disk" \
	--workers 2 --groups 256 --checkpoint-bytes $limit --checkpoint-events 0
redis-benchmark -p "$port" -c 8 -n 200000 -r 1000 -P 8 -t incr -q \
	>"$tmp/bench-disk.log" 2>&1 || fail "redis-benchmark"
python3 - "$port" "$limit" <<'PY' || fail "the checkpoints did not catch up"
import socket, sys, time
port, limit = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port))
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    s.sendall(b"*2\r\n$4\r\nINFO\r\n$11\r\npersistence\r\n")
    info = b""
    while not info.endswith(b"\r\n\r\n"):
        chunk = s.recv(65536)
        if not chunk:
            sys.exit(1)
        info += chunk
    f = dict(l.split(":", 1) for l in info.decode().split("\r\n") if ":" in l)
    if (int(f["journal_bytes_since_checkpoint"]) < limit and
            int(f["checkpoints_taken"]) >= 3):
        print("checkpoints taken:", f["checkpoints_taken"])
        sys.exit(0)
    time.sleep(0.05)  # polls for a state; no ordering rests on a delay
sys.exit(1)
PY
stop_server "$tmp/disk.log" >/dev/null
ckpt=$(wc -c <"$(ls "$tmp/disk"/checkpoint-*.ckpt | tail -1)")
used=$(du -sk "$tmp/disk" | cut -f1)
bound=$(((2 * (ckpt + limit) + 4096 * (2 * 2 + 3)) / 1024))
echo "disk: $used KiB; 2 x ($ckpt + $limit) B + 28 KiB = $bound KiB"
[ "$used" -le "$bound" ] || { ls -ls "$tmp/disk"; fail "disk over the bound"; }
echo "PASS"
