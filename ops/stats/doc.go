// Package stats keeps the last minutes of decisions for the dashboard:
// per rule and step the allowed, limited, blocked, reduced-capacity and
// shadow counts, the Retry-After values and the store's latency
// quantiles. Stats is an engine.Observer.
//
//	s := stats.NewStats(stats.Config{})
//	eng, err := engine.New(engine.Config{Store: store, Observer: s})
//	snap := s.Snapshot()
package stats
