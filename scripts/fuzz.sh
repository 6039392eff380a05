#!/usr/bin/env bash
# Runs every fuzz target of the library's and the daemon's modules
# (scripts/modules.sh released) for
# FUZZTIME each (default 20s). The targets are found by
# `go test -list '^Fuzz' ./...` in each, so a new one is run without being
# named here. Fails on the first target that finds a
# failing input (go test writes it under the package's testdata/fuzz/).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-20s}
# -list prints a package's matching names, then "ok  <package>  <time>".
modules=$(scripts/modules.sh released)
targets=$(for mod in $modules; do
  "$GO" -C "$mod" test -list '^Fuzz' ./... | awk -v mod="$mod" '
    /^Fuzz/ { names[n++] = $1; next }
    /^ok/   { for (i = 0; i < n; i++) print mod, $2, names[i]; n = 0 }'
done)
[ -n "$targets" ] || { echo "no fuzz targets found" >&2; exit 1; }
count=0
while read -r mod pkg name; do
  echo "== $pkg $name ($FUZZTIME)"
  "$GO" -C "$mod" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg"
  count=$((count + 1))
done <<<"$targets"
echo "$count fuzz targets passed"
