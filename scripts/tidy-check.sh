#!/usr/bin/env bash
# Fails when go.mod or go.sum of any module of the repository (the
# library's, the daemon's, bench, deploy and the examples:
# scripts/modules.sh all) is not what `go mod tidy` would write: a
# requirement nothing imports, a direct one marked indirect, a missing
# checksum. Prints the difference and the command that fixes it.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
status=0
modules=$(scripts/modules.sh all)
for dir in $modules; do
  if ! diff=$(cd "$dir" && "$GO" mod tidy -diff 2>&1); then
    echo "$dir/go.mod or go.sum is not tidy; run (cd $dir && go mod tidy):" >&2
    echo "$diff" >&2
    status=1
  fi
done
exit $status
