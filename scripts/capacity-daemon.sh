#!/usr/bin/env bash
# The daemon's CPU per decision, the capacity model's last input
# (docs/SCALING.md): starts `floodgate serve` with the Redis store, drives
# POST /v1/check with wrk over 10,000 keys, and reads the daemon process's
# own CPU time (/proc/PID/stat) around each run, so wrk's and Redis' CPU are
# not counted. Prints, per round and as the median of the rounds, checks/s
# and daemon CPU µs per check.
#
# Environment: REDIS (default $FLOODGATE_TEST_REDIS) a standalone address,
# or CLUSTER a comma-separated list of Cluster seeds; ROUNDS (5), DURATION
# (5, seconds), CONNECTIONS (64), PORT (18280).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
. scripts/lib.sh
[[ -f /tmp/floodgate-test/env && -z ${FLOODGATE_TEST_REDIS:-} ]] && . /tmp/floodgate-test/env
rounds=${ROUNDS:-5} dur=${DURATION:-5} conns=${CONNECTIONS:-64} addr=127.0.0.1:${PORT:-18280}
command -v wrk >/dev/null || die "wrk is not installed: run scripts/services-up.sh"

work=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
go -C cmd/floodgate build -o "$work/floodgate" .

if [[ -n ${CLUSTER:-} ]]; then
  seeds=$(tr , '\n' <<<"$CLUSTER" | sed 's/.*/"&"/' | paste -sd, -)
  redis="cluster: [$seeds]"
else
  redis="url: \"redis://${REDIS:-${FLOODGATE_TEST_REDIS:?set REDIS or CLUSTER}}/0\""
fi
cat >"$work/check.yaml" <<YAML
api: {listen: "$addr"}
admin: {listen: "off"}
log: {level: error}
store: {type: redis, redis: {$redis, prefix: "fgcap:", timeout: 500ms}}
policies:
  roomy: {algorithm: gcra, quota: 1000000000, window: 1s}
rules:
  - {name: all, match: "/", policies: [roomy]}
YAML
"$work/floodgate" serve --no-watch -c "$work/check.yaml" & pid=$!
wait_port "$addr"

cat >"$work/check.lua" <<'LUA'
local n = 0
request = function()
  n = n + 1
  return wrk.format("POST", "/v1/check", {["Content-Type"] = "application/json"},
    '{"key":"user-' .. (n % 10000) .. '","rule":"all"}')
end
LUA

ticks=$(getconf CLK_TCK)
cpu() { awk -v t="$ticks" '{printf "%.6f\n", ($14 + $15) / t}' "/proc/$pid/stat"; }
echo "floodgate serve, Redis: $redis; wrk -t1 -c$conns -d${dur}s, $rounds rounds; load average $(cut -d' ' -f1-3 /proc/loadavg)"
wrk -t1 -c"$conns" -d1s -s "$work/check.lua" "http://$addr" >/dev/null
results=$(for ((i = 1; i <= rounds; i++)); do
  c0=$(cpu)
  out=$(wrk -t1 -c"$conns" -d"${dur}s" -s "$work/check.lua" "http://$addr")
  c1=$(cpu)
  grep -qE 'Non-2xx|Socket errors' <<<"$out" && { echo "$out" >&2; die "failed requests"; }
  n=$(awk '$2 == "requests" && $3 == "in" {print $1}' <<<"$out")
  awk -v n="$n" -v c0="$c0" -v c1="$c1" -v d="$dur" 'BEGIN {printf "%.0f %.2f\n", n / d, (c1 - c0) * 1e6 / n}'
done)
median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "rounds (checks/s, daemon CPU µs/check):" $(tr '\n' ';' <<<"$results")
echo "median: $(awk '{print $1}' <<<"$results" | median) checks/s, $(awk '{print $2}' <<<"$results" | median) daemon CPU µs/check"
