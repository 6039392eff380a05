#!/usr/bin/env bash
# Stops, crashes, freezes and restarts ONE private Redis instance started by
# scripts/services-up.sh, for failure and failover tests. Go tests find this
# script through $FLOODGATE_TEST_REDIS_NODE (written to the env file).
#
# Usage: scripts/redis-node.sh COMMAND [PORT]
#   start PORT     start the instance from its saved config and wait for PING;
#                  a cluster node rejoins with its nodes.conf, a sentinel-set
#                  node comes back with whatever Sentinel rewrote into its config
#   stop PORT      graceful SHUTDOWN NOSAVE; waits until the process has exited
#   kill PORT      SIGKILL, to simulate a crash
#   restart PORT   stop then start
#   freeze PORT    SIGSTOP: port stays open but nothing answers (a hung server)
#   thaw PORT      SIGCONT after freeze
#   status PORT    prints "PORT running ROLE" or "PORT stopped"; exits 1 if stopped
#   wait-cluster [SECONDS]   wait (default 30 s) until all six cluster nodes are
#                  up, agree cluster_state:ok, serve all 16384 slots, no node is
#                  flagged failing and every replica is in sync
#   wait-sentinel [SECONDS]  wait (default 30 s) until Sentinel reports a healthy
#                  master "floodgate" with its replica in sync
#   masters                  print the ports of the current cluster masters
#   master-of-slot SLOT      print the port of the cluster master serving SLOT
#                            (get SLOT with: redis-cli -p 7100 cluster keyslot KEY)
#   sentinel-master          print the port Sentinel currently names as master
#
# PORT is one of 7200 (standalone), 7100-7105 (cluster), 7300/7301 (sentinel
# master/replica) or 7310 (the sentinel). Exits non-zero with a message on failure.
#
# Note: instances run without persistence, so a master restarted before its
# replica was promoted comes back empty and its replica resyncs to empty.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2; }

cmd=${1:-}
[[ -n $cmd ]] || usage

need_port() {
  [[ -n ${1:-} ]] || usage
  is_managed_port "$1" || die "port $1 is not one of the private test instances (${ALL_PORTS[*]})"
  [[ -d $(node_dir "$1") ]] || die "no state for port $1 under $STATE_DIR; run scripts/services-up.sh first"
}

# CLUSTER NODES from the first cluster node that answers.
cluster_nodes_any() {
  local p
  for p in "${CLUSTER_PORTS[@]}"; do cli "$p" cluster nodes && return 0; done
  die "no cluster node answers"
}

need_pid() {
  local pid
  pid=$(node_pid "$1") || die "no running redis process for port $1"
  printf '%s\n' "$pid"
}

case $cmd in
  start)
    need_port "${2:-}"; start_node "$2" ;;
  stop)
    need_port "${2:-}"; stop_node "$2" ;;
  kill)
    need_port "${2:-}"
    pid=$(need_pid "$2")
    kill -KILL "$pid"
    wait_until 5 not_alive "$pid" || die "pid $pid on port $2 survived SIGKILL"
    wait_until 5 port_free "$2" || die "port $2 still in use after SIGKILL" ;;
  restart)
    need_port "${2:-}"; stop_node "$2"; start_node "$2" ;;
  freeze)
    need_port "${2:-}"; kill -STOP "$(need_pid "$2")" ;;
  thaw)
    need_port "${2:-}"; kill -CONT "$(need_pid "$2")" ;;
  status)
    need_port "${2:-}"
    if pings "$2"; then
      if [[ $2 == "$SENTINEL_PORT" ]]; then role=sentinel
      else role=$(cli "$2" info replication | tr -d '\r' | sed -n 's/^role://p'); fi
      echo "$2 running $role"
    else
      echo "$2 stopped"; exit 1
    fi ;;
  wait-cluster)
    wait_until "${2:-30}" cluster_healthy || die "cluster on ${CLUSTER_PORTS[*]} not healthy after ${2:-30} s" ;;
  wait-sentinel)
    wait_until "${2:-30}" sentinel_healthy || die "sentinel master '$SENTINEL_MASTER_NAME' not healthy after ${2:-30} s" ;;
  masters)
    cluster_nodes_any | awk '$3 ~ /master/ && $3 !~ /fail/ { split($2, a, "[:@]"); print a[2] }' | sort -n ;;
  master-of-slot)
    [[ ${2:-} =~ ^[0-9]+$ ]] || usage
    port=$(cluster_nodes_any | awk -v s="$2" '
      $3 ~ /master/ && $3 !~ /fail/ {
        for (i = 9; i <= NF; i++) {
          n = split($i, r, "-"); lo = r[1]; hi = (n == 2) ? r[2] : r[1]
          if (s + 0 >= lo + 0 && s + 0 <= hi + 0) { split($2, a, "[:@]"); print a[2]; exit }
        }
      }')
    [[ -n $port ]] || die "no healthy master serves slot $2"
    echo "$port" ;;
  sentinel-master)
    sentinel_master_port || die "sentinel on $SENTINEL_PORT does not name a master" ;;
  *)
    usage ;;
esac
