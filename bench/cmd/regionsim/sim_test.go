package main

import (
	"reflect"
	"testing"
)

func configs() []Config {
	var cs []Config
	for si, sc := range scenarios {
		for _, d := range []Design{Global, Split, Async, Bounded} {
			cs = append(cs, configure(Config{Quota: 500, Duration: 10_000, HopMs: 20}, sc, si, 7, 3, 50, d))
		}
	}
	return cs
}

// TestDeterministic: the same configuration gives the same result, and the
// traffic depends on the seed.
func TestDeterministic(t *testing.T) {
	for _, c := range configs() {
		if a, b := Run(c), Run(c); !reflect.DeepEqual(a, b) {
			t.Errorf("%s %v: two runs differ:\n%+v\n%+v", c.Scenario.Name, c.Design, a, b)
		}
		other := c
		other.Seed++
		if a, b := Run(c), Run(other); a.Offered == b.Offered && reflect.DeepEqual(a.PerRegion, b.PerRegion) {
			t.Errorf("%s %v: seeds %d and %d give the same traffic", c.Scenario.Name, c.Design, c.Seed, other.Seed)
		}
	}
}

// TestConservation: every request offered is admitted or refused, in each
// region; the designs meet the same requests; no region that is down is
// offered anything.
func TestConservation(t *testing.T) {
	offered := map[string]int64{}
	for _, c := range configs() {
		r := Run(c)
		var sum [3]int64
		for i, p := range r.PerRegion {
			if p[0] != p[1]+p[2] {
				t.Errorf("%s %v region %d: offered %d ≠ admitted %d + refused %d", c.Scenario.Name, c.Design, i, p[0], p[1], p[2])
			}
			for k := range sum {
				sum[k] += p[k]
			}
		}
		if sum != [3]int64{r.Offered, r.Admitted, r.Refused} || r.Offered == 0 {
			t.Errorf("%s %v: totals %v, regions sum to %v", c.Scenario.Name, c.Design, [3]int64{r.Offered, r.Admitted, r.Refused}, sum)
		}
		if o, ok := offered[c.Scenario.Name]; ok && o != r.Offered {
			t.Errorf("%s %v: offered %d, another design met %d", c.Scenario.Name, c.Design, r.Offered, o)
		}
		offered[c.Scenario.Name] = r.Offered
	}
}

// TestExactDesigns: the global cluster never admits more than the quota in
// a window and, with its home up, refuses nothing the quota had room for;
// neither does any design with one region, where nothing is shared.
func TestExactDesigns(t *testing.T) {
	for _, c := range configs() {
		if c.Scenario.Name == "region-down" {
			continue
		}
		if c.Design == Global {
			if r := Run(c); r.Worst > 1 || r.FalseRefusals != 0 {
				t.Errorf("global, %s: worst window %.3f, false refusals %.4f; want ≤ 1 and 0", c.Scenario.Name, r.Worst, r.FalseRefusals)
			}
		}
		c.Regions = 1
		if r := Run(c); r.Worst > 1 || r.FalseRefusals != 0 || r.Messages != 0 {
			t.Errorf("%v, one region, %s: worst %.3f, false refusals %.4f, %d messages; want ≤ 1, 0, 0", c.Design, c.Scenario.Name, r.Worst, r.FalseRefusals, r.Messages)
		}
	}
}
