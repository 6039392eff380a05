#!/usr/bin/env bash
# The gateway under wrk while its Redis dies and comes back, and under a
# saturated CPU with Redis healthy (docs/OPERATIONS.md, "Store outages").
#
# Usage: scripts/chaos.sh [outage|loaded|redis|all]   (default all)
#
#   outage  wrk for 5 s healthy, 5 s with Redis killed (SIGKILL), 5 s after
#           it restarts; prints the 503 share of the whole run against the
#           outage's share, the p99 latency during the outage against the
#           healthy one, and how long after Redis answered PING again the
#           gateway admitted a request.
#   loaded  wrk for LOADED_SECONDS (default 60) with one busy loop per core
#           running and Redis healthy; prints the 503s (there must be none).
#   redis   the Redis store's fault tests (redisstore/chaos_test.go) at
#           length, on private servers on free ports, started by the
#           tests (a standalone Redis, a Sentinel set by
#           scripts/sentinel-set.sh, a three-master Cluster): decisions counted
#           twice under 10 s of CLIENT KILL TYPE normal every 5 ms (must
#           be 0); increments lost in a planned SENTINEL FAILOVER and in a
#           master crash with its replica 3 s behind, with WithDurability
#           on and off; failures of the healthy masters' keys while one
#           master hangs 4 s (must be 0). Prints the tests' "chaos:" lines
#           and fails when a test does.
#
# It runs its own Redis (PORT_REDIS, default 7850) and daemon (gateway on
# PORT_GATEWAY, default 7851; admin on PORT_ADMIN, default 7852), never the
# test suite's; FAILURE_MODE (default fail-closed) and STORE_TIMEOUT
# (default the configuration's) choose the setup. Needs redis-server and wrk.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
what=${1:-all}
PORT_REDIS=${PORT_REDIS:-7850}
PORT_GATEWAY=${PORT_GATEWAY:-7851}
PORT_ADMIN=${PORT_ADMIN:-7852}
FAILURE_MODE=${FAILURE_MODE:-fail-closed}
LOADED_SECONDS=${LOADED_SECONDS:-60}
WRK=${WRK:-wrk}
work=$(mktemp -d /tmp/floodgate-chaos.XXXXXX)
pids=()
echo 'function delay() return 10 end' >"$work/pace.lua"

cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	redis-cli -p "$PORT_REDIS" shutdown nosave >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

start_redis() {
	redis-server --port "$PORT_REDIS" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
		--logfile "$work/redis.log" &
	redis_pid=$!
	pids+=("$redis_pid")
	for _ in $(seq 200); do
		redis-cli -p "$PORT_REDIS" ping >/dev/null 2>&1 && return 0
		sleep 0.01
	done
	echo "redis on $PORT_REDIS did not start" >&2
	exit 1
}

start_daemon() {
	local timeout_line=""
	[[ -n ${STORE_TIMEOUT:-} ]] && timeout_line="    timeout: $STORE_TIMEOUT"
	cat >"$work/floodgate.yaml" <<EOF
gateway: {listen: "127.0.0.1:$PORT_GATEWAY", upstream: demo}
admin: {listen: "127.0.0.1:$PORT_ADMIN"}
log: {level: warn}
ops: {abuse: {off: true}}
store:
  type: redis
  failure_mode: $FAILURE_MODE
  redis:
    url: redis://127.0.0.1:$PORT_REDIS
$timeout_line
policies:
  wide: {algorithm: fixed-window, quota: 1000000000, window: 1m}
rules:
  - {name: all, match: /, policies: wide}
EOF
	(cd "$root" && go -C cmd/floodgate build -o "$work/floodgate" .)
	"$work/floodgate" serve -c "$work/floodgate.yaml" 2>"$work/daemon.log" &
	pids+=("$!")
	for _ in $(seq 500); do
		curl -fsS "http://127.0.0.1:$PORT_ADMIN/readyz" >/dev/null 2>&1 && return 0
		sleep 0.02
	done
	echo "the daemon did not become ready:" >&2
	cat "$work/daemon.log" >&2
	exit 1
}

