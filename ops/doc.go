// Package ops turns rate-limit decisions into operations signals and
// controls (REQUIREMENTS O3, O4; draft-11 §5 problem types, H5):
//
//   - Detector: abuse detection over limit events (by default the same key
//     limited 100 times within a minute), with one error-level log record,
//     a counter, an optional webhook and an optional block per alert. It
//     is an engine.Observer and an engine.Blocker.
//   - Reductions: temporary capacity reduction (e.g. 50% for 10 minutes),
//     in memory or in Redis for every replica; an engine.Capacity.
//   - Offenders: the most limited keys per rule, in bounded memory
//     (Space-Saving, see TopK); an engine.Observer.
//   - Stats: the last minutes of decisions, Retry-After values and store
//     latency quantiles for the dashboard; an engine.Observer.
//   - Admin: the HTTP handler of the admin routes (POST /v1/admin/reduce,
//     GET /v1/admin/top, GET /dashboard, ...), with the dashboard's files
//     embedded in the binary.
//
// Wire them into a Middleware with Observers for the fan-out:
//
//	stats := ops.NewStats(ops.StatsConfig{})
//	top := ops.NewOffenders(ops.OffendersConfig{})
//	det, _ := ops.NewDetector(ops.DetectorConfig{Default: ops.AbuseRule{Block: 5 * time.Minute}})
//	red := ops.NewReductions(ops.ReductionsConfig{})
//	mw, _ := httplimit.New(httplimit.Config{
//		Store: store, Rules: rules,
//		Observer: engine.Observers{det, top, stats}, Blocker: det, Capacity: red,
//	})
//	admin := ops.NewAdmin(ops.AdminConfig{Detector: det, Offenders: top, Stats: stats, Reductions: red})
package ops
