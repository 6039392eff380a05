#!/usr/bin/env bash
# Runs the quickstart gateway (examples/quickstart.yaml, demo upstream) and
# drives its /api/ rule with `floodgate loadtest`: 10 API keys, each allowed
# 100/min and 5/s, so most answers are 429s, each of which must carry
# Retry-After. Progress goes to stderr, the summary table to stdout.
#
#   scripts/loadtest.sh            # 10 s, 32 connections
#   DURATION=5s CONNECTIONS=64 scripts/loadtest.sh
#
# Exit status 1 on any 5xx, transport error or 429 without Retry-After.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
. scripts/lib.sh
work=$(mktemp -d)
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
go -C cmd/floodgate build -o "$work/floodgate" .
if (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null; then
  echo "loadtest: 127.0.0.1:8080 is taken (is make run up?); stop it first, or this would load-test that process" >&2
  exit 1
fi
# Quiet the per-429 warnings; the summary counts them.
sed 's/^headers:/log: {level: error}\nheaders:/' examples/quickstart.yaml >"$work/quickstart.yaml"
"$work/floodgate" serve --no-watch -c "$work/quickstart.yaml" &
pid=$!
wait_port 127.0.0.1:8080
kill -0 "$pid" 2>/dev/null || { echo "loadtest: the daemon did not start" >&2; exit 1; }
"$work/floodgate" loadtest http://127.0.0.1:8080/api/items \
  -d "${DURATION:-10s}" -c "${CONNECTIONS:-32}" --vary-header X-API-Key --keys 10 --check
