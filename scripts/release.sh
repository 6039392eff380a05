#!/usr/bin/env bash
# Tags a release of the checkout's HEAD, pushing nothing:
#
#   scripts/release.sh v1.2.0      # then push the tags it prints
#
# The library's root module is tagged VERSION on HEAD. Every other released
# module (scripts/modules.sh released: the library's nested modules, then
# the daemon's) requires the library's modules through replace directives
# to this checkout, which its users ignore and `go install …@VERSION`
# refuses, so each gets a commit of its own on top of the last (on no
# branch) whose go.mod requires the tags of those modules instead, with
# go.sum filled in from those tags in this checkout: the same bytes a
# module proxy serves once the tags are pushed. That commit is tagged
# DIR/VERSION, one module after another, each after those it requires.
# docs/ARCHITECTURE.md, "Modules".
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
version=${1:?usage: scripts/release.sh vX.Y.Z}
lib=github.com/floodgate/floodgate
repo=$(pwd -P)
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
  { echo "release: $version is not a semantic version (vX.Y.Z)" >&2; exit 1; }
# v2 and later need /vN in every module path (Go's semantic import versioning).
[[ $version =~ ^v[01]\. ]] ||
  { major=${version%%.*}; echo "release: $version needs a /$major module path first; only v0 and v1 are released as is" >&2; exit 1; }
[[ -z $(git status --porcelain) ]] ||
  { echo "release: the checkout has uncommitted changes" >&2; exit 1; }
nested=$(scripts/modules.sh released | grep -vx '\.')
tags=("$version")
for dir in $nested; do tags+=("$dir/$version"); done
for tag in "${tags[@]}"; do
  if git rev-parse -q --verify "refs/tags/$tag" >/dev/null; then
    echo "release: tag $tag exists" >&2; exit 1
  fi
done

# pin DIR: in the release's worktree, DIR's go.mod requires VERSION of each
# of the library's modules it names instead of replacing them, and is
# tidied. The new tags are fetched from this checkout, not the network: git
# rewrites the modules' address to this directory (GIT_CONFIG_*), and
# GOPRIVATE sends the go command to git for them instead of a proxy.
pin() {
  local own edits=() p
  own=$(cd "$work/$1" && "$GO" list -m)
  for p in $(cd "$work/$1" && "$GO" mod edit -json | grep -o "\"$lib[^\"]*\"" | tr -d '"' | sort -u); do
    [[ $p == "$own" ]] || edits+=(-dropreplace "$p" -require "$p@$version")
  done
  (cd "$work/$1" &&
    "$GO" mod edit "${edits[@]}" &&
    GOWORK=off GOPRIVATE=$lib GIT_CONFIG_COUNT=1 \
      GIT_CONFIG_KEY_0="url.file://$repo.insteadOf" GIT_CONFIG_VALUE_0="https://$lib" \
      "$GO" mod tidy)
}

work=$(mktemp -d)
made=()
fail() {
  echo "release: $*; the tags made are removed" >&2
  for tag in "${made[@]}"; do git tag -d "$tag" >/dev/null; done
  exit 1
}
trap 'git worktree remove --force "$work" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git tag -a "$version" -m "Floodgate $version"
made+=("$version")
git worktree add -q --detach "$work" HEAD
for dir in $nested; do
  pin "$dir" || fail "module $dir does not resolve against $version"
  git -C "$work" add -A "$dir"
  git -C "$work" commit -q -m "$dir $version: require the library's $version, not this checkout"
  git -C "$work" tag -a "$dir/$version" -m "Floodgate $dir $version"
  made+=("$dir/$version")
done
echo "tagged ${made[*]}; publish with:"
echo "  git push origin ${made[*]}"
