package main

// Scenario is the traffic of a run: each region's offered load and when a
// region is down (its clients gone elsewhere, its store unreachable).
type Scenario struct {
	Name string
	// Rate is region i's offered load in requests/s at t (ms), of regions
	// in all, for a global quota of quota per second.
	Rate func(i, regions, t int, quota float64) float64
	// Down reports whether region i is down at t.
	Down func(i, t int) bool
}

// weight is region i's part of the steady load: regions − i over the sum,
// so region 0 is the busiest (3:2:1 for three regions).
func weight(i, regions int) float64 {
	return float64(regions-i) / float64(regions*(regions+1)/2)
}

func never(int, int) bool { return false }

// scenarios: 60 s each, quota per 1 s window.
var scenarios = []Scenario{
	{"steady-under", func(i, n, t int, q float64) float64 { return 0.8 * q * weight(i, n) }, never},
	{"steady-over", func(i, n, t int, q float64) float64 { return 2 * q * weight(i, n) }, never},
	{"flash", func(i, n, t int, q float64) float64 {
		r := 0.5 * q * weight(i, n)
		if i == n-1 && t >= 20_000 && t < 30_000 { // the quietest region, 10 s
			r += 3 * q
		}
		return r
	}, never},
	{"region-down", func(i, n, t int, q float64) float64 {
		r := 0.8 * q * weight(i, n)
		if regionDown(0, t) && i != 0 { // region 0's clients move, in proportion
			r += 0.8 * q * weight(0, n) * weight(i, n) / (1 - weight(0, n))
		}
		return r
	}, regionDown},
}

// regionDown: region 0 (the busiest, home of Global's cluster) is down
// from 20 s to 40 s.
func regionDown(i, t int) bool { return i == 0 && t >= 20_000 && t < 40_000 }
