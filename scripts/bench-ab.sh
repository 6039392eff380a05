#!/usr/bin/env bash
# The middleware alone, two or more commits side by side: for each commit a
# scratch module holding one benchmark (the BenchmarkMiddleware rule: GCRA,
# one key per client address, 1,000 addresses; the default fields and no
# fields, each beside the bare handler), linked against that commit's
# httplimit and memorystore only, so the rest of the tree cannot change
# the binaries' layout. The binaries run in alternation; the table gives
# each one's minimum and median ns/op (docs/BENCHMARKS.md).
#
#   scripts/bench-ab.sh eba146c 2aa5381 HEAD
#   RUNS=10 ITERATIONS=300000 scripts/bench-ab.sh eba146c HEAD
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ $# -ge 2 ]] || { echo "usage: $0 REV REV [REV...]" >&2; exit 2; }
runs=${RUNS:-10}
iterations=${ITERATIONS:-300000}
work=$(mktemp -d)
cleanup() {
  for d in "$work"/tree-*; do [[ -d $d ]] && git -C "$root" worktree remove --force "$d" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

build() { # build REV N: the benchmark binary of REV as $work/bench-N
  local rev=$1 n=$2 tree=$work/tree-$2 mod=$work/mod-$2 style=httplimit
  git -C "$root" worktree add -q --detach "$tree" "$rev"
  # The header styles moved from httplimit to engine with the engine.
  grep -q 'HeaderStyle uint8' "$tree/engine/fields.go" 2>/dev/null && style=engine
  mkdir -p "$mod"
  printf 'module ab\n\ngo 1.26\n\nrequire github.com/floodgate/floodgate v0.0.0\n\nreplace github.com/floodgate/floodgate => %s\n' "$tree" >"$mod/go.mod"
  cat >"$mod/ab_test.go" <<GO
package ab

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/memorystore"
	$([[ $style == engine ]] && echo '"github.com/floodgate/floodgate/engine"')
)

func BenchmarkMW(b *testing.B) {
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	reqs := make([]*http.Request, 1000)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/api/items", nil)
		reqs[i].RemoteAddr = fmt.Sprintf("10.0.%d.%d:40000", i/256, i%256)
	}
	store := memorystore.New()
	defer store.Close()
	for _, st := range []struct {
		name  string
		style $style.HeaderStyle
	}{{"default", $style.Both}, {"none", $style.None}} {
		mw, err := httplimit.New(httplimit.Config{Store: store, Headers: st.style, Rules: []httplimit.Rule{{
			Pattern:  "/",
			Policies: []floodgate.Policy{{Name: "api-" + st.name, Algorithm: floodgate.GCRA, Quota: 1e7, Window: time.Minute}},
		}}})
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct {
			name string
			h    http.Handler
		}{{"bare-" + st.name, bare}, {st.name, mw.Wrap(bare)}} {
			b.Run(c.name, func(b *testing.B) {
				i := 0
				for b.Loop() {
					rec := httptest.NewRecorder()
					c.h.ServeHTTP(rec, reqs[i%len(reqs)])
					if rec.Code != 200 {
						b.Fatal(rec.Code)
					}
					i++
				}
			})
		}
	}
}
GO
  (cd "$mod" && GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 && go test -c -o "$work/bench-$n" .)
}

n=0
for rev in "$@"; do
  n=$((n + 1))
  build "$rev" "$n"
  echo "$n = $rev ($(git -C "$root" rev-parse --short "$rev"))"
done
for ((r = 1; r <= runs; r++)); do
  for ((i = 1; i <= n; i++)); do
    "$work/bench-$i" -test.run '^$' -test.bench BenchmarkMW -test.benchtime "${iterations}x" -test.cpu 1 |
      awk -v c=$i '$3 == "ns/op" || $4 == "ns/op" { sub(/^BenchmarkMW\//, "", $1); print c, $1, $3 }' >>"$work/results"
  done
done
# min and median per commit and benchmark
sort -k2,2 -k1,1n -k3,3g "$work/results" | awk '
  { key = $2 " " $1; v[key] = v[key] " " $3; n[key]++ }
  END {
    printf "%-14s %-6s %10s %10s\n", "benchmark", "commit", "min ns/op", "median"
    for (k in v) {
      split(substr(v[k], 2), a, " "); m = n[k]
      med = (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
      split(k, kk, " ")
      printf "%-14s %-6s %10.0f %10.0f\n", kk[1], kk[2], a[1], med
    }
  }' | sort
