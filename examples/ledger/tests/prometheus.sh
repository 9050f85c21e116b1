#!/bin/sh
# ledger_server's /metrics read by Prometheus itself (Debian's
# prometheus package): after a ledger_load run, `promtool check
# metrics` accepts a scrape, then a Prometheus server on loopback
# scrapes the page, and its histogram_quantile(0.5, ...) of the queue
# and processing latencies must fall in the bucket that ledger_load
# read from the same page, and not above twice the median latency
# ledger_load measured at its end (which contains both).
#
# Run by `make check` (top_builddir and top_srcdir set), or by hand from
# the build directory. Exit 0 pass, 1 fail, 77 skip (no promtool,
# prometheus or python3, or no io_uring).
set -u

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(dirname "$0")/../../..}
. "$top_srcdir/tests/lib.sh"
require_tools promtool prometheus python3
ex=$top_builddir/examples/ledger
require_built "$ex/ledger_load" "configure found no hiredis"
use_tmpdir prometheus

step() {
	echo "== $*"
}

# py ARGS...: the helpers at the end of this file, in python3.
py() {
	python3 -c "$pyhelpers" "$@"
}

pyhelpers='
import json, socket, sys, time, urllib.parse, urllib.request

# Loopback only: no http_proxy from the environment.
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

def get(url):
	with opener.open(url, timeout=10) as r:
		return r.read().decode()

def free_port():
	s = socket.socket()
	s.bind(("127.0.0.1", 0))
	port = s.getsockname()[1]
	s.close()
	return port

def query(port, expr):
	url = "http://127.0.0.1:%s/api/v1/query?query=%s" % (
		port, urllib.parse.quote(expr))
	r = json.loads(get(url))
	if r["status"] != "success":
		sys.exit("query %s: %s" % (expr, r))
	res = r["data"]["result"]
	return float(res[0]["value"][1]) if res else None

def wait(what, seconds, ok):
	deadline = time.monotonic() + seconds
	while True:
		try:
			if ok():
				return
		except OSError:
			pass
		if time.monotonic() > deadline:
			sys.exit("not %s after %d s" % (what, seconds))
		time.sleep(0.2)

def buckets(page, family):
	"""(le, cumulative count) of the ledger dispatcher, in order."""
	out = []
	for line in page.splitlines():
		if line.startswith(family + "_bucket{") and \
		   "dispatcher=\"ledger\"" in line:
			le = line.split("le=\"")[1].split("\"")[0]
			out.append((float(le), int(line.rsplit(" ", 1)[1])))
	return out

def median_bucket(bs):
	"""(lower, upper) of the bucket holding the median, as both
	histogram_quantile and ledger_load pick it."""
	rank, lower = 0.5 * bs[-1][1], 0.0
	for le, cum in bs:
		if cum >= rank:
			return lower, le
		lower = le
	sys.exit("no median bucket")

cmd = sys.argv[1]
if cmd == "free-port":
	print(free_port())
elif cmd == "get":
	sys.stdout.write(get(sys.argv[2]))
elif cmd == "wait-ready":
	wait("ready", 60, lambda: get("http://127.0.0.1:%s/-/ready" %
				       sys.argv[2]) is not None)
elif cmd == "wait-scraped":
	# Scraped after the load: the count it holds is that of the page.
	port, expr, want = sys.argv[2], sys.argv[3], float(sys.argv[4])
	wait("scraped", 60, lambda: query(port, expr) == want)
elif cmd == "compare":
	port, page_file, family, load_ms, client_ms = sys.argv[2:7]
	page = open(page_file).read()
	lower, upper = median_bucket(buckets(page, family))
	q = query(port, "histogram_quantile(0.5, sum by (le) (%s_bucket"
		  "{dispatcher=\"ledger\"}))" % family)
	load, client = float(load_ms) / 1e3, float(client_ms) / 1e3
	print("  %s: Prometheus p50 %.6f s, bucket (%.9f, %.9f], "
	      "ledger_load: server %.6f s, client %.6f s" %
	      (family, q, lower, upper, load, client))
	if not lower < q <= upper:
		sys.exit("%s: p50 %g is not in (%g, %g]" % (family, q, lower,
							   upper))
	# ledger_load prints the bucket bound in ms with 3 decimals.
	if abs(load - upper) > 0.5e-6 + 1e-12:
		sys.exit("%s: ledger_load says %g s, the bucket ends at %g" %
			 (family, load, upper))
	# Its bucket is under twice its true median, which the client
	# median holds; ledger_load rounds that to a microsecond.
	if q > 2 * client + 2e-6:
		sys.exit("%s: p50 %g s, over twice the client median %g s" %
			 (family, q, client))
