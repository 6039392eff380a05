#!/usr/bin/env bash
# The middleware's cost over the wire: wrk against a trivial handler, bare
# and behind httplimit (bench/cmd/mwserve), alternating ROUNDS times so
# that load changes on this shared machine hit both sides alike. Prints
# requests/s per run and the ratio of the medians (target >= 0.93).
#
#   scripts/bench-middleware.sh              # 3 rounds of 5 s, 64 connections
#   ROUNDS=5 DURATION=10 scripts/bench-middleware.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/scripts/lib.sh"
rounds=${ROUNDS:-3} dur=${DURATION:-5} conns=${CONNECTIONS:-64}
bare=127.0.0.1:18190 limited=127.0.0.1:18191
command -v wrk >/dev/null || { echo "wrk is not installed: run scripts/services-up.sh" >&2; exit 1; }
bin=$(mktemp -d)/mwserve
(cd "$root/bench" && go build -o "$bin" ./cmd/mwserve)
"$bin" -bare "$bare" -limited "$limited" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$(dirname "$bin")"' EXIT
wait_port "$limited"

rps() { wrk -t2 -c"$conns" -d"${dur}s" "http://$1/" | awk '/Requests\/sec/ {print $2}'; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
b=() l=()
for i in $(seq "$rounds"); do
  b+=("$(rps "$bare")"); l+=("$(rps "$limited")")
  echo "round $i: bare ${b[-1]} req/s, middleware ${l[-1]} req/s"
done
mb=$(printf '%s\n' "${b[@]}" | median) ml=$(printf '%s\n' "${l[@]}" | median)
awk -v b="$mb" -v l="$ml" 'BEGIN {printf "median: bare %.0f req/s, middleware %.0f req/s, ratio %.3f\n", b, l, l/b}'
