#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# kfd-preemptd's Prometheus endpoint against the real Prometheus tools
# (Debian package prometheus, scripts/install-toolchain.sh): the endpoint
# answers GET /metrics with the text format 0.0.4 and 404 otherwise;
# `promtool check metrics` finds no problem in what it serves; every series
# equals the value of the JSON statistics it was rendered from (derived
# from the JSON by tests/metrics/metrics_check.py, not by the renderer);
# and a real `prometheus`, on the loopback with a scratch storage, scrapes
# the endpoint every second and answers queries with the same values.
# KTAP, and a last line "N passed, M failed[, K skipped]".
#
# usage: metrics_test.sh [--endpoint ADDR --stats FILE | --scrape FILE --stats FILE]
#   Without arguments it builds and starts the kfd-preemptd example
#   metrics_fixture (fixed statistics) on a free loopback port. With
#   --endpoint it checks a running daemon: ADDR is its `metrics` address
#   (127.0.0.1:PORT, [::1]:PORT or unix:PATH; Prometheus cannot scrape a
#   Unix socket, so its cases are then skipped) and FILE its statistics
#   file; the scrape compared is the one taken from the same snapshot as
#   the file (same written_at_unix_ms). With --scrape it checks a scrape
#   captured elsewhere (the host scenario's, taken in a VM without TCP:
#   scripts/scenario.sh writes out/scenario/metrics.txt and
#   metrics-stats.json): FILE is the body the daemon served and the
#   statistics file must be of the same snapshot. The two HTTP cases are
#   skipped (the VM's scrape took only a 200; the fixture run checks the
#   same server's headers and 404s), and Prometheus scrapes a relay on
#   the loopback that serves FILE verbatim at /metrics. A missing or empty
#   file is one failed case.
set -uo pipefail
. "$(dirname "$0")/../../scripts/lib.sh"

. "$(dirname "$0")/../lib/ktap.sh"

usage() {
	echo "usage: $0 [--endpoint ADDR --stats FILE | --scrape FILE --stats FILE]" >&2
	exit 2
}
endpoint= stats= captured=
while [ $# -gt 0 ]; do
	case $1 in
	--endpoint) [ $# -ge 2 ] || usage; endpoint=$2; shift 2 ;;
	--scrape) [ $# -ge 2 ] || usage; captured=$2; shift 2 ;;
	--stats) [ $# -ge 2 ] || usage; stats=$2; shift 2 ;;
	*) usage ;;
	esac
done
# --stats with exactly one of --endpoint and --scrape, or none of the three.
if [ -n "$endpoint" ] && [ -n "$captured" ]; then
	usage
fi
if { [ -n "$endpoint$captured" ] && [ -z "$stats" ]; } ||
	{ [ -z "$endpoint$captured" ] && [ -n "$stats" ]; }; then
	usage
fi

check_py=$KFDP_ROOT/tests/metrics/metrics_check.py
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$KFDP_ROOT/userspace/Cargo.toml" | head -n1)
scratch=$(mktemp -d)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	rm -rf "$scratch"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# curl arguments and base URL for the endpoint.
curl_to() {
	case $endpoint in
	unix:*) echo "--unix-socket ${endpoint#unix:} http://localhost" ;;
	*) echo "http://$endpoint" ;;
	esac
}

ktap_header

# A captured scrape must be there: the host scenario produces it.
if [ -n "$captured" ]; then
	missing=
	for f in "$captured" "$stats"; do
		[ -s "$f" ] || missing="$missing ${f}"
	done
	if [ -n "$missing" ]; then
		echo "1..1"
		nok "captured_scrape_present # missing or empty:$missing (the host scenario, scripts/scenario.sh, writes them)"
		ktap_summary
		exit 1
	fi
fi
ktap_plan 17

# Setup: the fixture, unless a live endpoint or a captured scrape was given;
# for a captured scrape, the relay that serves it.
if [ -n "$captured" ]; then
	echo "# captured scrape $captured, statistics $stats"
	python3 - "$captured" >"$scratch/relay.log" 2>&1 <<'EOF' &
# The captured body, verbatim, at /metrics as the daemon serves it; 404
# otherwise.
import http.server
import sys

BODY = open(sys.argv[1], "rb").read()


class Relay(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/metrics":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY)
        else:
            self.send_error(404)

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Relay)
print(f"listening on 127.0.0.1:{server.server_address[1]}", flush=True)
server.serve_forever()
EOF
	pids+=($!)
	for _ in $(seq 50); do
		grep -q '^listening on' "$scratch/relay.log" && break
		sleep 0.1
	done
	endpoint=$(sed -n 's/^listening on //p' "$scratch/relay.log")
	[ -n "$endpoint" ] || sed 's/^/# relay: /' "$scratch/relay.log"
	echo "# relay on ${endpoint:-nothing}"
