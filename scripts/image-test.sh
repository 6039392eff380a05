#!/usr/bin/env bash
# Builds the Dockerfile's final stage for real with podman and runs it:
# the image is FROM scratch, so nothing needs pulling once the build
# stage's output is given as a build context (this machine cannot pull
# golang:; scripts/build.sh makes the same /out tree the build stage does).
# Checks that the image runs as 65532, its HEALTHCHECK passes, and the
# gateway answers. Installs podman and runc from Debian when missing.
#
#   scripts/image-test.sh          # make test-image
#
# Ends with "N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
for pkg in podman runc; do
  command -v "$pkg" >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg" >/dev/null
done
ctx=$(mktemp -d /tmp/floodgate-image.XXXXXX)
name=floodgate-image-test-$$
tag=localhost/floodgate:image-test-$$
# runc: crun refuses this machine's hybrid cgroups. The ulimits: the
# runtimes' defaults exceed the hard limits a sandbox may impose.
pod() { podman --runtime runc "$@"; }
cleanup() { pod rm -f "$name" >/dev/null 2>&1 || true; podman rmi -f "$tag" >/dev/null 2>&1 || true; rm -rf "$ctx"; }
trap cleanup EXIT

mkdir -p "$ctx/out/etc/floodgate" "$ctx/out/etc/ssl/certs" "$ctx/out/bin"
scripts/build.sh "$ctx/out/floodgate"
ln -s ../floodgate "$ctx/out/bin/ratelimit"
cp deploy/container/floodgate.yaml "$ctx/out/etc/floodgate/"
cp /etc/ssl/certs/ca-certificates.crt "$ctx/out/etc/ssl/certs/"
# --format docker keeps HEALTHCHECK (OCI image configs have no such field).
podman build -q --format docker --build-context build="$ctx" --target final -t "$tag" -f Dockerfile . >/dev/null

passed=0 failed=0
check() {
  local what=$1; shift
  if "$@"; then echo "ok   $what"; passed=$((passed + 1)); else echo "FAIL $what"; failed=$((failed + 1)); fi
}
user=$(podman image inspect "$tag" --format '{{.Config.User}}')
check "image user: $user" test "$user" = 65532:65532
ports=$(podman image inspect "$tag" --format '{{range $p, $_ := .Config.ExposedPorts}}{{$p}} {{end}}')
check "exposed ports: $ports" test "$ports" = "8080/tcp 8081/tcp 9090/tcp "

pod run -d --name "$name" --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 \
  -p 127.0.0.1::8080 -p 127.0.0.1::9090 "$tag" >/dev/null 2>&1
gw=$(pod port "$name" 8080/tcp) admin=$(pod port "$name" 9090/tcp)
healthy=0
for _ in $(seq 100); do
  if pod healthcheck run "$name" >/dev/null 2>&1; then healthy=1; break; fi
  sleep 0.1
done
check "podman healthcheck run (floodgate healthcheck) passes" test $healthy = 1
check "GET /healthz on $admin" test "$(curl -s "http://$admin/healthz")" = '{"status":"ok"}'
head=$(curl -s -o /dev/null -D - -X POST "http://$gw/login" | tr -d '\r')
check "POST /login on $gw: 200" grep -q '^HTTP/1.1 200' <<<"$head"
check 'POST /login: RateLimit-Policy: "login";q=5;w=60' grep -qi '^ratelimit-policy: "login";q=5;w=60$' <<<"$head"
top=$(pod top "$name" user args | tail -n 1)
check "process: $top" grep -q '^65532 *\/floodgate serve -c /etc/floodgate/floodgate.yaml' <<<"$top"
pod stop -t 15 "$name" >/dev/null 2>&1
code=$(pod inspect "$name" --format '{{.State.ExitCode}}')
check "exit code after podman stop (SIGTERM): $code" test "$code" = 0
if ((failed > 0)); then pod logs "$name" || true; fi
# podman logs its own systemd noise (level=error) beside the command's output.
link=$(pod run --rm --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 --entrypoint /bin/ratelimit -e CONFIG_TYPE=NONE "$tag" 2>&1 | grep -v "level=error" || true)
check "/bin/ratelimit runs the ratelimit command: $link" grep -q 'CONFIG_TYPE="NONE"' <<<"$link"
echo "image: $passed passed, $failed failed"
((failed == 0))
