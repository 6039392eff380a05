// Package rlqs is Envoy's Rate Limit Quota Service
// (envoy.service.rate_limit_quota.v3.RateLimitQuotaService) on a Floodgate
// Store: clients report their usage per bucket every interval and enforce,
// locally, the assignment the server sends back.
//
// Each assignment is a lease: a token bucket of L tokens refilled L per
// interval, where L is the client's demand for one interval bounded by its
// demand-weighted share of what is left of the bucket's quota. The server
// takes what a client could spend until its next report (the lease's full
// bucket plus one refill) from the global quota in the Store before it
// answers, crediting what the client had reserved and not yet spent, so
// several clients and several servers on one Redis never hand out more
// than the quota, up to one round trip of traffic per changed assignment
// (docs/RLQS.md states the bounds). A report costs at most one Store call
// per bucket per stream, and none when it comes sooner than half an
// interval after the last lease.
package rlqs
