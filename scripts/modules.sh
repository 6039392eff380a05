#!/usr/bin/env bash
# The repository's Go modules, one directory a line ("." is the root):
#
#   scripts/modules.sh library    the library's modules, each after those it requires
#   scripts/modules.sh released   those, then the daemon's: what scripts/release.sh tags
#   scripts/modules.sh all        every module: the released ones, bench, deploy, the examples
#
# lint.sh, tidy-check.sh, fuzz.sh, release.sh and make test-go read their
# modules here. Fails when a go.mod of the checkout is in no list, so a new
# module cannot be left out of them. docs/ARCHITECTURE.md, "Modules".
set -euo pipefail
cd "$(dirname "$0")/.."
library=(. grpclimit envoyrls rlqs metrics ops tier tierhttp)
released=("${library[@]}" cmd/floodgate)
all=("${released[@]}" bench deploy examples/chi examples/envoy/grpcservice)
found=$(find . -name go.mod -not -path '*/.*/*' -printf '%h\n' | sed 's|^\./||' | sort)
missing=$(comm -23 <(echo "$found") <(printf '%s\n' "${all[@]}" | sort))
if [[ -n $missing ]]; then
  echo "scripts/modules.sh: modules in no list: $missing" >&2
  exit 1
fi
case ${1:-all} in
  library) printf '%s\n' "${library[@]}" ;;
  released) printf '%s\n' "${released[@]}" ;;
  all) printf '%s\n' "${all[@]}" ;;
  *) echo "usage: scripts/modules.sh [library|released|all]" >&2; exit 2 ;;
esac
