#!/usr/bin/env bash
# What a user types to install the daemon,
#
#   go install github.com/floodgate/floodgate/cmd/floodgate@latest
#
# run from an empty GOPATH against a release of this checkout played into
# a scratch repository: its files (committed or not, as git would see
# them) are committed there, scripts/release.sh tags v0.99.0 (the library's
# modules and the daemon's), and git rewrites their address to that
# repository for the go command
# (GIT_CONFIG_*; GOPRIVATE sends the go command to git for it). Every other
# module comes from this machine's module cache, else the module proxy.
# Passes when the installed binary reports the release's version.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
lib=github.com/floodgate/floodgate
version=v0.99.0
dir=$(mktemp -d /tmp/floodgate-install.XXXXXX)
trap 'chmod -R u+w "$dir"; rm -rf "$dir"' EXIT   # the module cache is read-only

mkdir "$dir/repo"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
  xargs -0 cp --parents -t "$dir/repo"
export GIT_AUTHOR_NAME=floodgate GIT_AUTHOR_EMAIL=floodgate@localhost
export GIT_COMMITTER_NAME=floodgate GIT_COMMITTER_EMAIL=floodgate@localhost
git -C "$dir/repo" init -q
git -C "$dir/repo" add -A
git -C "$dir/repo" commit -qm "scratch copy for the install test"
# Module caches of this run only: the scratch release's v0.99.0 of one run
# must never be served to the next, whose code differs under the same version.
cache=$("$GO" env GOMODCACHE)
proxy="file://$cache/cache/download,$("$GO" env GOPROXY)"
GOMODCACHE="$dir/release-mod" GOPROXY=$proxy "$dir/repo/scripts/release.sh" "$version" >"$dir/release.log" 2>&1 ||
  { cat "$dir/release.log" >&2; echo "FAIL scripts/release.sh $version" >&2; exit 1; }

env GOPATH="$dir/gopath" GOMODCACHE="$dir/gopath/pkg/mod" GOFLAGS= GOWORK=off \
  GOPROXY=$proxy GOPRIVATE=$lib \
  GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0="url.file://$dir/repo.insteadOf" GIT_CONFIG_VALUE_0="https://$lib" \
  "$GO" install "$lib/cmd/floodgate@latest" 2>"$dir/install.log" ||
  { cat "$dir/install.log" >&2; echo "FAIL go install $lib/cmd/floodgate@latest" >&2; exit 1; }
got=$("$dir/gopath/bin/floodgate" version | head -1)
if [[ $got != "floodgate $version" ]]; then
  echo "FAIL go install $lib/cmd/floodgate@latest: the binary says \"$got\", want \"floodgate $version\"" >&2
  exit 1
fi
echo "ok   go install $lib/cmd/floodgate@latest from an empty GOPATH: $got"
