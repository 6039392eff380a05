#!/usr/bin/env bash
# The middleware's cost over the wire: wrk against a trivial handler, bare,
# behind httplimit with its default fields, the legacy fields only and no
# fields, with the default fields set as constants and no middleware (the
# floor under any middleware sending them), and behind ulule/limiter's,
# sethvargo/go-limiter's httplimit and didip/tollbooth's middleware
# (bench/cmd/mwserve). Each round takes all eight in turn, so
# that load changes on this shared machine hit every side alike. Prints
# requests/s per round and, per server, the ratio of its median to the
# bare handler's (target for the default: >= 0.93).
#
#   scripts/bench-middleware.sh              # 3 rounds of 5 s, 64 connections
#   ROUNDS=5 DURATION=10 scripts/bench-middleware.sh
#   BASE_PORT=7930 scripts/bench-middleware.sh   # its eight ports from 7930 (default 18190)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/scripts/lib.sh"
rounds=${ROUNDS:-3} dur=${DURATION:-5} conns=${CONNECTIONS:-64}
b=${BASE_PORT:-18190}
bare=127.0.0.1:$b limited=127.0.0.1:$((b + 1)) legacy=127.0.0.1:$((b + 2)) ulule=127.0.0.1:$((b + 3))
none=127.0.0.1:$((b + 4)) fields=127.0.0.1:$((b + 5)) sethvargo=127.0.0.1:$((b + 6)) tollbooth=127.0.0.1:$((b + 7))
command -v wrk >/dev/null || { echo "wrk is not installed: run scripts/services-up.sh" >&2; exit 1; }
bin=$(mktemp -d)/mwserve
(cd "$root/bench" && go build -o "$bin" ./cmd/mwserve)
"$bin" -bare "$bare" -limited "$limited" -legacy "$legacy" -ulule "$ulule" -none "$none" -fields "$fields" \
  -sethvargo "$sethvargo" -tollbooth "$tollbooth" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$(dirname "$bin")"' EXIT
for a in "$bare" "$limited" "$legacy" "$ulule" "$none" "$fields" "$sethvargo" "$tollbooth"; do wait_port "$a"; done

rps() {
  local out
  out=$(wrk -t2 -c"$conns" -d"${dur}s" "http://$1/")
  if grep -qE 'Non-2xx|Socket errors' <<<"$out"; then
    echo "$out" >&2; echo "failed requests on $1: every answer must be a 200" >&2; exit 1
  fi
  awk '/Requests\/sec/ {print $2}' <<<"$out" | grep . || { echo "$out" >&2; echo "wrk printed no result for $1" >&2; exit 1; }
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
results=""
for i in $(seq "$rounds"); do
  line="round $i:"
  for s in bare:$bare floodgate:$limited floodgate-legacy:$legacy floodgate-none:$none fields-only:$fields ulule:$ulule \
    sethvargo:$sethvargo tollbooth:$tollbooth; do
    r=$(rps "${s#*:}")
    results+="${s%%:*} $r"$'\n'
    line+=" ${s%%:*} $r"
  done
  echo "$line req/s"
done
get() { awk -v n="$1" '$1 == n {print $2}' <<<"$results" | median; }
mb=$(get bare)
for s in floodgate floodgate-legacy floodgate-none fields-only ulule sethvargo tollbooth; do
  awk -v n="$s" -v b="$mb" -v l="$(get "$s")" 'BEGIN {printf "median: %-16s %.0f req/s, %.3f x bare (%.0f)\n", n, l, l/b, b}'
done
