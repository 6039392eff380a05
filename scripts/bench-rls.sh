#!/usr/bin/env bash
# Envoy's rate limit service side by side (docs/BENCHMARKS.md, "Envoy rate
# limit service"): Floodgate's envoy_rls face against envoyproxy/ratelimit
# on one private Redis, and against gubernator on the memory store, the
# same gRPC load for each (64 concurrent calls, 1 key and 1,000 keys, a
# quota never reached), rounds interleaved, beside bench/cmd/rlsnop (a
# service answering OK without deciding: the floor of a gRPC call) and
# rlsnop -redis (the same after one PING per call, pipelined by rueidis:
# the floor of a call that asks Redis once); the script calls Redis ran
# per Floodgate decision (its batches); then every
# contender at a fixed offered load (RATE calls/s, open loop) for latency
# quantiles; and a differential run of one request sequence and one config
# file against ratelimit and Floodgate.
#
# The peers are Go modules installed with `go install` into a scratch
# directory under /tmp, never into the repository: the first run needs
# the Go module proxy, and redis-server on PATH. ROUNDS=5 DURATION=5s
# takes about 8 minutes.
#
# Environment: ROUNDS (5), DURATION (5s), RATE (5000; 0 skips the latency
# runs), PEERS (the scratch directory, default /tmp/floodgate-rls-peers),
# RATELIMIT_VERSION, GUBERNATOR_VERSION.
# Ports 7810-7840 on 127.0.0.1.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
. scripts/lib.sh
rounds=${ROUNDS:-5} dur=${DURATION:-5s} offered=${RATE:-5000}
peers=${PEERS:-/tmp/floodgate-rls-peers}
gub_version=${GUBERNATOR_VERSION:-v2.13.0}
redis_port=7840 fg_mem=127.0.0.1:7810 fg_redis=127.0.0.1:7811 rl=127.0.0.1:7820 gub=127.0.0.1:7830 nop=127.0.0.1:7815 nop_redis=127.0.0.1:7816

install_ratelimit "$peers"
if [[ ! -x $peers/bin/gubernator ]]; then
  log "installing gubernator $gub_version into $peers"
  GOBIN=$peers/bin go install "github.com/gubernator-io/gubernator/v2/cmd/gubernator@$gub_version"
fi
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
go -C cmd/floodgate build -o "$work/floodgate" .
(cd bench && go build -o "$work/rlsload" ./cmd/rlsload && go build -o "$work/rlsnop" ./cmd/rlsnop)

suffix=$(date +%s)
mkdir -p "$work/rt/ratelimit/config"
"$work/rlsload" -write-config "$work/rt/ratelimit/config" -suffix "$suffix"

redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --logfile "$work/redis.log" &
redis_pid=$!; pids+=("$redis_pid")
wait_port "127.0.0.1:$redis_port"

floodgate() { # name listen admin store
  cat >"$work/$1.yaml" <<YAML
envoy_rls: {listen: "$2", config: "$work/rt/ratelimit/config"}
admin: {listen: "$3"}
log: {level: warn}
store: $4
YAML
  "$work/floodgate" serve -c "$work/$1.yaml" --no-watch 2>"$work/$1.log" &
  pids+=($!)
  eval "$1_pid=$!"
  wait_port "$2"
}
floodgate fgmem "$fg_mem" 127.0.0.1:7812 '{type: memory}'
floodgate fgredis "$fg_redis" 127.0.0.1:7813 "{type: redis, redis: {url: \"redis://127.0.0.1:$redis_port/0\", timeout: 1s}}"

env USE_STATSD=false DISABLE_STATS=true LOG_LEVEL=warn BACKEND_TYPE=redis REDIS_SOCKET_TYPE=tcp \
  REDIS_URL=127.0.0.1:$redis_port RUNTIME_ROOT="$work/rt" RUNTIME_SUBDIRECTORY=ratelimit \
  RUNTIME_APPDIRECTORY=config RUNTIME_WATCH_ROOT=false HOST=127.0.0.1 PORT=7821 \
  DEBUG_HOST=127.0.0.1 DEBUG_PORT=7822 GRPC_HOST=127.0.0.1 GRPC_PORT=7820 \
  "$peers/bin/service_cmd" 2>"$work/ratelimit.log" &
