// Package reduce lowers quotas for a while — capacity reduction, e.g. 50 %
// of every policy for 10 minutes while a backend recovers (REQUIREMENTS
// O4; draft-11 §5's temporary-reduced-capacity) — held in memory for one
// process or in Redis for every replica. Reductions is an engine.Capacity.
//
//	red := reduce.NewReductions(reduce.ReductionsConfig{})
//	red.Set(ctx, []string{reduce.AllPolicies}, 0.5, 10*time.Minute, "db failover")
//	eng, err := engine.New(engine.Config{Store: store, Capacity: red})
package reduce
