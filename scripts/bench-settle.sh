#!/usr/bin/env bash
# Redis's cost of Reserve + Settle against a plain Take, in instructions
# (docs/BENCHMARKS.md, "Reserve and settle against a plain Take"): each run
# starts a private redis-server under valgrind's callgrind on PORT, drives
# it with bench/cmd/capacity for D (Take, -settle, and -twice: two Takes,
# the cheapest two calls a request can make), stops it, and divides the
# instructions it ran, less those of an idle start and stop, by the
# decisions made. Instruction counts do not depend on the machine's load;
# the batching (decisions per script call) still does a little.
#
# Environment: PORT (7622), ALGS (fixed-window token-bucket), D (4s),
# CAPACITY (a built capacity binary; default: built from this checkout).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
port=${PORT:-7622}
work=$(mktemp -d)
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
capacity=${CAPACITY:-$work/capacity}
[ -n "${CAPACITY:-}" ] || (cd bench && go build -o "$capacity" ./cmd/capacity)
secs=${D:-4s}

# run MODE ALG prints the instructions and, unless idle, decisions/s and decisions per call.
run() {
  valgrind --tool=callgrind --callgrind-out-file="$work/out" redis-server --port "$port" --bind 127.0.0.1 \
    --save '' --appendonly no >/dev/null 2>&1 &
  local vg=$!
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
  local load=""
  if [ "$1" != idle ]; then
    local flag=""; [ "$1" = take ] || flag="-$1"
    load=$("$capacity" -redis "127.0.0.1:$port" -alg "$2" -c 64 -d "$secs" -rounds 1 $flag 2>/dev/null |
      awk -v a="$2" '$3 == a && $4 == 64 {print $5, $7}')
  fi
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$vg" || true
  echo "$(awk '/^totals:/ {print $2}' "$work/out") $load"
}

idle=$(run idle -)
echo "idle start and stop: $idle instructions"
printf '%-14s %-7s %14s %10s %8s\n' algorithm mode instr/decision "× Take" per-call
for alg in ${ALGS:-fixed-window token-bucket}; do
  take=""
  for mode in take settle twice; do
    read -r ir rate per <<<"$(run "$mode" "$alg")"
    n=$(awk -v r="$rate" -v d="${secs%s}" 'BEGIN {print r * d}')
    each=$(awk -v i="$ir" -v z="$idle" -v n="$n" 'BEGIN {printf "%.0f", (i - z) / n}')
    [ -n "$take" ] || take=$each
    printf '%-14s %-7s %14s %10s %8s\n' "$alg" "$mode" "$each" "$(awk -v a="$each" -v b="$take" 'BEGIN {printf "%.2f", a / b}')" "$per"
  done
done
