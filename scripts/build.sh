#!/bin/sh
# Builds the static floodgate binary that make build, the Dockerfile and
# the empty-root test share, so all three use the same flags:
#
#   scripts/build.sh [OUT]        # default bin/floodgate
#
# CGO off (no libc: the binary runs in an empty root or FROM scratch),
# -trimpath (no build paths inside), and the version, commit and date
# that `floodgate version` prints. They come from git unless VERSION,
# COMMIT and DATE are set (the Dockerfile's build context has no .git).
# DATE is the commit's date, so rebuilding a commit stamps the same date.
set -eu
cd "$(dirname "$0")/.."
out=${1:-bin/floodgate}
case $out in /*) ;; *) out=$PWD/$out ;; esac   # go -C below builds from cmd/floodgate
git_says() { git "$@" 2>/dev/null || true; }
VERSION=${VERSION:-$(git_says describe --tags --always --dirty)}
COMMIT=${COMMIT:-$(git_says rev-parse HEAD)}
DATE=${DATE:-$(git_says log -1 --format=%cI)}
# The daemon is a module of its own (cmd/floodgate/go.mod), hence -C.
# -buildvcs=false: the stamps say it, and git in a container owned by
# another user would otherwise fail the build ("error obtaining VCS status").
CGO_ENABLED=0 exec "${GO:-go}" -C cmd/floodgate build -trimpath -buildvcs=false \
  -ldflags "-s -w -X main.version=${VERSION:-unknown} -X main.commit=${COMMIT:-unknown} -X main.date=${DATE:-unknown}" \
  -o "$out" .