rl_pid=$!; pids+=("$rl_pid")
wait_port "$rl"

env GUBER_GRPC_ADDRESS=$gub GUBER_HTTP_ADDRESS=127.0.0.1:7831 GUBER_ADVERTISE_ADDRESS=$gub \
  GUBER_PEER_DISCOVERY_TYPE=member-list GUBER_MEMBERLIST_ADDRESS=127.0.0.1:7832 \
  GUBER_MEMBERLIST_ADVERTISE_ADDRESS=127.0.0.1:7832 GUBER_MEMBERLIST_BIND_ADDRESS=127.0.0.1:7832 \
  GUBER_MEMBERLIST_KNOWN_NODES=127.0.0.1:7832 OTEL_TRACES_EXPORTER=none GUBER_LOG_LEVEL=warn \
  "$peers/bin/gubernator" >"$work/gubernator.log" 2>&1 &
gub_pid=$!; pids+=("$gub_pid")
wait_port "$gub"
"$work/rlsnop" -addr "$nop" 2>"$work/rlsnop.log" &
nop_pid=$!; pids+=("$nop_pid")
wait_port "$nop"
"$work/rlsnop" -addr "$nop_redis" -redis "127.0.0.1:$redis_port" 2>"$work/rlsnop-redis.log" &
nopr_pid=$!; pids+=("$nopr_pid")
wait_port "$nop_redis"
sleep 2 # ratelimit loads its files, gubernator's memberlist settles

# script_calls: the Redis function and script calls since the last
# CONFIG RESETSTAT (Floodgate's batches: one call carries a batch).
script_calls() {
  cli "$redis_port" INFO commandstats | awk -F'[:=,]' '$1 ~ /^cmdstat_(fcall|fcall_ro|evalsha|eval)$/ {n += $3} END {print n + 0}'
}

