#!/usr/bin/env bash
# Tags a release of the checkout's HEAD, pushing nothing:
#
#   scripts/release.sh v1.2.0      # then: git push origin v1.2.0 cmd/floodgate/v1.2.0
#
# The library (the root module) is tagged VERSION on HEAD. The daemon's
# module requires the library through a replace directive to this
# checkout, which `go install …/cmd/floodgate@VERSION` refuses, so its tag,
# cmd/floodgate/VERSION, goes on a commit of its own on top of HEAD (on no
# branch) whose go.mod requires the library's tag instead, with go.sum
# filled in from that tag in this checkout: the same bytes a module proxy
# serves once the tag is pushed. docs/ARCHITECTURE.md, "Modules".
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
version=${1:?usage: scripts/release.sh vX.Y.Z}
lib=github.com/floodgate/floodgate
repo=$(pwd -P)
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
  { echo "release: $version is not a semantic version (vX.Y.Z)" >&2; exit 1; }
[[ -z $(git status --porcelain) ]] ||
  { echo "release: the checkout has uncommitted changes" >&2; exit 1; }
for tag in "$version" "cmd/floodgate/$version"; do
  if git rev-parse -q --verify "refs/tags/$tag" >/dev/null; then
    echo "release: tag $tag exists" >&2; exit 1
  fi
done

work=$(mktemp -d)
trap 'git worktree remove --force "$work" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git tag -a "$version" -m "Floodgate $version"
git worktree add -q --detach "$work" HEAD
# The library's new tag is fetched from this checkout, not the network:
# git rewrites the module's address to this directory (GIT_CONFIG_*), and
# GOPRIVATE sends the go command to git for it instead of a proxy.
if ! (cd "$work/cmd/floodgate" &&
  "$GO" mod edit -dropreplace "$lib" -require "$lib@$version" &&
  GOWORK=off GOPRIVATE=$lib GIT_CONFIG_COUNT=1 \
    GIT_CONFIG_KEY_0="url.file://$repo.insteadOf" GIT_CONFIG_VALUE_0="https://$lib" \
    "$GO" mod tidy); then
  git tag -d "$version" >/dev/null
  echo "release: the daemon's module does not resolve against $version; tag $version removed" >&2
  exit 1
fi
git -C "$work" commit -q -am "cmd/floodgate $version: require the library's $version, not this checkout"
git -C "$work" tag -a "cmd/floodgate/$version" -m "Floodgate daemon $version"
echo "tagged $version and cmd/floodgate/$version; publish with:"
echo "  git push origin $version cmd/floodgate/$version"