elif [ -z "$endpoint" ]; then
	stats=$scratch/stats.json
	build_log=$scratch/build.log
	# The build of make check's cargo-test phase (`cargo test --workspace`
	# builds the examples too, in userspace/target/debug), so nothing is
	# compiled again there; `cargo build --example` would unify features
	# differently and rebuild. The example's path from cargo's messages.
	(cd "$KFDP_ROOT/userspace" &&
		flock /tmp/kfdp-cargo.lock cargo test --workspace --no-run --quiet \
			--message-format=json-render-diagnostics) >"$scratch/build.json" 2>"$build_log"
	rc=$?
	fixture=$(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line) if line.startswith("{") else {}
    t = m.get("target", {})
    if m.get("reason") == "compiler-artifact" and t.get("name") == "metrics_fixture" \
            and "example" in t.get("kind", []):
        print(m["executable"])
' "$scratch/build.json")
	[ "$rc" != 0 ] || [ -x "$fixture" ] || { echo "no metrics_fixture in cargo's output" >>"$build_log"; rc=1; }
	if [ "$rc" = 0 ]; then
		endpoint=127.0.0.1:$(free_port)
		"$fixture" --listen "$endpoint" --stats-out "$stats" >"$scratch/fixture.log" 2>&1 &
		pids+=($!)
		for _ in $(seq 50); do
			grep -q '^listening on' "$scratch/fixture.log" && break
			sleep 0.1
		done
		grep -q '^listening on' "$scratch/fixture.log" || rc=1
		[ "$rc" = 0 ] || sed 's/^/# fixture: /' "$scratch/fixture.log"
	else
		sed 's/^/# /' "$build_log" | tail -n 30
	fi
	if [ "$rc" != 0 ]; then
		nok "scrape_of_the_statistics_snapshot # the fixture did not start"
		for t in endpoint_serves_metrics other_paths_are_404 promtool_check_metrics exposition_format \
			text_process_as_in_json text_decisions_as_in_json \
			text_histograms_as_in_json text_tenants_as_in_json text_hints_as_in_json \
			prometheus_ready prometheus_scrapes_endpoint prometheus_process_as_in_json \
			prometheus_decisions_as_in_json prometheus_histograms_as_in_json \
			prometheus_tenants_as_in_json prometheus_hints_as_in_json; do
			nok "$t # no endpoint"
		done
		ktap_summary
		exit 1
	fi
	echo "# fixture metrics_fixture on $endpoint"
else
	echo "# live endpoint $endpoint, statistics $stats"
fi

# Scrapes the endpoint into $1 (body) and $1.head (status and headers).
scrape() {
	# shellcheck disable=SC2046 # curl_to gives words
	curl -sS --max-time 5 -D "$1.head" -o "$1" $(curl_to)"${2:-/metrics}"
}

# One scrape and the statistics file of the same snapshot: the file is
# copied, the endpoint scraped, until both carry the same written_at_unix_ms
# (the fixture's always do; a live daemon renews both every second).
# A captured scrape is taken as it is: of the same snapshot or not.
snap=$scratch/snap.json metrics=$scratch/metrics.txt
same=1
if [ -n "$captured" ]; then
	cp "$stats" "$snap" && cp "$captured" "$metrics" &&
		python3 "$check_py" snapshot "$snap" "$metrics" && same=0
else
	for _ in $(seq 20); do
		cp "$stats" "$snap" 2>/dev/null && scrape "$metrics" &&
			python3 "$check_py" snapshot "$snap" "$metrics" && { same=0; break; }
		sleep 0.25
	done
fi

# 1. The scrape and the statistics are of one snapshot.
echo "# $(wc -l <"$metrics" 2>/dev/null) lines; stats_written_timestamp_seconds" \
	"$(sed -n 's/^kfd_preemptd_stats_written_timestamp_seconds //p' "$metrics" 2>/dev/null)," \
	"written_at_unix_ms $(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["written_at_unix_ms"])' "$snap" 2>/dev/null)"
if [ "$same" != 0 ]; then
	if [ -n "$captured" ]; then
		echo "# the captured scrape is not of the statistics' snapshot"
	else
		echo "# no scrape of the statistics' snapshot in 20 tries"
	fi
fi
check $same "scrape_of_the_statistics_snapshot"

# 2. GET /metrics: 200, the text format's content type, a body.
# 3. Anything else: 404.
# A captured scrape has no HTTP answer here: in the VM, kfdp-scenario scrape
# took only a 200; the same server's headers and 404s are the fixture's.
if [ -n "$captured" ]; then
	skip endpoint_serves_metrics "captured scrape: its 200 was checked in the VM, the content type by the fixture run"
	skip other_paths_are_404 "captured scrape: the daemon's HTTP answers are checked by the fixture run"
