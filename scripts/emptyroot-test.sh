#!/usr/bin/env bash
# Proves what the container image needs without a container runtime: the
# binary the Dockerfile builds (scripts/build.sh, the same flags) runs in
# an empty root -- a directory holding only the binary and the image's
# configuration, no libc, no /etc/passwd, no shell -- as the image's
# non-root user 65532, in a network namespace of its own, and:
#   - floodgate version prints what scripts/build.sh stamped;
#   - floodgate healthcheck (the image's HEALTHCHECK) exits 0 on /healthz;
#   - the gateway answers POST /login with the quickstart's policy;
#   - SIGTERM stops it with exit status 0.
# Needs root (chroot, unshare), curl and ip. Ends with "N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"

root=$(mktemp -d /tmp/floodgate-emptyroot.XXXXXX)
trap 'rm -rf "$root"' EXIT
chmod 755 "$root"   # mktemp makes it 0700; the daemon runs as 65532
scripts/build.sh "$root/floodgate"
mkdir -p "$root/etc/floodgate"
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
if ((failed > 0)); then echo "--- daemon log:"; cat "$root.log"; fi
rm -f "$root.log"
echo "emptyroot: $passed passed, $failed failed"
((failed == 0))
INNER
