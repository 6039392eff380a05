#!/usr/bin/env bash
# Runs the in-memory benchmarks of the bench module (Floodgate's memorystore
# side by side with golang.org/x/time/rate, ulule/limiter and
# sethvargo/go-limiter), keeps the raw output in bench/bench.txt, prints
# benchstat's summary with one column per limiter, then a table of ratios:
# how many times faster (or smaller) Floodgate is than each peer.
# docs/BENCHMARKS.md explains the workloads and records figures.
#
# This machine's speed drifts by up to 2x within minutes, so the runs are
# interleaved: the test binary runs COUNT times, each run taking every
# contender of a workload once, back to back. A ratio is the median of the
# ratios within each run, so a slow minute weighs on every contender alike.
#
# Environment: COUNT (default 6) runs per benchmark; BENCH (default: the
# in-memory benchmarks) the -bench regexp; BENCHTIME passed as -benchtime
# when set.
set -euo pipefail

cd "$(dirname "$0")/../bench"

COUNT=${COUNT:-6}
BENCH=${BENCH:-'^Benchmark(HotKey|ManyKeys|ManyKeysParallel|ManyKeysRandomParallel|Memory)$'}
OUT=bench.txt

gobin=$(go env GOBIN)
export PATH="$PATH:${gobin:-$(go env GOPATH)/bin}"
if ! command -v benchstat >/dev/null; then
  echo "installing benchstat" >&2
  go install golang.org/x/perf/cmd/benchstat@latest
fi

bin=$(mktemp)
trap 'rm -f "$bin"' EXIT
go test -c -o "$bin" .
args=(-test.run '^$' -test.bench "$BENCH" -test.benchmem -test.count 1)
[[ -n ${BENCHTIME:-} ]] && args+=(-test.benchtime "$BENCHTIME")
: >"$OUT"
for ((i = 1; i <= COUNT; i++)); do
  echo "== run $i of $COUNT" >&2
  "$bin" "${args[@]}" | tee -a "$OUT"
done

echo
echo "== benchstat (columns: lib; 'vs base' compares with the first column)"
benchstat -col /lib "$OUT"

# Ratios: peer ÷ Floodgate for ns/op (so > 1 means Floodgate is faster;
# for the parallel workload it is the throughput ratio) and for bytes/key
# (> 1 means Floodgate is smaller), taken within each run; the median of
# those is shown.
echo
echo "== ratios (peer ÷ floodgate, median of the $COUNT runs' own ratios; > 1 = floodgate better)"
awk '
  function median(list,    n, v, i, j, t) {
    n = split(list, v, " ")
    for (i = 2; i <= n; i++)             # insertion sort, n is small
      for (j = i; j > 1 && v[j-1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
    return n % 2 ? v[(n+1)/2] : (v[n/2] + v[n/2+1]) / 2
  }
  /^goos:/ { rn++ }                                # each run prints its own header
  /^Benchmark[^ \t]*\/lib=/ {
    name = $1
    sub(/^Benchmark/, "", name)
    sub(/-[0-9]+$/, "", name)                      # GOMAXPROCS suffix
    lib = name; sub(/.*\/lib=/, "", lib); sub(/\/.*/, "", lib)
    work = name; sub(/\/lib=[^\/]*/, "", work)
    for (i = 3; i < NF; i++) {
      if ($(i+1) == "ns/op" || $(i+1) == "bytes/key" || $(i+1) == "allocs/op") {
        k = work SUBSEP lib SUBSEP $(i+1)
        vals[k] = vals[k] " " $i
        run[k, rn] = $i
      }
    }
    if (!(work in seenw)) { seenw[work] = 1; works[++nw] = work }
    if (!(lib in seenl)) { seenl[lib] = 1; libs[++nl] = lib }
  }
  END {
    for (k in vals) med[k] = median(vals[k])
    nours = 0
    for (i = 1; i <= nl; i++) if (libs[i] ~ /^floodgate/) ours[++nours] = libs[i]
    for (w = 1; w <= nw; w++) {
      unit = ((works[w] SUBSEP ours[1] SUBSEP "bytes/key") in med) ? "bytes/key" : "ns/op"
      printf "\n%s (median %s, allocs/op)\n", works[w], unit
      printf "  %-24s %12s %9s", "lib", unit, "allocs"
      for (o = 1; o <= nours; o++)
        if ((works[w] SUBSEP ours[o] SUBSEP unit) in med) printf "  %16s", "vs " ours[o]
      printf "\n"
      for (i = 1; i <= nl; i++) {
        k = works[w] SUBSEP libs[i] SUBSEP unit
        if (!(k in med)) continue
        a = works[w] SUBSEP libs[i] SUBSEP "allocs/op"
        printf "  %-24s %12.1f %9s", libs[i], med[k], (a in med) ? med[a] : "-"
        for (o = 1; o <= nours; o++) {
          ko = works[w] SUBSEP ours[o] SUBSEP unit
          if (!(ko in med)) continue
          if (libs[i] ~ /^floodgate/) { printf "  %16s", "-"; continue }
          r = ""
          for (n = 1; n <= rn; n++)                # only runs that measured both
            if ((k, n) in run && (ko, n) in run) r = r " " run[k, n] / run[ko, n]
          printf "  %15.2fx", median(r)
        }
        printf "\n"
      }
    }
  }
' "$OUT"
