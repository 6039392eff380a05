package main

import (
	"math"
	"math/rand/v2"
)

// Design is how regions share one global quota.
type Design int

const (
	// Global: one Redis Cluster in region 0 decides for every region; exact,
	// but a decision from elsewhere pays a round trip across regions. While
	// region 0 is down, the others fail to local with 1/R of the quota each.
	Global Design = iota
	// Split: each region decides alone against its share of the quota; every
	// Δ the regions exchange their demand and re-split in proportion to it.
	Split
	// Async: each region counts alone and every Δ tells the others its count
	// in the current window; it admits while its own count plus the last
	// counts it heard stay under the quota (Kong's sync_rate, gubernator's
	// GLOBAL behaviour).
	Async
	// Bounded: Async with leases: at each sync a region takes as its budget
	// until the next one its demand-weighted part of the quota nobody has
	// spent or holds as it sees it, and tells the others its unspent
	// budget along with its count.
	Bounded
)

var designNames = [...]string{Global: "global", Split: "split", Async: "async", Bounded: "bounded"}

func (d Design) String() string { return designNames[d] }

const (
	tickMs   = 1    // the simulation's step
	windowMs = 1000 // the quota's fixed window
	// demandTau is the time constant of the demand estimates Split and
	// Bounded exchange, in ms.
	demandTau = 1000.0
)

// Config is one run.
type Config struct {
	Regions  int
	Delta    int // ms between a region's syncs (Global ignores it)
	Design   Design
	Scenario Scenario
	Quota    int // per window, all regions together
	Duration int // ms
	HopMs    int // one-way latency: HopMs·(1 + |i−j|) between regions i ≠ j
	Seed     uint64
}

// Result is what one run did. Windows where the offered load exceeds the
// quota are "saturated".
type Result struct {
	Offered, Admitted, Refused int64
	// PerRegion[i] is region i's offered, admitted and refused requests.
	PerRegion [][3]int64
	// Worst is the largest admitted ÷ quota of any window; MeanSaturated
	// the mean of admitted ÷ quota over saturated windows (0 when none).
	Worst, MeanSaturated float64
	// FalseRefusals is the share of the ideal admissions (per window, the
	// lesser of offered and quota) that were refused.
	FalseRefusals float64
	// Messages is the number of messages between regions; MessagesPerSec
	// the same per second of the run.
	Messages       int64
	MessagesPerSec float64
	// AddedMs is the mean latency a decision pays beyond its own region, ms.
	AddedMs float64
}

// latency is the one-way latency between regions i and j in ms.
func (c *Config) latency(i, j int) int {
	if i == j {
		return 0
	}
	return c.HopMs * (1 + abs(i-j))
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// poisson draws from a Poisson distribution of mean lambda (small, per tick).
func poisson(r *rand.Rand, lambda float64) int {
	l, k, p := math.Exp(-lambda), 0, 1.0
	for {
		p *= r.Float64()
		if p <= l {
			return k
		}
		k++
	}
}
