#!/usr/bin/env bash
# Daemon throughput with wrk, every process on this machine's cores
# (docs/BENCHMARKS.md, "Daemon"):
#   1. gateway: a plain httputil.ReverseProxy and Floodgate's gateway (memory
#      store, one rule whose quota is never reached) in front of the same
#      upstream; the gateway should reach >= 0.9x the plain proxy;
#   2. decision API: POST /v1/check on the memory store (>= 30,000/s) and on
#      the local Redis of scripts/services-up.sh (>= 25,000/s); for these
#      runs it also prints the daemon's CPU per decision (user + system of
#      its process, from /proc; targets <= 20 us memory, <= 35 us Redis)
#      and, on Redis, redis-server's (INFO cpu) and the script calls per
#      decision (INFO commandstats: how many decisions each call carried).
#
#   scripts/bench-daemon.sh                 # 3 rounds, 5 s per run, 64 connections
#   ROUNDS=5 DURATION=3 CONNECTIONS=64 scripts/bench-daemon.sh
#   MAX_IN_FLIGHT=4 scripts/bench-daemon.sh # store.redis.max_in_flight of the Redis run
#
# "upstream-direct" (wrk against the bare upstream handler) shows what one
# Go HTTP server can answer here at all, next to the targets; "check-floor"
# is a bare Go handler that reads the same check and sends an answer of
# the same fields and length without deciding anything: the HTTP exchange's
# own CPU, under the decision API's (the "margin" lines: the medians of
# each round's daemon CPU minus it).
#
# Exit status 1 when a figure misses its target. Needs wrk (installed by
# scripts/services-up.sh); the Redis run needs FLOODGATE_TEST_REDIS (load
# /tmp/floodgate-test/env); without it that run is skipped, said, and counts
# as a miss.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
. scripts/lib.sh
dur=${DURATION:-5}
rounds=${ROUNDS:-3}
conns=${CONNECTIONS:-64}
threads=${THREADS:-2}
base=${BASE_PORT:-18180}
up=127.0.0.1:$base plain=127.0.0.1:$((base + 1)) gw=127.0.0.1:$((base + 2))
api=127.0.0.1:$((base + 3)) apiredis=127.0.0.1:$((base + 4)) bare=127.0.0.1:$((base + 5))

die() { echo "bench-daemon: $*" >&2; exit 1; }
command -v wrk >/dev/null || die "wrk is not installed: run scripts/services-up.sh"
[[ -f /tmp/floodgate-test/env && -z ${FLOODGATE_TEST_REDIS:-} ]] && . /tmp/floodgate-test/env

work=$(mktemp -d)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "building..." >&2
go -C cmd/floodgate build -o "$work/floodgate" .
go -C cmd/floodgate test -c -o "$work/server.test" ./server   # the helper processes

FG_BENCH_UPSTREAM=$up "$work/server.test" -test.run '^TestHelperUpstream$' >/dev/null 2>&1 & pids+=($!)
uppid=$!
FG_BENCH_PROXY=$plain FG_BENCH_PROXY_UPSTREAM=$up "$work/server.test" -test.run '^TestHelperPlainProxy$' >/dev/null 2>&1 & pids+=($!)
FG_BENCH_BARE=$bare "$work/server.test" -test.run '^TestHelperBareCheck$' >/dev/null 2>&1 & pids+=($!)
barepid=$!

policies='policies:
  roomy: {algorithm: gcra, quota: 1000000000, window: 1s}'
cat >"$work/gateway.yaml" <<YAML
gateway: {listen: "$gw", upstream: "http://$up"}
api: {listen: "$api"}
admin: {listen: "off"}
log: {level: error}
$policies
rules:
  - {name: all, match: "/", key: "{ip}", policies: [roomy]}
YAML
"$work/floodgate" serve --no-watch -c "$work/gateway.yaml" & pids+=($!)
mempid=$!
if [[ -n ${FLOODGATE_TEST_REDIS:-} ]]; then
  inflight=
  [[ -n ${MAX_IN_FLIGHT:-} ]] && inflight=", max_in_flight: $MAX_IN_FLIGHT"
  cat >"$work/redis.yaml" <<YAML
