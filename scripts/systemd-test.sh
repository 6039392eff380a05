#!/usr/bin/env bash
# Checks deploy/systemd/floodgate.service:
#   - systemd-analyze verify passes and prints nothing (the binary path
#     pointed at a fresh scripts/build.sh build);
#   - systemd-analyze security rates its sandbox "OK" (exposure <= 2.0);
#   - its ExecReload lines, run as systemd would (in order, stopping at the
#     first failure) with $MAINPID, reload a running daemon: the new quota
#     is in force, the reload counted ok; a file the daemon rejects fails
#     the reload (exit status not 0) and the old quota stays.
# Installs systemd (for systemd-analyze) from Debian when missing; needs
# root for unshare. Ends with "N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
unit=deploy/systemd/floodgate.service
command -v systemd-analyze >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q systemd >/dev/null
dir=$(mktemp -d /tmp/floodgate-systemd.XXXXXX)
trap 'rm -rf "$dir"' EXIT
scripts/build.sh "$dir/floodgate"
sed "s|/usr/local/bin/floodgate|$dir/floodgate|g" "$unit" >"$dir/floodgate.service"

passed=0 failed=0
check() {
  local what=$1; shift
  if "$@"; then echo "ok   $what"; passed=$((passed + 1)); else echo "FAIL $what"; failed=$((failed + 1)); fi
}
out=$(systemd-analyze verify "$dir/floodgate.service" 2>&1) && rc=0 || rc=$?
[[ -z $out ]] || printf '%s\n' "$out"
check "systemd-analyze verify: exit $rc, ${#out} bytes of complaints" test "$rc.$out" = "0."
level=$(systemd-analyze security --offline=yes "$dir/floodgate.service" 2>&1 | sed -n 's/.*Overall exposure level for floodgate.service: \([0-9.]*\).*/\1/p')
check "systemd-analyze security: exposure ${level:-?}" awk -v l="${level:-99}" 'BEGIN { exit !(l <= 2.0) }'

# The ExecReload lines joined by &&, on the test's binary and file.
reload=$(sed -n 's/^ExecReload=//p' "$dir/floodgate.service" | sed "s|/etc/floodgate/floodgate.yaml|$dir/floodgate.yaml|" | paste -sd '&' | sed 's/&/ \&\& /g')
cat >"$dir/floodgate.yaml" <<'YAML'
api: {listen: "127.0.0.1:8081"}
admin: {listen: "127.0.0.1:9090"}
log: {level: warn}
policies: {p: {quota: 5, window: 1m}}
rules: [{name: r, match: "/", key: "{ip}", policies: [p]}]
YAML
# A network namespace of its own: the fixed ports clash with nothing.
unshare --net --fork bash -s "$dir" "$reload" <<'INNER' >"$dir/reload.out"
set -u
dir=$1 reload=$2
ip link set lo up
"$dir/floodgate" serve -c "$dir/floodgate.yaml" --no-watch >"$dir/daemon.log" 2>&1 &
MAINPID=$!
for _ in $(seq 100); do "$dir/floodgate" healthcheck 2>/dev/null && break; sleep 0.1; done
limit() { curl -s -X POST http://127.0.0.1:8081/v1/check -d '{"key":"k","policies":["p"]}' | grep -o '"limit":[0-9]*' | head -n 1; }
echo "before=$(limit)"
sed -i 's/quota: 5/quota: 7/' "$dir/floodgate.yaml"
eval "${reload//\$MAINPID/$MAINPID}"
for _ in $(seq 50); do [[ $(limit) == '"limit":7' ]] && break; sleep 0.1; done
echo "after=$(limit)"
echo "reloads=$(curl -s http://127.0.0.1:9090/metrics | grep '^floodgate_config_reloads_total{result="ok"}')"
sed -i 's/quota: 7/quota: -1/' "$dir/floodgate.yaml"
( eval "${reload//\$MAINPID/$MAINPID}" ) >/dev/null 2>&1 && rc=0 || rc=$?
echo "bad_reload_rc=$rc"
echo "after_bad=$(limit)"
kill -TERM "$MAINPID"; wait "$MAINPID"; echo "exit=$?"
INNER
cat "$dir/reload.out"
check "ExecReload ($reload) applies the new quota" grep -qx 'after="limit":7' "$dir/reload.out"
check "the reload counts as ok" grep -qx 'reloads=floodgate_config_reloads_total{result="ok"} 1' "$dir/reload.out"
check "a rejected file fails the reload" grep -qx 'bad_reload_rc=[1-9][0-9]*' "$dir/reload.out"
check "the old quota stays after it" grep -qx 'after_bad="limit":7' "$dir/reload.out"
check "SIGTERM afterwards: exit 0" grep -qx 'exit=0' "$dir/reload.out"
if ((failed > 0)); then cat "$dir/daemon.log"; fi
echo "systemd: $passed passed, $failed failed"
((failed == 0))
