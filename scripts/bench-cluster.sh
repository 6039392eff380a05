#!/usr/bin/env bash
# Redis Cluster at shard scale (docs/SCALING.md, docs/BENCHMARKS.md "Redis
# Cluster"). Starts a 3-master and a 6-master cluster on loopback
# (scripts/cluster.sh, ports 7700-7702 and 7720-7725), runs what is asked,
# and stops both clusters again.
#
# Usage: scripts/bench-cluster.sh [capacity|reshard|all]   (default all)
#   capacity  bench/cmd/capacity over the standalone test Redis
#             ($FLOODGATE_TEST_REDIS, when set), the 3-master and the
#             6-master cluster, interleaved within each round
#   reshard   bench/cmd/reshard on the 3-master cluster while 3,000 slots
#             move from 7700 to 7701 and back: once over 20,000 keys, once
#             over 16 hot keys (decisions batched per slot), keys migrated
#             one per MIGRATE so each slot stays half-moved longest
#
# Environment: ROUNDS (5), DURATION (2s), ALG (gcra,sliding-window-counter),
# CONC (64,256) for capacity. Exits non-zero when a run fails; both runs of
# reshard are made even when the first fails.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
what=${1:-all}
[[ $what == capacity || $what == reshard || $what == all ]] || { sed -n '2,20p' "$0" >&2; exit 2; }

trap '"$here/cluster.sh" down 7700 || true; "$here/cluster.sh" down 7720 || true' EXIT
"$here/cluster.sh" up 3 7700
"$here/cluster.sh" up 6 7720
three=$("$here/cluster.sh" addrs 7700)
six=$("$here/cluster.sh" addrs 7720)
status=0
cd "$here/../bench"

if [[ $what != reshard ]]; then
  targets="$three;$six"
  [[ -n ${FLOODGATE_TEST_REDIS:-} ]] && targets="$FLOODGATE_TEST_REDIS;$targets"
  go run ./cmd/capacity -redis "$targets" -rounds "${ROUNDS:-5}" -d "${DURATION:-2s}" \
    -alg "${ALG:-gcra,sliding-window-counter}" -c "${CONC:-64,256}" || status=1
fi

if [[ $what != capacity ]]; then
  move="PIPELINE=1 '$here/cluster.sh' reshard 7700 7701 3000 && PIPELINE=1 '$here/cluster.sh' reshard 7701 7700 3000"
  echo; echo "== reshard, 20,000 keys, quota 40 each"
  go run ./cmd/reshard -redis "$three" -keys 20000 -quota 40 -during "$move" || status=1
  echo; echo "== reshard, 16 hot keys, quota 100,000 each"
  go run ./cmd/reshard -redis "$three" -keys 16 -quota 100000 -during "$move" || status=1
fi
exit $status
