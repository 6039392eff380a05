// Package admin serves the operations routes of the admin listener —
// POST and DELETE /v1/admin/reduce, GET /v1/admin/reductions, /top and
// /alerts, and the live dashboard with its files embedded in the binary —
// over the parts of packages detect, reduce, top and stats, and is their
// Go client (AdminClient, which `floodgate reduce` uses).
//
//	stats := stats.NewStats(stats.Config{})
//	offenders := top.NewOffenders(top.OffendersConfig{})
//	det, _ := detect.NewDetector(detect.DetectorConfig{Default: detect.AbuseRule{Block: 5 * time.Minute}})
//	red := reduce.NewReductions(reduce.ReductionsConfig{})
//	eng, _ := engine.New(engine.Config{Store: store,
//		Observer: engine.Observers{det, offenders, stats}, Blocker: det, Capacity: red})
//	h := admin.NewAdmin(admin.Config{Detector: det, Offenders: offenders, Stats: stats, Reductions: red})
package admin
