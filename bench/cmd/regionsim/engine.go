package main

import (
	"math"
	"math/rand/v2"
)

// msg is one region telling another its count in a window and its demand.
type msg struct {
	from, to, win, count int
	demand               float64 // requests/s
	budget               float64 // Bounded: what the sender may still spend
}

// region is one region's view of the world.
type region struct {
	count    int       // own admissions in the current window
	known    []int     // last count heard from each region, current window
	held     []float64 // Bounded: last unspent budget heard from each region
	demand   []float64 // last demand heard from each region (own: live)
	heard    []int     // tick each region was last heard from
	arrivals int       // since own last sync
	share    float64   // Split: own part of the quota
	budget   float64   // Bounded: own spending left until the next sync
}

// sim is one run in progress.
type sim struct {
	cfg     Config
	regions []region
	inbox   [256][]msg // by delivery tick mod 256
	global  int        // Global: the one counter, current window
	win     struct{ offered, admitted int }
	res     Result
	sat     int // saturated windows
	ideal   int64
	refused int64 // of the ideal
	addedMs int64
}

// Run simulates cfg and reports what happened; the same cfg gives the same
// Result.
func Run(cfg Config) Result {
	s := &sim{cfg: cfg, regions: make([]region, cfg.Regions)}
	s.res.PerRegion = make([][3]int64, cfg.Regions)
	for i := range s.regions {
		r := &s.regions[i]
		r.known, r.heard = make([]int, cfg.Regions), make([]int, cfg.Regions)
		r.held = make([]float64, cfg.Regions)
		r.demand = make([]float64, cfg.Regions)
		for j := range r.demand {
			r.demand[j] = float64(cfg.Quota) / float64(cfg.Regions) // an even split until heard
		}
		r.share, r.budget = float64(cfg.Quota)/float64(cfg.Regions), float64(cfg.Quota)/float64(cfg.Regions)
	}
	traffic := rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15))
	n := make([]int, cfg.Regions)
	for t := 0; t < cfg.Duration; t += tickMs {
		s.deliver(t)
		if t%windowMs == 0 {
			s.newWindow(t)
		}
		if cfg.Design != Global {
			s.syncs(t)
		}
		most := 0
		for i := range n {
			n[i] = 0
			if !cfg.Scenario.Down(i, t) {
				n[i] = poisson(traffic, cfg.Scenario.Rate(i, cfg.Regions, t, float64(cfg.Quota))*tickMs/1000)
			}
			most = max(most, n[i])
		}
		for k := range most { // round robin: no region goes first every tick
			for i := range n {
				if k < n[i] {
					s.arrive(i, t)
				}
			}
		}
	}
	s.newWindow(cfg.Duration)
	return s.result()
}

// arrive decides one request arriving in region i at tick t.
func (s *sim) arrive(i, t int) {
	r := &s.regions[i]
	r.arrivals++
	s.win.offered++
	s.res.PerRegion[i][0]++
	ok := s.admits(i, t)
	if ok {
		r.count++
		s.win.admitted++
		s.res.PerRegion[i][1]++
	} else {
		s.res.PerRegion[i][2]++
	}
}

func (s *sim) admits(i, t int) bool {
	r, q := &s.regions[i], s.cfg.Quota
	switch s.cfg.Design {
	case Global:
		if s.cfg.Scenario.Down(0, t) { // fail to local, 1/R of the quota
			return r.count < q/s.cfg.Regions
		}
		if i != 0 {
			s.res.Messages += 2
			s.addedMs += int64(2 * s.cfg.latency(i, 0))
		}
		if s.global < q {
			s.global++
			return true
		}
		return false
	case Split:
		return float64(r.count) < r.share
	case Async:
		return r.count+r.heardSum(i) < q
	default: // Bounded
		if r.budget < 1 || r.count+r.heardSum(i) >= q {
			return false
		}
		r.budget--
		return true
	}
}

// heardSum is the sum of the other regions' last counts in this window.
func (r *region) heardSum(self int) int {
	sum := 0
	for j, c := range r.known {
		if j != self {
			sum += c
		}
	}
	return sum
}

// newWindow closes the window ending at t and opens the next.
func (s *sim) newWindow(t int) {
	if t > 0 {
		q := s.cfg.Quota
		ratio := float64(s.win.admitted) / float64(q)
		s.res.Worst = math.Max(s.res.Worst, ratio)
		if s.win.offered > q {
			s.sat++
			s.res.MeanSaturated += ratio
		}
		ideal := min(s.win.offered, q)
		s.ideal += int64(ideal)
		s.refused += int64(max(0, ideal-s.win.admitted))
	}
	s.win.offered, s.win.admitted, s.global = 0, 0, 0
	for i := range s.regions {
		r := &s.regions[i]
		r.count = 0
		clear(r.known)
		clear(r.held)
		if s.cfg.Design == Bounded {
			r.budget = float64(s.cfg.Quota) * r.weight(i, s.alive(i, t))
		}
	}
}

func (s *sim) result() Result {
	res := s.res
	for _, p := range res.PerRegion {
		res.Offered, res.Admitted, res.Refused = res.Offered+p[0], res.Admitted+p[1], res.Refused+p[2]
	}
	if s.sat > 0 {
		res.MeanSaturated /= float64(s.sat)
	}
	if s.ideal > 0 {
		res.FalseRefusals = float64(s.refused) / float64(s.ideal)
	}
	res.MessagesPerSec = float64(res.Messages) / (float64(s.cfg.Duration) / 1000)
	if res.Offered > 0 {
		res.AddedMs = float64(s.addedMs) / float64(res.Offered)
	}
	return res
}
