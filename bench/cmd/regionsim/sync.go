package main

import "math"

// syncs lets every region that is up and whose turn it is (region i syncs
// at ticks ≡ i·Δ/R mod Δ, so they do not all sync at once) update its own
// demand, tell every other region its count and demand, and re-derive its
// share or budget.
func (s *sim) syncs(t int) {
	d := s.cfg.Delta
	for i := range s.regions {
		if s.cfg.Scenario.Down(i, t) || (t+i*d/s.cfg.Regions)%d != 0 {
			continue
		}
		r := &s.regions[i]
		rate := float64(r.arrivals) * 1000 / float64(d)
		r.demand[i] += (1 - math.Exp(-float64(d)/demandTau)) * (rate - r.demand[i])
		r.arrivals = 0
		for j := range s.regions {
			if j == i {
				continue
			}
			at := t + max(tickMs, s.cfg.latency(i, j))
			s.inbox[at%len(s.inbox)] = append(s.inbox[at%len(s.inbox)], msg{from: i, to: j, win: t / windowMs, count: r.count, demand: r.demand[i], budget: r.budget})
			s.res.Messages++
		}
		alive := s.alive(i, t)
		switch s.cfg.Design {
		case Split:
			r.share = float64(s.cfg.Quota) * r.weight(i, alive)
		case Bounded:
			r.budget = r.lease(i, s.cfg.Quota, alive)
		}
	}
}

// deliver hands out the messages due at t; a region that is down loses
// them.
func (s *sim) deliver(t int) {
	box := &s.inbox[t%len(s.inbox)]
	for _, m := range *box {
		if s.cfg.Scenario.Down(m.to, t) {
			continue
		}
		r := &s.regions[m.to]
		r.heard[m.from], r.demand[m.from] = t, m.demand
		if m.win == t/windowMs {
			r.known[m.from], r.held[m.from] = m.count, m.budget
		}
	}
	*box = (*box)[:0]
}

// lease is Bounded's budget for region i until its next sync: its weight
// of what it believes nobody has spent or holds — the quota less its own
// count and every other region's last count and unspent budget. Regions
// that seem down hold nothing.
func (r *region) lease(i, quota int, alive []bool) float64 {
	left := float64(quota - r.count)
	for j := range r.known {
		if j != i {
			left -= float64(r.known[j])
			if alive[j] {
				left -= r.held[j]
			}
		}
	}
	return math.Max(0, left) * r.weight(i, alive)
}

// alive reports, as region i sees it at t, which regions are up: those
// heard from within three sync intervals and the longest latency (all of
// them at the start).
func (s *sim) alive(i, t int) []bool {
	a := make([]bool, s.cfg.Regions)
	timeout := 3*s.cfg.Delta + s.cfg.latency(0, s.cfg.Regions-1) + windowMs/10
	for j := range a {
		a[j] = j == i || t < timeout || t-s.regions[i].heard[j] <= timeout
	}
	return a
}

// weight is region i's part of the quota as it sees it: its demand over the
// demand of the regions it believes up, each demand at least 5 % of an
// even split of their total, so that an idle region can still admit its
// first requests.
func (r *region) weight(i int, alive []bool) float64 {
	floor := 0.05 * r.demandSum(alive) / float64(len(alive))
	own, sum := math.Max(r.demand[i], floor), 0.0
	for j, up := range alive {
		if up {
			sum += math.Max(r.demand[j], floor)
		}
	}
	if sum == 0 {
		return 1 / float64(len(alive))
	}
	return own / sum
}

func (r *region) demandSum(alive []bool) float64 {
	sum := 0.0
	for j, up := range alive {
		if up {
			sum += r.demand[j]
		}
	}
	return math.Max(sum, 1)
}
