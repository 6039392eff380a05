# shellcheck shell=bash disable=SC2034  # variables are used by the scripts that source this
# Shared definitions for services-up.sh, services-down.sh and redis-node.sh.
# Sourced, not executed. Every instance managed here is private to the test
# suite: the machine's own Redis (6379) and PostgreSQL are never in these lists.

# Debian keeps nginx and pg tools in sbin, which a CI environment may not have on PATH.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

STATE_DIR="${FLOODGATE_TEST_DIR:-/tmp/floodgate-test}"
# The lock lives outside STATE_DIR because services-down removes STATE_DIR.
LOCK_FILE="${STATE_DIR%/}.lock"
ENV_FILE="$STATE_DIR/env"

STANDALONE_PORT=7200
CLUSTER_PORTS=(7100 7101 7102 7103 7104 7105)
SENTINEL_MASTER_PORT=7300
SENTINEL_REPLICA_PORT=7301
SENTINEL_PORT=7310
SENTINEL_MASTER_NAME=floodgate
# Short timeouts keep failover tests to a few seconds instead of the defaults' ~30 s.
CLUSTER_NODE_TIMEOUT_MS=2000
SENTINEL_DOWN_AFTER_MS=2000
SENTINEL_FAILOVER_TIMEOUT_MS=3000

ALL_PORTS=("$STANDALONE_PORT" "${CLUSTER_PORTS[@]}" "$SENTINEL_MASTER_PORT" "$SENTINEL_REPLICA_PORT" "$SENTINEL_PORT")

log() { printf '%s\n' "$*" >&2; }

# wait_port HOST:PORT: wait up to 10 s for something to accept connections there.
wait_port() {
  local i
  for ((i = 0; i < 200; i++)); do
    (exec 3<>"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null && return 0
    sleep 0.05
  done
  die "nothing listens on $1"
}
die() { log "error: $*"; exit 1; }

# RATELIMIT_VERSION is the envoyproxy/ratelimit the peer scripts install.
RATELIMIT_VERSION=${RATELIMIT_VERSION:-v1.4.1-0.20260122083618-3fb702589d36}

# install_ratelimit DIR: envoyproxy/ratelimit's service_cmd, built with
# `go install` into DIR/bin (a scratch directory outside the repository)
# unless already there.
install_ratelimit() {
  mkdir -p "$1/bin"
  if [[ ! -x $1/bin/service_cmd ]]; then
    log "installing envoyproxy/ratelimit $RATELIMIT_VERSION into $1"
    (cd "$1" && GOBIN=$1/bin GOFLAGS=-mod=mod go install "github.com/envoyproxy/ratelimit/src/service_cmd@$RATELIMIT_VERSION")
  fi
}

# Every redis-cli call is bounded: a frozen or half-dead instance must not hang a script.
cli() { local port=$1; shift; timeout 3 redis-cli -h 127.0.0.1 -p "$port" "$@" 2>/dev/null; }

is_managed_port() {
  local p
  for p in "${ALL_PORTS[@]}"; do [[ $p == "$1" ]] && return 0; done
  return 1
}

is_cluster_port() {
  local p
  for p in "${CLUSTER_PORTS[@]}"; do [[ $p == "$1" ]] && return 0; done
  return 1
}

node_dir() { printf '%s/%s\n' "$STATE_DIR" "$1"; }
node_conf() {
  if [[ $1 == "$SENTINEL_PORT" ]]; then printf '%s/sentinel.conf\n' "$(node_dir "$1")"
  else printf '%s/redis.conf\n' "$(node_dir "$1")"; fi
}
node_pidfile() { printf '%s/redis.pid\n' "$(node_dir "$1")"; }
node_logfile() { printf '%s/redis.log\n' "$(node_dir "$1")"; }

# Prints the pid from the pidfile only if that pid is still a redis process;
# a stale pidfile must never make us signal an unrelated process.
node_pid() {
  local pf pid
  pf=$(node_pidfile "$1")
  [[ -r $pf ]] || return 1
  pid=$(<"$pf")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ -r /proc/$pid/cmdline ]] || return 1
  not_alive "$pid" && return 1
  local argv0=
  IFS= read -r -d '' argv0 <"/proc/$pid/cmdline" || true
  [[ $argv0 == *redis* ]] || return 1
  printf '%s\n' "$pid"
}

pings() { [[ $(cli "$1" ping) == PONG ]]; }

