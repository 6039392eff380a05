#!/usr/bin/env bash
# Proves what the container image needs without a container runtime: the
# binary the Dockerfile builds (scripts/build.sh, the same flags) runs in
# an empty root -- a directory holding only the binary and the image's
# configuration, no libc, no /etc/passwd, no shell -- as the image's
# non-root user 65532, in a network namespace of its own, and:
#   - floodgate version prints what scripts/build.sh stamped;
#   - floodgate healthcheck (the image's HEALTHCHECK) exits 0 on /healthz;
#   - the gateway answers POST /login with the quickstart's policy;
#   - SIGTERM stops it with exit status 0;
#   - run as /bin/ratelimit (the image's link) with envoyproxy/ratelimit's
#     environment and a ratelimit configuration file, it answers
#     /healthcheck on 8080, listens for gRPC on 8081, serves
#     ratelimit_service_* metrics on :19001 and stops on SIGTERM (a
#     redis-server of its own runs in the namespace).
# Needs root (chroot, unshare), curl and ip. Ends with "N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"

root=$(mktemp -d /tmp/floodgate-emptyroot.XXXXXX)
trap 'rm -rf "$root"' EXIT
chmod 755 "$root"   # mktemp makes it 0700; the daemon runs as 65532
scripts/build.sh "$root/floodgate"
mkdir -p "$root/etc/floodgate" "$root/bin" "$root/data/ratelimit/config"
ln -s ../floodgate "$root/bin/ratelimit"
cat >"$root/data/ratelimit/config/edge.yaml" <<'YAML'
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 5}
YAML
cp deploy/container/floodgate.yaml "$root/etc/floodgate/floodgate.yaml"
want_version="floodgate $(git describe --tags --always --dirty 2>/dev/null || echo unknown)"
echo "empty root $root holds:"
(cd "$root" && find . -mindepth 1 | sort)

# Everything below runs in fresh network and PID namespaces: the fixed
# ports 8080/8081/9090 of the image cannot clash with anything on the host.
unshare --net --pid --fork --mount-proc --kill-child bash -s "$root" "$want_version" <<'INNER'
set -uo pipefail
root=$1 want_version=$2 passed=0 failed=0
check() { # NAME CONDITION...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; passed=$((passed + 1)); else echo "FAIL $name"; failed=$((failed + 1)); fi
}
in_root() { chroot --userspec=65532:65532 "$root" /floodgate "$@"; }
ip link set lo up

version=$(in_root version | head -n 1)
check "version: $version" test "$version" = "$want_version"

# chroot execs the binary, so $! is the daemon itself.
chroot --userspec=65532:65532 "$root" /floodgate serve -c /etc/floodgate/floodgate.yaml >"$root.log" 2>&1 &
daemon=$!
healthy=0
for _ in $(seq 100); do
  if in_root healthcheck 2>/dev/null; then healthy=1; break; fi
  sleep 0.1
done
check "floodgate healthcheck exits 0 within 10 s" test $healthy = 1
body=$(curl -s http://127.0.0.1:9090/healthz)
check "GET /healthz: $body" test "$body" = '{"status":"ok"}'
head=$(curl -s -o /dev/null -D - -X POST http://127.0.0.1:8080/login | tr -d '\r')
check "POST /login: 200" grep -q '^HTTP/1.1 200' <<<"$head"
check 'POST /login: RateLimit-Policy: "login";q=5;w=60' grep -qi '^ratelimit-policy: "login";q=5;w=60$' <<<"$head"
check "serves as uid 65532" test "$(stat -c %u "/proc/$daemon")" = 65532
kill -TERM "$daemon"
wait "$daemon"
status=$?
check "exit status after SIGTERM: $status" test "$status" = 0

# /bin/ratelimit under ratelimit's variables, counting in a Redis of this
# namespace's own (its loopback is private: 6379 clashes with nothing).
redis-server --port 6379 --save '' --appendonly no >/dev/null 2>&1 &
redis=$!
env -i RUNTIME_ROOT=/data RUNTIME_SUBDIRECTORY=ratelimit GRPC_HOST=127.0.0.1 REDIS_SOCKET_TYPE=tcp REDIS_URL=127.0.0.1:6379 \
  USE_STATSD=false USE_PROMETHEUS=true PROMETHEUS_ADDR=:19001 LOG_LEVEL=info \
  "$(command -v chroot)" --userspec=65532:65532 "$root" /bin/ratelimit >>"$root.log" 2>&1 &
rl=$!
healthy=0
for _ in $(seq 100); do
  if in_root healthcheck http://127.0.0.1:8080/healthcheck 2>/dev/null; then healthy=1; break; fi
  sleep 0.1
done
check "/bin/ratelimit: /healthcheck answers 200 within 10 s" test $healthy = 1
check "/bin/ratelimit: gRPC listens on 8081" bash -c 'exec 3<>/dev/tcp/127.0.0.1/8081'
metrics=$(curl -s http://127.0.0.1:19001/metrics)
check "/bin/ratelimit: ratelimit_service_config_load_success 1 on :19001" grep -q '^ratelimit_service_config_load_success 1$' <<<"$metrics"
kill -TERM "$rl"
wait "$rl"
status=$?
check "/bin/ratelimit: exit status after SIGTERM: $status" test "$status" = 0
kill "$redis"
if ((failed > 0)); then echo "--- daemon log:"; cat "$root.log"; fi
rm -f "$root.log"
echo "emptyroot: $passed passed, $failed failed"
((failed == 0))
INNER
