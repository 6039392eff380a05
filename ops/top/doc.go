// Package top keeps the most refused keys per rule in bounded memory
// (Space-Saving, see TopK): Offenders is an engine.Observer, shown on the
// dashboard and as the floodgate_top_offender_requests metric, with keys
// as fingerprints unless raw keys are asked for.
//
//	offenders := top.NewOffenders(top.OffendersConfig{})
//	eng, err := engine.New(engine.Config{Store: store, Observer: offenders})
//	worst := offenders.Top("login", 10)
package top
