#!/usr/bin/env bash
# How long an xDS snapshot change takes to apply (docs/ENVOY.md, "Envoy
# Gateway and AI Gateway"): BenchmarkXDSApply pushes a changed
# RateLimitConfig through go-control-plane's server/v3 + cache/v3 on
# loopback and times it until the daemon answers ShouldRateLimit by the
# new limit and the server holds its ACK. TestXDSSnapshotUnderLoad (in
# make test) proves no request fails or goes unlimited meanwhile.
#
# Environment: COUNT (5 runs), N (200 snapshots a run).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../cmd/floodgate"
go test -run '^$' -bench '^BenchmarkXDSApply$' -benchtime "${N:-200}x" -count "${COUNT:-5}" ./server
