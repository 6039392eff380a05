#!/usr/bin/env bash
# Starts everything the Floodgate test suite needs, then writes and prints an
# env file of `export VAR=value` lines:
#
#   scripts/services-up.sh            # reuse running instances if healthy
#   scripts/services-up.sh --fresh    # always tear down and start clean
#   . /tmp/floodgate-test/env         # or: eval "$(scripts/services-up.sh)"
#
# Private instances (never the machine's own 6379):
#   standalone Redis 127.0.0.1:7200
#   Redis Cluster    127.0.0.1:7100-7105 (3 masters + 3 replicas)
#   Sentinel         127.0.0.1:7310 watching master "floodgate" (7300, replica 7301)
# PostgreSQL is the machine's own on 127.0.0.1:5432 (started or installed if needed).
# Chromium (Debian's package) is installed when missing, for the dashboard's browser test.
# Traefik is built from its Go module when missing (scripts/traefik-build.sh).
#
# Healthy running instances are reused rather than restarted, so a second
# caller (another test package, another shell) does not pull them out from
# under a run in progress. Reuse keeps their data; tests should use their own keys.
# Stop and restart single instances with scripts/redis-node.sh.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

fresh=0
for arg in "$@"; do
  case $arg in
    --fresh) fresh=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown argument: $arg (try --help)" ;;
  esac
done

# Traefik, for TestTraefikFailureModes (cmd/floodgate): built from its
# module into a cache directory outside the repository, before the lock, so
# that the first build (about 16 CPU-minutes) keeps no other caller waiting;
# two first builds at once only duplicate work (each moves its binary in
# whole).
TRAEFIK_BIN=$("$here/traefik-build.sh") || die "scripts/traefik-build.sh failed"

mkdir -p "$(dirname "$LOCK_FILE")"
exec 9>"$LOCK_FILE"
flock -w 120 9 || die "another services-up/down holds $LOCK_FILE"

apt_updated=0
apt_log="${STATE_DIR%/}-apt.log"
apt_install() {
  log "installing $1..."
  if ((apt_updated == 0)); then
    apt-get update -q >"$apt_log" 2>&1 || { tail -n 20 "$apt_log" >&2; die "apt-get update failed"; }
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$1" >>"$apt_log" 2>&1 \
    || { tail -n 20 "$apt_log" >&2; die "apt-get install $1 failed"; }
}

# Installs PKG only when BIN is absent, so a warm machine never touches apt.
ensure_bin() {
  command -v "$1" >/dev/null && return 0
  apt_install "$2"
  command -v "$1" >/dev/null || die "installed $2 but still no $1"
}

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 -t 2; }
# shellcheck disable=SC2012  # version directory names are plain numbers
pg_clusters() { ls /etc/postgresql 2>/dev/null | sort -V; }

ensure_postgres() {
  ensure_bin pg_isready postgresql-client
  ensure_bin psql postgresql-client
  if ! pg_up; then
    # Only a machine with no PostgreSQL server at all gets one installed.
    [[ -n $(pg_clusters) ]] || apt_install postgresql
    if ! pg_up; then
      local ver
      ver=$(pg_clusters | tail -n 1)
      [[ -n $ver ]] || die "no PostgreSQL cluster under /etc/postgresql after installing"
      pg_ctlcluster --skip-systemctl-redirect "$ver" main start >/dev/null 2>&1 \
        || log "pg_ctlcluster $ver main start reported an error; waiting anyway"
    fi
    wait_until 30 pg_up || die "PostgreSQL is not accepting connections on 127.0.0.1:5432"
  fi
  # Trust auth is expected; find a role that can actually log in.
  local role url
  for role in postgres root; do
    url="postgres://$role@127.0.0.1:5432/postgres?sslmode=disable"
    if [[ $(PGCONNECT_TIMEOUT=3 psql "$url" -w -tAc 'select 1' 2>/dev/null) == 1 ]]; then
      PG_URL=$url
      return 0
    fi
  done
  die "PostgreSQL on 127.0.0.1:5432 accepts neither role postgres nor root without a password"
}