'

step "ledger_server + ledger_load"
start_server "$tmp/server.log" "$ex/ledger_server" --port 0 \
	--dir "$tmp/ledger" --workers 2 --groups 64 --metrics-port 0
mport=$(sed -n 's/^metrics on 127\.0\.0\.1:\([0-9]*\)$/\1/p' \
	"$tmp/server.log")
[ -n "$mport" ] || fail "no 'metrics on' line"
"$ex/ledger_load" --port "$port" --requests 3000 --connections 8 \
	--accounts 40 --pipeline 8 --seed 5 --metrics-port "$mport" \
	>"$tmp/load.log" 2>&1 || { cat "$tmp/load.log" >&2; fail "ledger_load"; }
cat "$tmp/load.log"
client_ms=$(sed -n 's/.* requests\/s; latency p50 \([0-9.]*\) ms.*/\1/p' \
	"$tmp/load.log")
queue_ms=$(sed -n 's/.*server queue latency p50 \([0-9.]*\) ms.*/\1/p' \
	"$tmp/load.log")
proc_ms=$(sed -n 's/.*; processing latency p50 \([0-9.]*\) ms.*/\1/p' \
	"$tmp/load.log")
if [ -z "$client_ms" ] || [ -z "$queue_ms" ] || [ -z "$proc_ms" ]; then
	fail "ledger_load printed no latencies"
fi

step "promtool check metrics"
# The load is over: the page no longer changes but for worker figures.
py get "http://127.0.0.1:$mport/metrics" >"$tmp/page" ||
	fail "GET /metrics"
promtool check metrics <"$tmp/page" || fail "promtool check metrics"
count=$(sed -n 's/^aggring_processing_latency_seconds_count{.*dispatcher="ledger"} \([0-9]*\)$/\1/p' \
	"$tmp/page")
[ "${count:-0}" -gt 0 ] || fail "no processing latency in /metrics"
echo "  $count messages timed"

step "Prometheus scrapes it"
mkdir -p "$tmp/prom"
cat >"$tmp/prom/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: ledger
    static_configs:
      - targets: ['127.0.0.1:$mport']
EOF
promtool check config "$tmp/prom/prometheus.yml" >/dev/null ||
	fail "promtool check config"
server_pid=$pid
tries=0
while :; do
	pport=$(py free-port) || fail "no free port"
	prometheus --config.file="$tmp/prom/prometheus.yml" \
		--storage.tsdb.path="$tmp/prom/data" \
		--web.listen-address="127.0.0.1:$pport" --log.level=warn \
		>"$tmp/prom.log" 2>&1 &
	prom_pid=$!
	pids="$pids $prom_pid"
	py wait-ready "$pport" && break
	kill -KILL "$prom_pid" 2>/dev/null
	wait "$prom_pid" 2>/dev/null
	cat "$tmp/prom.log" >&2
	tries=$((tries + 1))
	[ $tries -lt 3 ] || fail "Prometheus did not start"
done
py wait-scraped "$pport" \
	'sum(aggring_processing_latency_seconds_count{dispatcher="ledger"})' \
	"$count" || { cat "$tmp/prom.log" >&2; fail "no scrape of the page"; }
py compare "$pport" "$tmp/page" aggring_processing_latency_seconds \
	"$proc_ms" "$client_ms" || fail "processing latency"
py compare "$pport" "$tmp/page" aggring_queue_latency_seconds \
	"$queue_ms" "$client_ms" || fail "queue latency"
got=$(py get "http://127.0.0.1:$pport/api/v1/query?query=up") ||
	fail "query up"
echo "$got" | grep -q '"value":\[[0-9.]*,"1"\]' ||
	fail "the scrape target is not up: $got"

step "stop"
kill -TERM "$prom_pid"
i=0
while kill -0 "$prom_pid" 2>/dev/null; do
	i=$((i + 1))
	[ $i -le 400 ] || fail "Prometheus did not stop within 20 s"
	sleep 0.05
done
wait "$prom_pid"
pids=$(echo " $pids " | sed "s/ $prom_pid / /")
pid=$server_pid
stop_server "$tmp/server.log"
echo "PASS"
