package redisstore

import (
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"github.com/floodgate/floodgate"
)

// nearCache remembers recent denials so that a flood from one client is
// answered in-process (see WithNearCache).
//
// Why a denial can be repeated safely: each algorithm's RetryAfter is the
// earliest time the same cost could fit if nothing else were spent, and
// spending only ever pushes it later; a larger cost fits no sooner. So until
// the shortest RetryAfter among the denying policies has passed, every
// denying policy still denies, and so does the request.
type nearCache struct {
	min      time.Duration
	perShard int
	seed     maphash.Seed
	shards   [16]nearShard
}

type nearShard struct {
	mu sync.Mutex
	m  map[string]*denial
}

type denial struct {
	policies []floodgate.Policy
	cost     floodgate.Cost // the denied cost
	at       time.Time      // when the denied call was sent
	until    time.Time      // at + the shortest RetryAfter of the denying policies
	results  []floodgate.Result
}

func newNearCache(size int, min time.Duration) *nearCache {
	c := &nearCache{min: min, perShard: max(1, (size+15)/16), seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[string]*denial)
	}
	return c
}

func (c *nearCache) shard(tag string) *nearShard {
	return &c.shards[maphash.String(c.seed, tag)%uint64(len(c.shards))]
}

// charged is what policy p decides on for cost: its part of it, or 1 for
// a peek (whose Allowed says whether 1 would pass).
func charged(cost floodgate.Cost, p *floodgate.Policy) int64 {
	if cost.IsPeek() {
		return 1
	}
	return cost.Of(p.Unit)
}

// answer fills results and returns true when a remembered denial covers
// this request: same policies, for every denying policy a charge of at
// least 1 and at least the denied one, and for every policy that admitted
// the denied request a charge it would still admit by its reported
// Remaining (otherwise that policy's answer would change).
func (c *nearCache) answer(tag string, policies []floodgate.Policy, cost floodgate.Cost, now time.Time, results []floodgate.Result) bool {
	sh := c.shard(tag)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	d := sh.m[tag]
	if d == nil {
		return false
	}
	if !now.Before(d.until) {
		delete(sh.m, tag)
		return false
	}
	if !slices.Equal(d.policies, policies) {
		return false
	}
	for i, r := range d.results {
		p := &policies[i]
		c := charged(cost, p)
		if r.Allowed && c > r.Remaining || !r.Allowed && (c < 1 || c < charged(d.cost, p)) {
			return false
		}
	}
	elapsed := max(now.Sub(d.at), 0)
	for i, r := range d.results {
		r.ResetAfter = max(r.ResetAfter-elapsed, 0)
		r.FullAfter = max(r.FullAfter-elapsed, 0)
		if !r.Allowed {
			r.RetryAfter -= elapsed // > 0: now < until ≤ at + RetryAfter
		}
		r.Cached = true
		results[i] = r
	}
	return true
}

// remember keeps a denial whose shortest RetryAfter is long enough.
func (c *nearCache) remember(tag string, policies []floodgate.Policy, cost floodgate.Cost, sent time.Time, results []floodgate.Result) {
	shortest := time.Duration(-1)
	for _, r := range results {
		if !r.Allowed && (shortest < 0 || r.RetryAfter < shortest) {
			shortest = r.RetryAfter
		}
	}
	if shortest < c.min {
		return
	}
	d := &denial{
		policies: slices.Clone(policies),
		cost:     cost,
		at:       sent,
		until:    sent.Add(shortest),
		results:  slices.Clone(results),
	}
	sh := c.shard(tag)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[tag]; !ok && len(sh.m) >= c.perShard {
		sh.evict(sent)
	}
	sh.m[tag] = d
}

// evict removes one entry from a full shard: an expired one if a sample of
// eight holds one, else the sampled entry that expires first. Map iteration
// starts at a random place, which makes the sample random.
func (sh *nearShard) evict(now time.Time) {
	var victim string
	var soonest time.Time
	seen := 0
	for k, d := range sh.m {
		if seen == 0 || d.until.Before(soonest) {
			victim, soonest = k, d.until
		}
		if seen++; seen == 8 || !now.Before(d.until) {
			break
		}
	}
	delete(sh.m, victim)
}

func (c *nearCache) forget(tag string) {
	sh := c.shard(tag)
	sh.mu.Lock()
	delete(sh.m, tag)
	sh.mu.Unlock()
}

// len returns the number of entries held, expired ones included.
func (c *nearCache) len() int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}
