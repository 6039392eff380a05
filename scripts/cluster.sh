#!/usr/bin/env bash
# Starts and stops a Redis Cluster of N masters (no replicas) on loopback, for
# the shard-scale benchmarks and the resharding check (docs/SCALING.md). It
# is separate from the test suite's cluster (scripts/services-up.sh, ports
# 7100-7105), which it never touches.
#
# Usage: scripts/cluster.sh COMMAND [ARGS]
#   up N [BASE]        start N masters on ports BASE..BASE+N-1 (default BASE
#                      7700), join them with slots spread evenly, wait until
#                      every node reports cluster_state:ok; a cluster already
#                      running on BASE is stopped first
#   down [BASE]        stop the cluster on BASE and remove its state
#   addrs [BASE]       print its nodes as host:port,host:port,…
#   reshard FROM TO SLOTS [BASE]
#                      move SLOTS slots from the master on port FROM to the
#                      master on port TO with redis-cli --cluster reshard,
#                      migrating PIPELINE keys per MIGRATE (default 10; 1
#                      keeps each slot migrating longest)
#
# State (configs, logs, nodes.conf) lives in /tmp/floodgate-cluster-BASE.
# No replicas and no persistence: the benchmarks measure masters' CPU, and
# on a small machine replicas would take the cores the masters need.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2; }

# set_base BASE: points lib.sh's helpers at this cluster's state and ports.
set_base() {
  BASE=$1
  [[ $BASE =~ ^[0-9]+$ ]] || usage
  STATE_DIR=/tmp/floodgate-cluster-$BASE
  CLUSTER_PORTS=()
  if [[ -r $STATE_DIR/ports ]]; then read -r -a CLUSTER_PORTS <"$STATE_DIR/ports"; fi
}

# refuse_shared PORT: the test suite's instances are never ours to manage.
refuse_shared() {
  local p
  for p in "${ALL_PORTS[@]}"; do
    [[ $p == "$1" ]] && die "port $1 belongs to the test services (scripts/services-up.sh)"
  done
  return 0
}

cluster_ok() {
  local p info
  for p in "${CLUSTER_PORTS[@]}"; do
    info=$(cli "$p" cluster info) || return 1
    has_line "$info" cluster_state:ok || return 1
    has_line "$info" cluster_slots_ok:16384 || return 1
    has_line "$info" "cluster_known_nodes:${#CLUSTER_PORTS[@]}" || return 1
  done
}

down() {
  local p
  for p in "${CLUSTER_PORTS[@]}"; do stop_node "$p"; done
  rm -rf "$STATE_DIR"
}

up() {
  local n=$1 p addrs=()
  [[ $n =~ ^[0-9]+$ ]] && ((n >= 3)) || die "a cluster needs at least 3 masters, got '$n'"
  if ((${#CLUSTER_PORTS[@]} > 0)); then
    down # a cluster left by an earlier run: its ports must not count twice
    CLUSTER_PORTS=()
  fi
  mkdir -p "$STATE_DIR"
  for ((p = BASE; p < BASE + n; p++)); do
    refuse_shared "$p"
    port_free "$p" || die "port $p is in use"
    CLUSTER_PORTS+=("$p")
    addrs+=("127.0.0.1:$p")
  done
  echo "${CLUSTER_PORTS[*]}" >"$STATE_DIR/ports"
  for p in "${CLUSTER_PORTS[@]}"; do
    write_node_conf "$p" # CLUSTER_PORTS makes it a cluster node
    start_node "$p"
  done
  timeout 60 redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >"$STATE_DIR/create.log" 2>&1 \
    || { tail -n 20 "$STATE_DIR/create.log" >&2; die "redis-cli --cluster create failed"; }
  wait_until 30 cluster_ok || die "cluster on ${CLUSTER_PORTS[*]} not ok after 30 s"
  log "cluster of $n masters up on ${CLUSTER_PORTS[*]}"
}

node_id() { cli "$1" cluster myid | tr -d '\r'; }

reshard() {
  local from=$1 to=$2 slots=$3
  [[ $slots =~ ^[0-9]+$ ]] || usage
  timeout 300 redis-cli --cluster reshard "127.0.0.1:$from" --cluster-from "$(node_id "$from")" \
    --cluster-to "$(node_id "$to")" --cluster-slots "$slots" --cluster-pipeline "${PIPELINE:-10}" --cluster-yes >"$STATE_DIR/reshard.log" 2>&1 \
    || { tail -n 20 "$STATE_DIR/reshard.log" >&2; die "reshard $from → $to failed"; }
}

cmd=${1:-}
case $cmd in
  up) [[ -n ${2:-} ]] || usage; set_base "${3:-7700}"; up "$2" ;;
  down) set_base "${2:-7700}"; down ;;
  addrs)
    set_base "${2:-7700}"
    ((${#CLUSTER_PORTS[@]} > 0)) || die "no cluster on $BASE"
    printf '127.0.0.1:%s\n' "${CLUSTER_PORTS[@]}" | paste -sd, - ;;
  reshard) [[ -n ${4:-} ]] || usage; set_base "${5:-7700}"; reshard "$2" "$3" "$4" ;;
  *) usage ;;
esac