echo "== differential: envoyproxy/ratelimit (A) and Floodgate on Redis (B), one sequence, one config file"
# The sequence's windows are an hour long: start it well inside one.
while (( 10#$(date +%M) == 59 && 10#$(date +%S) > 40 )); do sleep 1; done
"$work/rlsload" -diff "$rl,$fg_redis" -suffix "$suffix" || echo "differential: answers differ"

echo "== load: $rounds rounds of $dur, 64 concurrent calls, interleaved"
results=$work/results
for ((r = 1; r <= rounds; r++)); do
  for keys in 1 1000; do
    cli "$redis_port" CONFIG RESETSTAT >/dev/null
    line=$("$work/rlsload" -label floodgate-redis -addr "$fg_redis" -keys $keys -duration "$dur" -pids "$fgredis_pid,$redis_pid" -redis-pid "$redis_pid")
    calls=$(script_calls)
    printf '%s\t%s script calls\n' "$line" "$calls" | tee -a "$results"
    "$work/rlsload" -label ratelimit-redis -addr "$rl" -keys $keys -duration "$dur" -pids "$rl_pid,$redis_pid" -redis-pid "$redis_pid" | tee -a "$results"
    "$work/rlsload" -label floodgate-memory -addr "$fg_mem" -keys $keys -duration "$dur" -pids "$fgmem_pid" | tee -a "$results"
    "$work/rlsload" -label gubernator -proto gubernator -addr "$gub" -keys $keys -duration "$dur" -pids "$gub_pid" | tee -a "$results"
    "$work/rlsload" -label rlsnop -addr "$nop" -keys $keys -duration "$dur" -pids "$nop_pid" | tee -a "$results"
    "$work/rlsload" -label rlsnop-redis -addr "$nop_redis" -keys $keys -duration "$dur" -pids "$nopr_pid,$redis_pid" -redis-pid "$redis_pid" | tee -a "$results"
  done
done

if (( offered > 0 )); then
  echo "== latency: $rounds rounds of $dur at $offered calls/s offered (open loop), 1,000 keys, interleaved"
  latency=$work/latency
  for ((r = 1; r <= rounds; r++)); do
    "$work/rlsload" -label floodgate-redis -addr "$fg_redis" -keys 1000 -rate "$offered" -duration "$dur" -pids "$fgredis_pid" | tee -a "$latency"
    "$work/rlsload" -label ratelimit-redis -addr "$rl" -keys 1000 -rate "$offered" -duration "$dur" -pids "$rl_pid" | tee -a "$latency"
    "$work/rlsload" -label floodgate-memory -addr "$fg_mem" -keys 1000 -rate "$offered" -duration "$dur" -pids "$fgmem_pid" | tee -a "$latency"
    "$work/rlsload" -label gubernator -proto gubernator -addr "$gub" -keys 1000 -rate "$offered" -duration "$dur" -pids "$gub_pid" | tee -a "$latency"
    "$work/rlsload" -label rlsnop -addr "$nop" -keys 1000 -rate "$offered" -duration "$dur" -pids "$nop_pid" | tee -a "$latency"
    "$work/rlsload" -label rlsnop-redis -addr "$nop_redis" -keys 1000 -rate "$offered" -duration "$dur" -pids "$nopr_pid" | tee -a "$latency"
  done
fi

echo "== medians of $rounds rounds (server CPU: Redis' included for the Redis runs)"
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
for keys in 1 1000; do
  declare -A rate cpu rcpu
  for t in floodgate-redis ratelimit-redis floodgate-memory gubernator rlsnop rlsnop-redis; do
    rate[$t]=$(awk -F'\t' -v t=$t -v k="$keys keys" '$1==t && $2==k {print $3+0}' "$results" | median)
    cpu[$t]=$(awk -F'\t' -v t=$t -v k="$keys keys" '$1==t && $2==k {print $4+0}' "$results" | median)
    printf '%s keys\t%-17s %8.0f decisions/s\t%6.1f µs CPU/decision\n' "$keys" "$t" "${rate[$t]}" "${cpu[$t]}"
  done
  for t in floodgate-redis ratelimit-redis rlsnop-redis; do
    rcpu[$t]=$(awk -F'\t' -v t=$t -v k="$keys keys" '$1==t && $2==k {print $6+0}' "$results" | median)
  done
  awk -v a="${rcpu[floodgate-redis]}" -v b="${rcpu[ratelimit-redis]}" -v k="$keys" \
    'BEGIN {printf "%s keys\tRedis CPU/decision: Floodgate %.2f µs, ratelimit %.2f µs, ratio %.2f×\n", k, a, b, a/b}'
  awk -v a="${rate[floodgate-redis]}" -v b="${rate[ratelimit-redis]}" -v c="${rate[floodgate-memory]}" -v d="${rate[gubernator]}" -v e="${rate[rlsnop]}" -v k="$keys" \
    'BEGIN {printf "%s keys\tFloodgate/ratelimit on Redis %.2f×\tFloodgate memory/gubernator %.2f×\tthe floor: rlsnop/ratelimit %.2f×, rlsnop/gubernator %.2f×\n", k, a/b, c/d, e/b, e/d}'
  # The ceiling of Floodgate on Redis on this machine: every core busy
  # (client, daemon and redis-server share them) with Floodgate on
  # memory's whole cost per decision plus redis-server's CPU per decision,
  # as if the daemon's Redis client cost nothing.
  awk -v m="${rate[floodgate-memory]}" -v r="${rcpu[floodgate-redis]}" -v n="$(nproc)" -v a="${rate[floodgate-redis]}" -v b="${rate[ratelimit-redis]}" -v k="$keys" \
    'BEGIN {c = 1 / (1 / m + r / (n * 1e6)); printf "%s keys\tthe ceiling on Redis (memory + redis-server CPU, %d cores): %.0f decisions/s, %.2f× ratelimit; Floodgate on Redis reaches %.0f %% of it\n", k, n, c, c / b, 100 * a / c}'
  # The floor of a service that asks Redis once per call: rlsnop -redis,
  # and the same with redis-server spending Floodgate's CPU per decision
  # instead of a PING's (the decisions' own work in Redis).
  awk -v p="${rate[rlsnop-redis]}" -v pr="${rcpu[rlsnop-redis]}" -v r="${rcpu[floodgate-redis]}" -v n="$(nproc)" -v a="${rate[floodgate-redis]}" -v b="${rate[ratelimit-redis]}" -v k="$keys" \
    'BEGIN {f = 1 / (1 / p + (r - pr) / (n * 1e6)); printf "%s keys\tthe floor on Redis: rlsnop -redis %.0f decisions/s, %.2f× ratelimit; with Floodgate'"'"'s redis-server CPU: %.0f decisions/s, %.2f× ratelimit; Floodgate on Redis reaches %.0f %% of it\n", k, p, p / b, f, f / b, 100 * a / f}'
  # Rounds are interleaved, so each round's ratio compares contenders
  # under the same load from elsewhere; its median is steadier than the
  # ratio of medians when that load drifts.
  paired() { paste <(awk -F'\t' -v t="$1" -v k="$keys keys" '$1==t && $2==k {print $3+0}' "$results") \
    <(awk -F'\t' -v t="$2" -v k="$keys keys" '$1==t && $2==k {print $3+0}' "$results") | awk '{print $1 / $2}' | median; }
  printf '%s keys\tmedian of round ratios: Floodgate/ratelimit on Redis %.2f×, rlsnop -redis/ratelimit %.2f×, Floodgate memory/gubernator %.2f×, rlsnop/gubernator %.2f×\n' \
    "$keys" "$(paired floodgate-redis ratelimit-redis)" "$(paired rlsnop-redis ratelimit-redis)" "$(paired floodgate-memory gubernator)" "$(paired rlsnop gubernator)"
  awk -v a="${cpu[floodgate-redis]}" -v c="${cpu[floodgate-memory]}" -v e="${cpu[rlsnop]}" -v r="${rcpu[floodgate-redis]}" -v k="$keys" \
    'BEGIN {printf "%s keys\tserver CPU above rlsnop per decision: Floodgate memory %.1f µs, Floodgate Redis %.1f µs (redis-server included; the daemon alone %.1f µs)\n", k, c-e, a-e, a-r-e}'
  awk -F'\t' -v k="$keys keys" '$1=="floodgate-redis" && $2==k {split($3, d, " "); split($7, c, " "); if (c[1] > 0) print d[1] * '"${dur%s}"' / c[1]}' "$results" | median |
    awk -v k="$keys" '{printf "%s keys\tFloodgate on Redis: %.1f decisions per script call (median of rounds)\n", k, $1}'
done
if (( offered > 0 )); then
  echo "== latency medians of $rounds rounds at $offered calls/s offered, 1,000 keys (µs)"
  for t in floodgate-redis ratelimit-redis floodgate-memory gubernator rlsnop rlsnop-redis; do
    q() { awk -F'\t' -v t=$t -v f="$1" '$1==t {print $f+0}' "$latency" | median; }
    printf '%-17s p50 %6.0f\tp99 %6.0f\tp99.9 %6.0f\tanswered/s %6.0f\tserver CPU/decision %5.1f\n' "$t" "$(q 5)" "$(q 6)" "$(q 7)" "$(q 4)" "$(q 10)"
    eval "p99_${t//-/_}=$(q 6)"
  done
  awk -v a="$p99_floodgate_redis" -v b="$p99_ratelimit_redis" -v c="$p99_floodgate_memory" -v d="$p99_gubernator" \
    'BEGIN {printf "p99 ratios: Floodgate Redis/ratelimit %.2f×, Floodgate memory/gubernator %.2f×\n", a/b, c/d}'
  # The same per round (see the rates above), beside the floor: the p99 of
  # rlsnop, which decides nothing, against ratelimit's.
  p99s() { awk -F'\t' -v t="$1" '$1==t {print $6+0}' "$latency"; }
  ratio() { paste <(p99s "$1") <(p99s "$2") | awk '{print $1 / $2}' | median; }
  printf 'p99, median of round ratios: Floodgate Redis/ratelimit %.2f×, Floodgate memory/gubernator %.2f×; the floor: rlsnop/ratelimit %.2f×, rlsnop -redis/ratelimit %.2f×\n' \
    "$(ratio floodgate-redis ratelimit-redis)" "$(ratio floodgate-memory gubernator)" "$(ratio rlsnop ratelimit-redis)" "$(ratio rlsnop-redis ratelimit-redis)"
fi
