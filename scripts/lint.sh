#!/usr/bin/env bash
# The lint gate of `make test`: every module's Go files (scripts/modules.sh
# all) are gofmt-clean and pass staticcheck. staticcheck is installed, at the pinned version, into a
# cache directory outside the repository when it is missing there.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
STATICCHECK_VERSION=${STATICCHECK_VERSION:-v0.8.2}
bin="${XDG_CACHE_HOME:-$HOME/.cache}/floodgate-tools/staticcheck-$STATICCHECK_VERSION"
if [ ! -x "$bin/staticcheck" ]; then
  GOBIN="$bin" "$GO" install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi
status=0
unformatted=$(gofmt -l $(git ls-files '*.go' | sort -u))
if [ -n "$unformatted" ]; then
  echo "not gofmt-clean; run gofmt -w on:" >&2
  echo "$unformatted" >&2
  status=1
fi
modules=$(scripts/modules.sh all)
for dir in $modules; do
  (cd "$dir" && "$bin/staticcheck" ./...) || { echo "staticcheck found the above in $dir" >&2; status=1; }
done
exit $status