all_healthy() {
  [[ -d $STATE_DIR ]] || return 1
  pings "$STANDALONE_PORT" || return 1
  cluster_healthy || return 1
  sentinel_healthy || return 1
}

start_fresh() {
  local port p addrs=() create_log
  down_all
  mkdir -p "$STATE_DIR"
  for port in "${ALL_PORTS[@]}"; do write_node_conf "$port"; done
  for port in "${ALL_PORTS[@]}"; do
    [[ $port == "$SENTINEL_PORT" ]] || start_node "$port"
  done
  start_node "$SENTINEL_PORT"

  for p in "${CLUSTER_PORTS[@]}"; do addrs+=("127.0.0.1:$p"); done
  create_log="$STATE_DIR/cluster-create.log"
  if ! redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$create_log" 2>&1; then
    cat "$create_log" >&2
    die "redis-cli --cluster create failed"
  fi
  if ! wait_until 30 cluster_healthy; then
    for p in "${CLUSTER_PORTS[@]}"; do log "--- $p:"; cli "$p" cluster info | grep -E 'state|slots_ok|known' >&2 || log "(no answer)"; done
    die "Redis Cluster on 7100-7105 did not become healthy within 30 s"
  fi
  if ! wait_until 30 sentinel_healthy; then
    cli "$SENTINEL_PORT" sentinel master "$SENTINEL_MASTER_NAME" | paste - - >&2 || true
    log_tail "$SENTINEL_PORT"
    die "Sentinel on $SENTINEL_PORT did not report a healthy master '$SENTINEL_MASTER_NAME' within 30 s"
  fi
}

ensure_bin redis-server redis-server
ensure_bin redis-cli redis-tools
ensure_bin nginx nginx
# The Caddy example (scripts/examples-test.sh) runs against Debian's Caddy.
ensure_bin caddy caddy
ensure_bin wrk wrk
ensure_bin ss iproute2
# The ops dashboard's browser test drives Debian's Chromium headless.
ensure_bin chromium chromium
ensure_postgres
# The Helm chart's test (deploy/helm_test.go) lints and renders it with
# Helm, built from the Go module proxy into a cache directory outside the
# repository (Debian has no package); the first build takes minutes. Not
# in STATE_DIR: start_fresh and services-down remove that.
HELM_BIN="${XDG_CACHE_HOME:-$HOME/.cache}/floodgate-tools/helm-v4.3.2/helm"
if [[ ! -x $HELM_BIN ]]; then
  log "building Helm (helm.sh/helm/v4 v4.3.2) into $(dirname "$HELM_BIN")"
  GOBIN="$(dirname "$HELM_BIN")" go install helm.sh/helm/v4/cmd/helm@v4.3.2 >&2 || die "go install helm.sh/helm/v4/cmd/helm failed"
fi

how="reused the running instances"
if ((fresh)) || ! all_healthy; then
  start_fresh
  how="started fresh instances"
fi

cluster_addrs=$(printf '127.0.0.1:%s,' "${CLUSTER_PORTS[@]}")
tmp_env="$ENV_FILE.tmp.$$"
cat >"$tmp_env" <<EOF
export FLOODGATE_TEST_REDIS=127.0.0.1:$STANDALONE_PORT
export FLOODGATE_TEST_REDIS_CLUSTER=${cluster_addrs%,}
export FLOODGATE_TEST_SENTINEL=127.0.0.1:$SENTINEL_PORT
export FLOODGATE_TEST_SENTINEL_MASTER=$SENTINEL_MASTER_NAME
export FLOODGATE_TEST_POSTGRES='$PG_URL'
export FLOODGATE_TEST_NGINX=$(command -v nginx)
export FLOODGATE_TEST_WRK=$(command -v wrk)
export FLOODGATE_TEST_CHROMIUM=$(command -v chromium)
export FLOODGATE_TEST_HELM=$HELM_BIN
export FLOODGATE_TEST_TRAEFIK=$TRAEFIK_BIN
export FLOODGATE_TEST_REDIS_NODE=$here/redis-node.sh
EOF
mv "$tmp_env" "$ENV_FILE"
cat "$ENV_FILE"
echo "# $how; load with: . $ENV_FILE"
