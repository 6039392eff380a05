#!/usr/bin/env bash
# What hostile clients cost the daemon's listeners (docs/DEPLOY.md,
# "Listener bounds"): the daemon built and started with the memory store,
# a gateway (demo upstream) and the envoy_rls face at their default
# bounds, then bench/cmd/listenload reading its RSS from /proc:
#   1. 96 ShouldRateLimit calls in flight, each with 15 MiB of metadata;
#   2. 96 maximal accepted calls through grpc-go (60,000 B of metadata,
#      a 120,000 B message: just under the 64 KiB and 128 KiB caps);
#   3. 10,000 idle keep-alive connections on the gateway, then a new client.
# The file-descriptor limit must allow 10,000 connections per process.
# Environment: DURATION of each RLS run (5s), CONNS (10000).
# Ports 7610-7612 on 127.0.0.1.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
dur=${DURATION:-5s} conns=${CONNS:-10000}
work=$(mktemp -d)
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"
go -C cmd/floodgate build -o "$work/floodgate" .
go -C bench build -o "$work/listenload" ./cmd/listenload
mkdir "$work/limits"
cat > "$work/limits/edge.yaml" <<'YAML'
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 1000000}
YAML
cat > "$work/floodgate.yaml" <<YAML
gateway: {listen: "127.0.0.1:7610", upstream: demo}
envoy_rls: {listen: "127.0.0.1:7611", config: $work/limits}
admin: {listen: "127.0.0.1:7612"}
log: {level: error}
policies:
  api: {algorithm: gcra, quota: 1000000, window: 1s}
rules:
  - {name: all, match: "/", policies: [api]}
YAML
# fresh starts a new daemon for each run, so each starts from idle.
fresh() {
  if [[ -n $pid ]]; then kill "$pid"; wait "$pid" 2>/dev/null || true; fi
  "$work/floodgate" serve -c "$work/floodgate.yaml" &
  pid=$!
  for _ in $(seq 50); do
    curl -fs http://127.0.0.1:7612/readyz >/dev/null 2>&1 && break
    sleep 0.2
  done
  sleep 1
}
fresh
echo "== 96 calls in flight, 15 MiB of metadata each"
"$work/listenload" -pid "$pid" rls -addr 127.0.0.1:7611 -calls 96 -metadata $((15 << 20)) -for "$dur"
fresh
echo "== 96 calls in flight through grpc-go, 60,000 B of metadata and a 120,000 B message each"
"$work/listenload" -pid "$pid" rls -grpc -addr 127.0.0.1:7611 -calls 96 -metadata 60000 -message 120000 -for "$dur"
fresh
echo "== $conns idle keep-alive connections on the gateway"
"$work/listenload" -pid "$pid" idle -addr 127.0.0.1:7610 -conns "$conns"
