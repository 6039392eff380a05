#!/usr/bin/env bash
# The differential run of docs/ENVOY.md ("Same answers as envoyproxy/ratelimit"):
# envoyproxy/ratelimit and Floodgate's envoy_rls, each on its own database
# of one private redis-server, load envoyrls/testdata/limits/parity.yaml and
# scripts/testdata/ratelimit-diff/stream.yaml (post-charged in Floodgate), and
# bench/cmd/rlsdiff sends every request of
# scripts/testdata/ratelimit-diff/cases.txt to both at the same moment,
# comparing overall_code, each descriptor's code, current_limit,
# limit_remaining, duration_until_reset, dynamic_metadata and the
# RateLimit-Limit/-Remaining/-Reset headers (ratelimit's
# LIMIT_RESPONSE_HEADERS_ENABLED, Floodgate's limit_headers). Exits 1 on a
# difference the case file does not list.
#
# ratelimit is installed with `go install` into PEERS (default
# $HOME/.cache/floodgate-peers), never into the repository. Ports
# 7400-7405 on 127.0.0.1. Environment: PEERS, RATELIMIT_VERSION.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
. scripts/lib.sh
peers=${PEERS:-$HOME/.cache/floodgate-peers}
redis_port=7400 fg=127.0.0.1:7401 rl=127.0.0.1:7403

install_ratelimit "$peers"
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
go -C cmd/floodgate build -o "$work/floodgate" .
go -C bench build -o "$work/rlsdiff" ./cmd/rlsdiff
mkdir -p "$work/rt/ratelimit/config"
cp envoyrls/testdata/limits/parity.yaml scripts/testdata/ratelimit-diff/stream.yaml "$work/rt/ratelimit/config/"

redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --logfile "$work/redis.log" &
pids+=($!)
wait_port "127.0.0.1:$redis_port"

cat >"$work/floodgate.yaml" <<YAML
envoy_rls: {listen: "$fg", config: "$work/rt/ratelimit/config", dynamic_metadata: true, limit_headers: true, post_charge: [stream]}
admin: {listen: "127.0.0.1:7402"}
log: {level: warn}
store: {type: redis, redis: {url: "redis://127.0.0.1:$redis_port/1", timeout: 1s}}
YAML
"$work/floodgate" serve -c "$work/floodgate.yaml" --no-watch 2>"$work/floodgate.log" &
pids+=($!)
wait_port "$fg"

env USE_STATSD=false DISABLE_STATS=true LOG_LEVEL=warn BACKEND_TYPE=redis REDIS_SOCKET_TYPE=tcp \
  REDIS_URL=127.0.0.1:$redis_port RUNTIME_ROOT="$work/rt" RUNTIME_SUBDIRECTORY=ratelimit \
  RUNTIME_APPDIRECTORY=config RUNTIME_WATCH_ROOT=false RESPONSE_DYNAMIC_METADATA=true \
  LIMIT_RESPONSE_HEADERS_ENABLED=true \
  HOST=127.0.0.1 PORT=7404 DEBUG_HOST=127.0.0.1 DEBUG_PORT=7405 GRPC_HOST=127.0.0.1 GRPC_PORT=7403 \
  "$peers/bin/service_cmd" 2>"$work/ratelimit.log" &
pids+=($!)
wait_port "$rl"
sleep 1 # ratelimit loads its files after it listens

# The cases' limits are hours and a minute: start well inside both.
while (( 10#$(date +%M) == 59 || 10#$(date +%S) > 45 )); do sleep 1; done
status=0
"$work/rlsdiff" -a "$rl" -b "$fg" -cases scripts/testdata/ratelimit-diff/cases.txt || status=$?
if (( status != 0 )); then
  log "--- floodgate.log"; tail -20 "$work/floodgate.log" >&2
  log "--- ratelimit.log"; tail -20 "$work/ratelimit.log" >&2
fi
exit "$status"
