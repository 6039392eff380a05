#!/usr/bin/env bash
# Stops every private Redis instance that services-up.sh started (standalone
# 7200, cluster 7100-7105, sentinel set 7300/7301/7310) and removes their state
# directory. Never touches the machine's own Redis on 6379 or PostgreSQL.
# Idempotent: running it with nothing up is a quick no-op.
#
# Usage: scripts/services-down.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

exec 9>"$LOCK_FILE"
flock -w 120 9 || die "another services-up/down holds $LOCK_FILE"
down_all