api: {listen: "$apiredis"}
admin: {listen: "off"}
log: {level: error}
store: {type: redis, redis: {url: "redis://$FLOODGATE_TEST_REDIS/0", prefix: "fgbench:", timeout: 500ms$inflight}}
$policies
rules:
  - {name: all, match: "/", policies: [roomy]}
YAML
  "$work/floodgate" serve --no-watch -c "$work/redis.yaml" & pids+=($!)
  redispid=$!
  wait_port "$apiredis"
fi
for a in "$up" "$plain" "$gw" "$api" "$bare"; do wait_port "$a"; done

cat >"$work/check.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"key":"user-42","rule":"all"}'
wrk.headers["Content-Type"] = "application/json"
LUA

# cpu_ticks PID: user + system CPU of a process, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# redis_cpu: used_cpu_user + used_cpu_sys of the bench's Redis, in seconds.
redis_cpu() {
  redis-cli -h "${FLOODGATE_TEST_REDIS%:*}" -p "${FLOODGATE_TEST_REDIS##*:}" info cpu |
    awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.3f", s}'
}
# redis_calls: the script calls (FCALL, EVALSHA, EVAL) the bench's Redis has run.
redis_calls() {
  redis-cli -h "${FLOODGATE_TEST_REDIS%:*}" -p "${FLOODGATE_TEST_REDIS##*:}" info commandstats |
    awk -F'[:=,]' '/^cmdstat_(fcall|evalsha|eval)[:]/ {s += $3} END {print s + 0}'
}
# run NAME URL [wrk args...]: a 1 s warm-up, then the timed run; prints
# requests/s, p99 and, with CPU_PID set, that process's CPU µs per request
# (and with REDIS_CPU=1 redis-server's, and its script calls per request);
# fails on any non-2xx answer or
# socket error.
run() {
  local name=$1 url=$2 out rps p99 t0 t1 r0 r1 c0 n cpu=- rcpu=- calls=-
  shift 2
  wrk -t"$threads" -c"$conns" -d1s "$@" "$url" >/dev/null
  [[ -n ${CPU_PID:-} ]] && t0=$(cpu_ticks "$CPU_PID")
  [[ -n ${REDIS_CPU:-} ]] && r0=$(redis_cpu) c0=$(redis_calls)
  out=$(wrk -t"$threads" -c"$conns" -d"${dur}s" --latency "$@" "$url")
  n=$(awk '/requests in/ {print $1}' <<<"$out")
  if [[ -n ${CPU_PID:-} ]]; then
    t1=$(cpu_ticks "$CPU_PID")
    cpu=$(awk -v a="$t0" -v b="$t1" -v n="$n" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f", (b - a) / hz * 1e6 / n}')
  fi
  if [[ -n ${REDIS_CPU:-} ]]; then
    r1=$(redis_cpu)
    rcpu=$(awk -v a="$r0" -v b="$r1" -v n="$n" 'BEGIN {printf "%.2f", (b - a) * 1e6 / n}')
    calls=$(awk -v a="$c0" -v b="$(redis_calls)" -v n="$n" 'BEGIN {printf "%.3f", (b - a) / n}')
  fi
  if grep -qE 'Non-2xx|Socket errors' <<<"$out"; then
    echo "$out" >&2
    die "$name: failed requests"
  fi
  rps=$(awk '/^Requests\/sec:/ {printf "%d", $2}' <<<"$out")
  [[ -n $rps ]] || die "$name: wrk printed no result"
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  printf '%s %s %s %s %s %s\n' "$name" "$rps" "$p99" "$cpu" "$rcpu" "$calls"
}

# This machine's speed drifts by up to 2x within minutes, so the runs
# alternate over $rounds rounds and each figure is the median of its rounds;
# the gateway's ratio is the median of the ratios of its pairs with the plain
# proxy, each pair taken back to back, plain first in odd rounds and the
# gateway first in even ones.
echo "wrk -t$threads -c$conns -d${dur}s, $rounds rounds, on $(nproc) cores ($(uname -m)), $(go env GOVERSION)" >&2
results=$(
  for ((i = 1; i <= rounds; i++)); do
    CPU_PID=$uppid run upstream-direct "http://$up/api/items" # the ceiling: a bare Go handler on this machine
    if ((i % 2)); then
      run plain-reverseproxy "http://$plain/api/items"
      run floodgate-gateway "http://$gw/api/items"
    else
      run floodgate-gateway "http://$gw/api/items"
      run plain-reverseproxy "http://$plain/api/items"
    fi
    CPU_PID=$barepid run check-floor "http://$bare/v1/check" -s "$work/check.lua"
    CPU_PID=$mempid run check-memory "http://$api/v1/check" -s "$work/check.lua"
    if [[ -n ${FLOODGATE_TEST_REDIS:-} ]]; then
      CPU_PID=$redispid REDIS_CPU=1 run check-redis "http://$apiredis/v1/check" -s "$work/check.lua"
    fi
  done
)
# median reads one number a line and prints their median (nothing for none).
median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else if (NR) print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
get() { awk -v n="$1" '$1 == n {print $2}' <<<"$results" | median | awk '{printf "%d\n", $1}'; }
col() { awk -v n="$1" -v c="$2" '$1 == n && $c != "-" {print $c}' <<<"$results" | median; }
printf '%-20s %12s %12s %12s %12s   %s\n' run requests/s "daemon µs" "Redis µs" "calls/dec" "each round (p99; daemon µs/req; Redis µs/req; calls/req)"
for name in upstream-direct plain-reverseproxy floodgate-gateway check-floor check-memory check-redis; do
  each=$(awk -v n="$name" '$1 == n {printf "%s (%s; %s; %s; %s)  ", $2, $3, $4, $5, $6}' <<<"$results")
  if [[ -n $each ]]; then printf '%-20s %12s %12s %12s %12s   %s\n' "$name" "$(get "$name")" "$(col "$name" 4)" "$(col "$name" 5)" "$(col "$name" 6)" "$each"; fi
done

# margin NAME: the median over the rounds of NAME's daemon µs minus
# check-floor's in the same round.
margin() {
  paste <(awk -v n="$1" '$1 == n {print $4}' <<<"$results") <(awk '$1 == "check-floor" {print $4}' <<<"$results") |
    awk '$1 != "" && $2 != "" {print $1 - $2}' | median
}
for name in check-memory check-redis; do
  m=$(margin "$name")
  if [[ -n $m ]]; then printf '%s daemon µs over check-floor: %.1f (median of the rounds)\n' "$name" "$m"; fi
done

status=0
ratio=$(paste <(awk '$1 == "floodgate-gateway" {print $2}' <<<"$results") <(awk '$1 == "plain-reverseproxy" {print $2}' <<<"$results") |
  awk '{print $1 / $2}' | median | awk '{printf "%.2f", $1}')
echo "gateway / plain proxy: ${ratio}x, median of $rounds pairs (target >= 0.90); ratio of the medians $(awk -v a="$(get floodgate-gateway)" -v b="$(get plain-reverseproxy)" 'BEGIN {printf "%.2f", a / b}')x"
awk -v r="$ratio" 'BEGIN {exit !(r >= 0.9)}' || { echo "MISSED: gateway ratio" >&2; status=1; }
(($(get check-memory) >= 30000)) || { echo "MISSED: check-memory < 30000/s" >&2; status=1; }
if [[ -z $(get check-redis) ]]; then
  echo "SKIPPED: check-redis (FLOODGATE_TEST_REDIS is not set)" >&2; status=1
else
  (($(get check-redis) >= 25000)) || { echo "MISSED: check-redis < 25000/s" >&2; status=1; }
fi
exit $status
