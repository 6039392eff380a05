#!/usr/bin/env bash
# Builds Traefik (for TestTraefikFailureModes, cmd/floodgate) into a cache
# directory outside the repository and prints the binary's path:
#
#   FLOODGATE_TEST_TRAEFIK=$(scripts/traefik-build.sh)
#
# Traefik has no Debian package, and `go install
# github.com/traefik/traefik/v3/cmd/traefik@VERSION` refuses its module: its
# go.mod holds replace directives, which go install does not apply. So the
# module's source comes from the Go module proxy (`go mod download`) and is
# built inside it, where they apply. v3.7's source cannot build here: its
# ./pkg/config/dynamic/ext replacement is a module of its own, not in the
# module's zip, and the proxy refuses several of its lego DNS providers'
# modules. The first build takes many minutes on two cores; later calls
# reuse the binary.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

version=v3.6.12
dir="${XDG_CACHE_HOME:-$HOME/.cache}/floodgate-tools/traefik-$version"
bin=$dir/traefik
if [[ ! -x $bin ]]; then
  log "building Traefik (github.com/traefik/traefik/v3 $version) into $dir"
  src=$(cd /tmp && go mod download -json "github.com/traefik/traefik/v3@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -d $src ]] || die "go mod download github.com/traefik/traefik/v3@$version gave no source directory"
  mkdir -p "$(dirname "$dir")"
  work=$(mktemp -d "$dir.build.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  cp -r "$src/." "$work"
  chmod -R u+w "$work"
  (cd "$work" && go build -trimpath -o "$work/traefik" ./cmd/traefik) >&2 || die "building Traefik $version failed"
  mkdir -p "$dir"
  mv "$work/traefik" "$bin"
fi
echo "$bin"
