#!/usr/bin/env bash
# Runs examples/caddy/README.md's commands as written, against a real
# Caddy (Debian's package, which scripts/services-up.sh installs) and the
# floodgate binary of scripts/build.sh, in a network namespace of its own
# so that the README's fixed ports clash with nothing on the host:
# requests pass, the sixth login in a minute gets Floodgate's 429 with
# Retry-After and the rate-limit fields through Caddy, and a client's own
# X-Forwarded-For changes nothing. Also checks that every example's
# floodgate.yaml, the Docker variants' included, validates, and that both
# Caddyfiles adapt. Traefik's example runs in TestTraefikFailureModes
# (cmd/floodgate), against the Traefik scripts/traefik-build.sh builds.
# Needs root for unshare. Ends with "N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin:/sbin"
command -v caddy >/dev/null || { echo "caddy is not installed: run scripts/services-up.sh (apt-get install caddy)" >&2; exit 1; }
dir=$(mktemp -d /tmp/floodgate-examples.XXXXXX)
trap 'rm -rf "$dir"' EXIT
scripts/build.sh "$dir/floodgate"

passed=0 failed=0
check() {
  local what=$1; shift
  if "$@"; then echo "ok   $what"; passed=$((passed + 1)); else echo "FAIL $what"; failed=$((failed + 1)); fi
}
for f in examples/*/floodgate.yaml examples/*/docker/floodgate.yaml; do
  check "floodgate validate -c $f" "$dir/floodgate" validate -c "$f" >/dev/null
done
for f in examples/caddy/Caddyfile examples/caddy/docker/Caddyfile; do
  check "caddy adapt --config $f" caddy adapt --config "$f" >/dev/null 2>&1
done

listen=$(caddy adapt --config examples/caddy/Caddyfile 2>/dev/null | grep -o '"listen":\[[^]]*\]' | sort -u | tr '\n' ' ')
check "the host example's Caddy listens on loopback only: $listen" test "$listen" = '"listen":["127.0.0.1:3000"] "listen":["127.0.0.1:8000"] '

# The README's steps, from examples/caddy, with floodgate on PATH.
unshare --net --fork bash -s "$dir" <<'INNER' >"$dir/out"
set -u
dir=$1 PATH="$1:$PATH"
export XDG_CONFIG_HOME=$dir XDG_DATA_HOME=$dir   # Caddy's autosave and storage
cd examples/caddy
ip link set lo up
floodgate serve -c floodgate.yaml >"$dir/floodgate.log" 2>&1 &
caddy run --config Caddyfile >"$dir/caddy.log" 2>&1 &
for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:8000/ && floodgate healthcheck 2>/dev/null && break; sleep 0.1; done
echo "--- get"; curl -si http://127.0.0.1:8000/api/items; echo
echo "--- loop"; for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%{http_code} ' -X POST http://127.0.0.1:8000/login; done; echo
echo "--- limited"; curl -si -X POST http://127.0.0.1:8000/login; echo
echo "--- spoofed"; curl -s -o /dev/null -w '%{http_code}\n' -H 'X-Forwarded-For: 203.0.113.9' -X POST http://127.0.0.1:8000/login
kill %1 %2; wait
INNER
out=$(tr -d '\r' <"$dir/out")
section() { awk -v s="--- $1" '$0 == s { on = 1; next } /^--- / { on = 0 } on' <<<"$out"; }
get=$(section get) limited=$(section limited)
check "GET /api/items through Caddy: 200" grep -q '^HTTP/1.1 200 OK$' <<<"$get"
check 'GET /api/items: the demo app answered' grep -qx '{"ok":true,"method":"GET","path":"/api/items"}' <<<"$get"
check "six logins: $(section loop)" test "$(section loop)" = "200 200 200 200 200 429 "
check "7th login: 429" grep -q '^HTTP/1.1 429 Too Many Requests$' <<<"$limited"
check "7th login: Retry-After" grep -Eq '^Retry-After: [0-9]+$' <<<"$limited"
check '7th login: RateLimit-Policy: "login";q=5;w=60' grep -qx 'Ratelimit-Policy: "login";q=5;w=60' <<<"$limited"
check '7th login: RateLimit: "login";r=0' grep -Eq '^Ratelimit: "login";r=0;t=[0-9]+$' <<<"$limited"
check "7th login: problem+json" grep -qx 'Content-Type: application/problem+json' <<<"$limited"
check "a client's own X-Forwarded-For: still $(section spoofed)" test "$(section spoofed)" = 429
if ((failed > 0)); then echo "$out"; cat "$dir/floodgate.log" "$dir/caddy.log"; fi
echo "examples: $passed passed, $failed failed"
((failed == 0))
