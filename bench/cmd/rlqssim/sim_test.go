package main

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/rlqs"
)

// TestSimulate: a short run of each load holds the bounds docs/RLQS.md
// states for the default interval: worst window ≤ 1.01 × the quota, false
// refusals ≤ 1 %, at most one store call per client per interval; and the
// same seed gives the same figures.
func TestSimulate(t *testing.T) {
	for _, flash := range []bool{false, true} {
		cfg := Config{Clients: 4, Quota: 100000, Duration: 10 * time.Second, Interval: rlqs.DefaultInterval, Flash: flash, Seed: 1}
		r, err := Simulate(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.Worst > 1.01 || r.Worst < 0.95 || r.FalseRefusals > 0.01 || r.CallsPerClientInterval > 1.0001 {
			t.Errorf("flash %v: %+v", flash, r)
		}
		again, err := Simulate(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if again != r {
			t.Errorf("flash %v: %+v, then %+v with the same seed", flash, r, again)
		}
	}
}