# wrk_run SECONDS OUT: 2 threads, 16 connections, each waiting 10 ms
# between requests, with latency percentiles. The pause keeps the request
# rate near the same whether the answers are 200s or instant 503s, so
# that counts of 503s compare with shares of time.
wrk_run() {
	"$WRK" -t2 -c16 -d"$1"s --latency -s "$work/pace.lua" "http://127.0.0.1:$PORT_GATEWAY/x" >"$2"
}

requests() { awk '/requests in/ {print $1}' "$1"; }
non2xx() { awk '/Non-2xx/ {print $NF; f=1} END {if (!f) print 0}' "$1"; }
p99() { awk '$1 == "99%" {print $2}' "$1"; }

outage() {
	start_redis
	start_daemon
	wrk_run 5 "$work/healthy.txt"
	kill -9 "$redis_pid"
	wrk_run 5 "$work/down.txt"
	start_redis
	local back
	back=$(date +%s%N)
	# The first admitted request after Redis answers PING again.
	local first=""
	(
		while :; do
			if [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT_GATEWAY/probe") == 200 ]]; then
				date +%s%N >"$work/first"
				exit 0
			fi
			sleep 0.005
		done
	) &
	local prober=$!
	wrk_run 5 "$work/after.txt"
	wait "$prober" || true
	first=$(cat "$work/first")
	local total=0 bad=0 f
	for f in healthy down after; do
		total=$((total + $(requests "$work/$f.txt")))
		bad=$((bad + $(non2xx "$work/$f.txt")))
	done
	echo "outage ($FAILURE_MODE): $bad non-2xx of $total requests ($(awk -v b="$bad" -v t="$total" 'BEGIN {printf "%.1f", 100*b/t}') %); the outage was 5 s of 15 s (33.3 %)"
	echo "  healthy 5 s: $(requests "$work/healthy.txt") requests, $(non2xx "$work/healthy.txt") non-2xx, p99 $(p99 "$work/healthy.txt")"
	echo "  Redis down 5 s: $(requests "$work/down.txt") requests, $(non2xx "$work/down.txt") non-2xx, p99 $(p99 "$work/down.txt")"
	echo "  after restart 5 s: $(requests "$work/after.txt") requests, $(non2xx "$work/after.txt") non-2xx, p99 $(p99 "$work/after.txt")"
	echo "  recovery: first 200 $(( (first - back) / 1000000 )) ms after Redis answered PING"
	grep -h "breaker" "$work/daemon.log" | sed 's/^/  log: /' || true
	redis-cli -p "$PORT_REDIS" shutdown nosave >/dev/null 2>&1 || true
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	pids=()
}

loaded() {
	start_redis
	start_daemon
	local burners=() n
	for n in $(seq "$(nproc)"); do
		(while :; do :; done) &
		burners+=("$!")
		pids+=("$!")
	done
	wrk_run "$LOADED_SECONDS" "$work/loaded.txt"
	kill "${burners[@]}" 2>/dev/null || true
	echo "loaded ($FAILURE_MODE, $(nproc) busy loops, ${LOADED_SECONDS} s): $(requests "$work/loaded.txt") requests, $(non2xx "$work/loaded.txt") non-2xx, p99 $(p99 "$work/loaded.txt")"
	curl -s "http://127.0.0.1:$PORT_ADMIN/metrics" | awk '/^floodgate_store_duration_seconds_bucket/ {print "  " $0} /^floodgate_store_errors_total/ {print "  " $0}'
	redis-cli -p "$PORT_REDIS" shutdown nosave >/dev/null 2>&1 || true
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	pids=()
}

redis_faults() {
	local out=$work/redis.txt status=0
	(cd "$root" && FLOODGATE_CHAOS=1 go test -count=1 -v \
		-run '^(TestConnectionKillsCountOnce|TestSentinelFailoverDurability|TestClusterShardOutage)$' ./redisstore) >"$out" 2>&1 || status=$?
	grep -E 'chaos:|^(--- FAIL|FAIL|ok)' "$out" | sed -e 's/^ *chaos_test.go:[0-9]*: chaos: /redis: /'
	((status == 0)) || { grep -E '_test.go:[0-9]+:' "$out" | grep -v 'chaos:' >&2; return "$status"; }
}

case $what in
outage) outage ;;
loaded) loaded ;;
redis) redis_faults ;;
all) outage; loaded; redis_faults ;;
*) echo "usage: $0 [outage|loaded|redis|all]" >&2; exit 2 ;;
esac