else
	status=$(head -n1 "$metrics.head" 2>/dev/null | tr -d '\r')
	ctype=$(sed -n 's/^[Cc]ontent-[Tt]ype: *//p' "$metrics.head" 2>/dev/null | tr -d '\r')
	echo "# $status; Content-Type: $ctype"
	[[ $status == HTTP/1.?" 200 "* ]] &&
		[ "$ctype" = "text/plain; version=0.0.4; charset=utf-8" ] && [ -s "$metrics" ]
	check $? "endpoint_serves_metrics"

	rc=0
	for path in / /metricsx /metrics/ /favicon.ico; do
		scrape "$scratch/other" "$path" 2>/dev/null
		s=$(head -n1 "$scratch/other.head" 2>/dev/null | tr -d '\r')
		[[ $s == HTTP/1.?" 404 "* ]] || { echo "# GET $path: $s"; rc=1; }
	done
	check $rc "other_paths_are_404"
fi

# 4. promtool's linter: no problem at all.
promtool check metrics <"$metrics" >"$scratch/promtool.out" 2>&1
rc=$?
sed 's/^/# promtool: /' "$scratch/promtool.out"
[ "$rc" = 0 ] && [ ! -s "$scratch/promtool.out" ]
check $? "promtool_check_metrics"

# 5. HELP and TYPE once per family, unique series, cumulative histograms.
python3 "$check_py" format "$metrics"
check $? "exposition_format"

# 6-10. Every series as the statistics say.
for g in process decisions histograms tenants hints; do
	python3 "$check_py" text "$g" "$snap" "$metrics" "$version"
	check $? "text_${g}_as_in_json"
done

# 11-17. A real Prometheus scrapes it (a captured scrape: the relay).
prom_cases="prometheus_scrapes_endpoint prometheus_process_as_in_json
	prometheus_decisions_as_in_json prometheus_histograms_as_in_json
	prometheus_tenants_as_in_json prometheus_hints_as_in_json"
if [[ $endpoint == unix:* ]]; then
	skip prometheus_ready "Prometheus cannot scrape a Unix socket"
	for t in $prom_cases; do skip "$t" "Prometheus cannot scrape a Unix socket"; done
	ktap_summary
	[ "$fails" = 0 ]
	exit
fi
prom_port=$(free_port)
prom=http://127.0.0.1:$prom_port
cat >"$scratch/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: kfd-preemptd
    static_configs:
      - targets: ['$endpoint']
EOF
prometheus --config.file="$scratch/prometheus.yml" --storage.tsdb.path="$scratch/tsdb" \
	--web.listen-address="127.0.0.1:$prom_port" >"$scratch/prometheus.log" 2>&1 &
prom_pid=$!
pids+=("$prom_pid")
ready=1
for _ in $(seq 150); do
	curl -sf --max-time 2 "$prom/-/ready" >/dev/null && { ready=0; break; }
	kill -0 "$prom_pid" 2>/dev/null || break
	sleep 0.2
done
echo "# $(prometheus --version 2>&1 | head -n1) on 127.0.0.1:$prom_port"
[ "$ready" = 0 ] || tail -n 20 "$scratch/prometheus.log" | sed 's/^/# prometheus: /'
check $ready "prometheus_ready"

# A scrape that carried a snapshot of the statistics file (a copy of it
# taken before the scrape): its time, at which the queries are made.
time= up=
if [ "$ready" = 0 ]; then
	for _ in $(seq 15); do
		cp "$stats" "$snap" 2>/dev/null || continue
		sleep 2.5
		time=$(python3 "$check_py" prom-time "$snap" "$prom") && break
		time=
	done
	up=$(curl -sf --max-time 5 "$prom/api/v1/query" --data-urlencode 'query=up{job="kfd-preemptd"}' |
		python3 -c 'import json, sys; r = json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "none")')
fi
echo "# up=$up, scrape of the snapshot at ${time:-none}"
[ "$up" = 1 ] && [ -n "$time" ]
check $? "prometheus_scrapes_endpoint"

for g in process decisions histograms tenants hints; do
	t=prometheus_${g}_as_in_json
	if [ -z "$time" ]; then
		nok "$t # no scrape"
		continue
	fi
	python3 "$check_py" prom "$g" "$snap" "$prom" "$time" "$version"
	check $? "$t"
done

kill "$prom_pid" 2>/dev/null && wait "$prom_pid" 2>/dev/null
ktap_summary