# wait_until SECONDS CMD... : polls CMD every 0.1 s; non-zero if it never succeeds.
wait_until() {
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

log_tail() {
  local lf
  lf=$(node_logfile "$1")
  [[ -r $lf ]] && { log "--- last lines of $lf:"; tail -n 15 "$lf" >&2; }
  return 0
}

# Config every instance shares, the sentinel included.
write_base_conf() {
  local port=$1
  cat <<EOF
port $port
bind 127.0.0.1
protected-mode no
daemonize yes
dir $(node_dir "$port")
pidfile $(node_pidfile "$port")
logfile $(node_logfile "$port")
EOF
}

# Config common to every data node. No persistence: tests own their data, and an
# instance that restarts empty is exactly what restart tests should see.
write_common_conf() {
  write_base_conf "$1"
  cat <<EOF
loglevel notice
save ""
appendonly no
dbfilename dump.rdb
# Replicas sync straight away instead of after the default 5 s batching delay.
repl-diskless-sync yes
repl-diskless-sync-delay 0
# Lets tests simulate a slow server with DEBUG SLEEP.
enable-debug-command local
EOF
}

write_node_conf() {
  local port=$1 dir conf
  dir=$(node_dir "$port")
  conf=$(node_conf "$port")
  mkdir -p "$dir"
  if [[ $port == "$SENTINEL_PORT" ]]; then
    write_base_conf "$port" >"$conf"
    cat >>"$conf" <<EOF
sentinel monitor $SENTINEL_MASTER_NAME 127.0.0.1 $SENTINEL_MASTER_PORT 1
sentinel down-after-milliseconds $SENTINEL_MASTER_NAME $SENTINEL_DOWN_AFTER_MS
sentinel failover-timeout $SENTINEL_MASTER_NAME $SENTINEL_FAILOVER_TIMEOUT_MS
sentinel parallel-syncs $SENTINEL_MASTER_NAME 1
EOF
    return
  fi
  write_common_conf "$port" >"$conf"
  if is_cluster_port "$port"; then
    cat >>"$conf" <<EOF
cluster-enabled yes
cluster-config-file $dir/nodes.conf
cluster-node-timeout $CLUSTER_NODE_TIMEOUT_MS
# A replica may take over however long it was cut off: failover tests stop a
# master abruptly and must always see a promotion.
cluster-replica-validity-factor 0
EOF
  elif [[ $port == "$SENTINEL_REPLICA_PORT" ]]; then
    echo "replicaof 127.0.0.1 $SENTINEL_MASTER_PORT" >>"$conf"
  fi
}

# Starts one instance from its existing config (keeps nodes.conf and whatever
# Sentinel rewrote), and waits until it answers PING.
start_node() {
  local port=$1 conf pf
  conf=$(node_conf "$port")
  [[ -r $conf ]] || die "no config for port $port at $conf; run scripts/services-up.sh first"
  if pings "$port"; then return 0; fi
  pf=$(node_pidfile "$port")
  rm -f "$pf"
  # The daemon must not inherit the services-up/down lock (fd 9), or it would
  # hold the lock for as long as it runs.
  if [[ $port == "$SENTINEL_PORT" ]]; then
    redis-server "$conf" --sentinel </dev/null >/dev/null 9>&- || { log_tail "$port"; die "sentinel on port $port failed to start"; }
  else
    local extra=()
    if [[ $port == "$SENTINEL_MASTER_PORT" || $port == "$SENTINEL_REPLICA_PORT" ]]; then
      local mport
      mport=$(sentinel_master_port || true)
      # Sentinel promoted the other node while this one was down: rejoin as its
      # replica at once. Left alone, this node would come back as a second
      # master and Sentinel would take ~20 s to demote it.
      if [[ -n $mport && $mport != "$port" ]] && pings "$mport"; then
        extra=(--replicaof 127.0.0.1 "$mport")
      fi
    fi
    redis-server "$conf" "${extra[@]}" </dev/null >/dev/null 9>&- || { log_tail "$port"; die "redis on port $port failed to start"; }
  fi
  wait_until 10 pings "$port" || { log_tail "$port"; die "redis on port $port did not answer PING within 10 s"; }
}

# Stops one instance. SIGCONT first so a frozen instance can act on SHUTDOWN;
# falls back to signals if it does not exit.
stop_node() {
  local port=$1 pid
  pid=$(node_pid "$port" || true)
  if [[ -n $pid ]]; then kill -CONT "$pid" 2>/dev/null || true; fi
  if pings "$port"; then
    if [[ $port == "$SENTINEL_PORT" ]]; then
      cli "$port" shutdown >/dev/null || true
    else
      cli "$port" shutdown nosave now >/dev/null || true
    fi
  fi
  if [[ -n $pid ]]; then
    wait_until 5 not_alive "$pid" || kill -TERM "$pid" 2>/dev/null || true
    wait_until 3 not_alive "$pid" || kill -KILL "$pid" 2>/dev/null || true
    wait_until 2 not_alive "$pid" || die "could not stop redis pid $pid on port $port"
  fi
  # Something we have no pidfile for (state dir wiped while it ran) still holds the port.
  wait_until 5 port_free "$port" || die "port $port is still in use after shutdown"
}

# A zombie counts as gone: daemons are reparented to PID 1, which may reap them
# only seconds later.
# Health checks avoid forking where bash builtins do: on a loaded 2-core
# machine every extra process costs noticeable time in polling loops.
not_alive() {
  kill -0 "$1" 2>/dev/null || return 0
  local stat=
  read -r stat <"/proc/$1/stat" 2>/dev/null || return 0
  stat=${stat##*) }
  [[ ${stat%% *} == Z ]]
}
port_free() { [[ -z $(ss -Hltn "sport = :$1") ]]; }

# has_line TEXT LINE: TEXT (a Redis reply, CRLF or LF) has LINE as a whole line;
# LINE may span several lines.
has_line() { [[ $'\n'"${1//$'\r'/}"$'\n' == *$'\n'"$2"$'\n'* ]]; }

# True when every cluster node is up, agrees the cluster is ok with all slots
# served, sees six nodes and no failure flags, and every replica is in sync.
cluster_healthy() {
  local p info nodes repl masters f link
  for p in "${CLUSTER_PORTS[@]}"; do
    info=$(cli "$p" cluster info) || return 1
    has_line "$info" cluster_state:ok || return 1
    has_line "$info" cluster_slots_ok:16384 || return 1
    has_line "$info" cluster_known_nodes:6 || return 1
    nodes=$(cli "$p" cluster nodes) || return 1
    masters=0
    while read -r _ _ f _ _ _ _ link _; do
      [[ $f == *fail* || $f == *handshake* || $f == *noaddr* || $link != connected ]] && return 1
      [[ $f == *master* ]] && masters=$((masters + 1))
    done <<<"${nodes//$'\r'/}"
    ((masters == 3)) || return 1
    repl=$(cli "$p" info replication) || return 1
    if has_line "$repl" role:slave; then
      has_line "$repl" master_link_status:up || return 1
    fi
  done
  return 0
}

sentinel_master_port() {
  local addr
  addr=$(cli "$SENTINEL_PORT" sentinel get-master-addr-by-name "$SENTINEL_MASTER_NAME") || return 1
  addr=${addr//$'\r'/}
  [[ $addr == *$'\n'* ]] || return 1
  printf '%s\n' "${addr#*$'\n'}"
}

# True when the sentinel sees a healthy master with its one replica in sync.
sentinel_healthy() {
  local mport master repl replicas
  mport=$(sentinel_master_port) || return 1
  [[ $mport == "$SENTINEL_MASTER_PORT" || $mport == "$SENTINEL_REPLICA_PORT" ]] || return 1
  master=$(cli "$SENTINEL_PORT" sentinel master "$SENTINEL_MASTER_NAME") || return 1
  has_line "$master" $'flags\nmaster' || return 1
  has_line "$master" $'num-slaves\n1' || return 1
  repl=$(cli "$mport" info replication) || return 1
  has_line "$repl" connected_slaves:1 || return 1
  [[ $repl == *state=online* ]] || return 1
  # The replica the sentinel knows must be the live, linked one.
  replicas=$(cli "$SENTINEL_PORT" sentinel replicas "$SENTINEL_MASTER_NAME") || return 1
  has_line "$replicas" $'master-link-status\nok' || return 1
}

# Stops all managed instances and wipes their state. Callers hold the lock.
down_all() {
  local port
  # Sentinel first, so it does not start a failover while its master goes away.
  stop_node "$SENTINEL_PORT"
  for port in "${ALL_PORTS[@]}"; do
    [[ $port == "$SENTINEL_PORT" ]] || stop_node "$port"
  done
  rm -rf "$STATE_DIR"
}
