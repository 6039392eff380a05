#!/usr/bin/env bash
# A private Sentinel set (a master, one replica, one Sentinel) for fault
# tests and scripts/chaos.sh, apart from the test suite's (scripts/
# services-up.sh, ports 7300/7301/7310), which it never touches.
#
# Usage: scripts/sentinel-set.sh COMMAND [BASE]   (default BASE 7520)
#   up [BASE]     master on BASE, its replica on BASE+1, Sentinel on BASE+2
#                 watching them as master "fgp" (quorum 1, down after 1 s);
#                 waits until the replica is in sync and Sentinel counts it
#                 a good replica (a SENTINEL FAILOVER would then succeed);
#                 a set already running on BASE is stopped first
#   down [BASE]   stop the set on BASE and remove its state
#
# State (configs, logs) lives in /tmp/floodgate-sentinel-BASE.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2; }

# set_base BASE: points lib.sh's helpers at this set's state and ports.
set_base() {
  BASE=$1
  [[ $BASE =~ ^[0-9]+$ ]] || usage
  local p
  for p in "$BASE" $((BASE + 1)) $((BASE + 2)); do
    for q in "${ALL_PORTS[@]}"; do
      [[ $p == "$q" ]] && die "port $p belongs to the test services (scripts/services-up.sh)"
    done
  done
  STATE_DIR=/tmp/floodgate-sentinel-$BASE
  CLUSTER_PORTS=()
  SENTINEL_MASTER_PORT=$BASE
  SENTINEL_REPLICA_PORT=$((BASE + 1))
  SENTINEL_PORT=$((BASE + 2))
  SENTINEL_MASTER_NAME=fgp
  SENTINEL_DOWN_AFTER_MS=1000
  SENTINEL_FAILOVER_TIMEOUT_MS=3000
}

# ready: the replica is in sync and Sentinel lists it with no flag but "slave".
ready() {
  cli "$SENTINEL_REPLICA_PORT" info replication | tr -d '\r' | grep -q '^master_link_status:up' || return 1
  cli "$SENTINEL_PORT" sentinel replicas "$SENTINEL_MASTER_NAME" | tr -d '\r' | grep -qx 'slave' || return 1
}

down() {
  local p
  for p in "$SENTINEL_PORT" "$SENTINEL_REPLICA_PORT" "$SENTINEL_MASTER_PORT"; do
    [[ -r $(node_conf "$p") ]] && stop_node "$p"
  done
  rm -rf "$STATE_DIR"
}

up() {
  [[ -d $STATE_DIR ]] && down
  local p
  for p in "$SENTINEL_MASTER_PORT" "$SENTINEL_REPLICA_PORT" "$SENTINEL_PORT"; do
    port_free "$p" || die "port $p is in use"
  done
  mkdir -p "$STATE_DIR"
  for p in "$SENTINEL_MASTER_PORT" "$SENTINEL_REPLICA_PORT" "$SENTINEL_PORT"; do
    write_node_conf "$p"
    start_node "$p"
  done
  wait_until 30 ready || die "sentinel set on $BASE not ready after 30 s"
  log "sentinel set up: master $SENTINEL_MASTER_PORT, replica $SENTINEL_REPLICA_PORT, sentinel $SENTINEL_PORT"
}

cmd=${1:-}
case $cmd in
  up) set_base "${2:-7520}"; up ;;
  down) set_base "${2:-7520}"; down ;;
  *) usage ;;
esac
