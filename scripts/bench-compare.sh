#!/usr/bin/env bash
# Two commits side by side: BenchmarkMiddleware (bench module) and
# scripts/bench-daemon.sh, built from each commit and run in alternation,
# so that the machine's drift falls on both alike (docs/BENCHMARKS.md).
#
#   scripts/bench-compare.sh BEFORE AFTER           # e.g. eba146c HEAD
#   ROUNDS=6 DAEMON_ROUNDS=2 scripts/bench-compare.sh eba146c HEAD
#
# Prints benchstat's table (before → after) for the middleware, and each
# daemon run's figures labelled by commit. Worktrees go to a scratch
# directory and are removed at the end.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ $# -eq 2 ]] || { echo "usage: $0 BEFORE AFTER" >&2; exit 2; }
rounds=${ROUNDS:-6}
daemon_rounds=${DAEMON_ROUNDS:-2}
bench=${BENCH:-BenchmarkMiddleware}
work=$(mktemp -d)
cleanup() {
  for c in before after; do git -C "$root" worktree remove --force "$work/$c" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
command -v benchstat >/dev/null || GOBIN=$work/bin go install golang.org/x/perf/cmd/benchstat@latest
export PATH=$work/bin:$PATH
declare -A revs=([before]=$1 [after]=$2)
for c in before after; do
  rev=${revs[$c]}
  git -C "$root" worktree add -q --detach "$work/$c" "$rev"
  (cd "$work/$c/bench" && go test -c -o "$work/$c.test" . >/dev/null)
  echo "$c = $(git -C "$root" rev-parse --short "$rev")"
done
for ((r = 1; r <= rounds; r++)); do
  for c in before after; do
    (cd "$work/$c/bench" && "$work/$c.test" -test.run '^$' -test.bench "^$bench\$" -test.benchmem -test.count 1) >>"$work/$c.txt"
  done
done
benchstat "$work/before.txt" "$work/after.txt"
. "$root/scripts/lib.sh"
[[ -f /tmp/floodgate-test/env ]] && . /tmp/floodgate-test/env
for ((r = 1; r <= daemon_rounds; r++)); do
  for c in before after; do
    echo "== daemon, $c, round $r"
    (cd "$work/$c" && ROUNDS=1 scripts/bench-daemon.sh 2>&1 | grep -v '^#' | tail -n 12) || true
  done
done
