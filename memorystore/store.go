package memorystore

import (
	"context"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algorithm"
)

// Store is an in-memory floodgate.Store. Create it with New; it is safe for
// concurrent use.
type Store struct {
	shards    []shard
	mask      uint64
	seed      maphash.Seed
	maxKeys   int64
	keys      atomic.Int64     // keys held across all shards
	now       func() time.Time // WithClock's; nil: the monotonic clock from base
	base      time.Time        // a time.Now reading with its monotonic part
	baseMicro int64            // base.UnixMicro()
	evictions atomic.Uint64
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

type shard struct {
	mu    sync.Mutex
	m     map[string]*node
	slots map[slotKey]int64 // in-flight counts, made on first use
	_     [40]byte          // keep shards on separate cache lines
}

// node is one policy's state for one key; a key's nodes form a list. Its
// size (64 bytes) sets most of the memory cost of a key.
type node struct {
	exp   int64 // µs; after it the state equals the zero state
	name  string
	state algorithm.State
	log   *algorithm.Log // sliding window log only
	next  *node
}

// Option configures a Store.
type Option func(*config)

type config struct {
	maxKeys int
	shards  int
	sweep   time.Duration
	now     func() time.Time
}

// WithMaxKeys bounds the number of keys held (default 1,048,576). A new key
// beyond it evicts one (see Evictions).
func WithMaxKeys(n int) Option { return func(c *config) { c.maxKeys = n } }

// WithShards sets the number of shards, rounded up to a power of two
// (default 256).
func WithShards(n int) Option { return func(c *config) { c.shards = n } }

// WithSweepInterval sets how often expired keys are swept (default 30 s;
// 0 or less disables the sweeper, leaving lazy expiry and eviction).
func WithSweepInterval(d time.Duration) Option { return func(c *config) { c.sweep = d } }

// WithClock sets the store's clock (default time.Now); tests inject one for
// exact timing. The store reads it with microsecond resolution.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// New returns a Store. Call Close to stop its sweeper.
func New(opts ...Option) *Store {
	c := config{maxKeys: 1 << 20, shards: 256, sweep: 30 * time.Second}
	for _, o := range opts {
		o(&c)
	}
	n := 1
	for n < c.shards {
		n <<= 1
	}
	s := &Store{
		shards:  make([]shard, n),
		mask:    uint64(n - 1),
		seed:    maphash.MakeSeed(),
		maxKeys: int64(max(1, c.maxKeys)),
		now:     c.now,
		base:    time.Now(),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	s.baseMicro = s.base.UnixMicro()
	for i := range s.shards {
		s.shards[i].m = make(map[string]*node)
	}
	if c.sweep > 0 {
		go s.sweeper(c.sweep)
	} else {
		close(s.done)
	}
	return s
}

// Close stops the sweeper. The store still answers afterwards.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.stop) })
	<-s.done
	return nil
}

// Evictions returns how many live keys were evicted to respect MaxKeys.
func (s *Store) Evictions() uint64 { return s.evictions.Load() }

// Len returns the number of keys held, expired ones not yet swept included.
func (s *Store) Len() int { return int(s.keys.Load()) }

// nowMicro is the store's clock in µs since the epoch. With the default
// clock it reads only the monotonic clock (one vDSO call instead of two).
func (s *Store) nowMicro() int64 {
	if s.now == nil {
		return s.baseMicro + int64(time.Since(s.base)/time.Microsecond)
	}
	return s.now().UnixMicro()
}

func (s *Store) shard(key string) *shard {
	return &s.shards[maphash.String(s.seed, key)&s.mask]
}

// Take implements floodgate.Store. It returns ErrInvalidCost or
// ErrCostExceedsQuota for a cost that can never pass, and ctx's error if ctx
// is already done; otherwise it cannot fail. It does not allocate for a key
// it already holds, except to grow a sliding window log.
func (s *Store) Take(ctx context.Context, key string, cost int64, policies []floodgate.Policy, results []floodgate.Result) error {
	if cost < 0 {
		return floodgate.CheckCost(cost, policies)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	now := s.nowMicro()
	sh := s.shard(key)
	sh.mu.Lock()
	// Deferred, so that a panic (an unvalidated policy dividing by zero,
	// recovered by net/http) cannot leave the shard locked for good.
	defer sh.mu.Unlock()
	head := sh.m[key]
	if len(policies) == 1 && head != nil && head.next == nil && head.log == nil && head.name == policies[0].Name {
		// The common case, one policy on a key already held: decide and
		// write in place, with nothing else on the way.
		p := &policies[0]
		if cost > p.Capacity() {
			return floodgate.CheckCost(cost, policies)
		}
		if head.exp <= now {
			head.state = algorithm.State{} // what an expired state equals
		}
		var r algorithm.Result
		decide(&head.state, p, now, cost, &r)
		if r.Allowed && cost > 0 {
			head.exp = r.Expires
		}
		setResult(&results[0], r)
		return nil
	}
	return s.take(sh, head, key, now, cost, policies, results)
}

// take is Take for several policies, a new key or a sliding window log,
// with sh's lock held.
func (s *Store) take(sh *shard, head *node, key string, now, cost int64, policies []floodgate.Policy, results []floodgate.Result) error {
	var buf [4]pending
	pend := buf[:0]
	if len(policies) > len(buf) {
		pend = make([]pending, 0, len(policies))
	}
	allowed := true
	for i := range policies {
		p := &policies[i]
		if cost > p.Capacity() {
			return floodgate.CheckCost(cost, policies)
		}
		n := find(head, p.Name)
		var st algorithm.State
		var r algorithm.Result
		if p.Algorithm == floodgate.SlidingWindowLog {
			log := &algorithm.Log{}
			if n != nil && n.log != nil {
				if n.exp <= now {
					*n.log = algorithm.Log{}
				}
				log = n.log
			}
			r = log.Take(now, params(p), cost)
		} else {
			if n != nil && n.exp > now {
				st = n.state
			}
			decide(&st, p, now, cost, &r)
		}
		allowed = allowed && r.Allowed
		pend = append(pend, pending{state: st, exp: r.Expires})
		setResult(&results[i], r)
	}
	if !allowed {
		// All or nothing: the policies that would admit report their
		// standing without this request's cost.
		for i := range results {
			if results[i].Allowed {
				results[i].Remaining += cost
			}
		}
		return nil
	}
	if cost == 0 {
		return nil
	}
	isNew, grown := head == nil, false
	for i := range policies {
		p := &policies[i]
		n := find(head, p.Name)
		if n == nil {
			n = &node{name: p.Name, next: head}
			head, grown = n, true
		}
		n.exp = pend[i].exp
		if p.Algorithm == floodgate.SlidingWindowLog {
			if n.log == nil {
				n.log = new(algorithm.Log)
			}
			n.log.Add(now, cost)
			continue
		}
		n.state = pend[i].state
	}
	if isNew {
		// The bound is global, so unevenly filled shards waste nothing;
		// the victim comes from this shard, whose lock is held. An empty
		// shard cannot give one, so the bound may be passed by at most
		// the number of shards.
		if s.keys.Load() >= s.maxKeys && len(sh.m) > 0 {
			s.evict(sh, now)
		}
		s.keys.Add(1)
		// A copy, so the map never pins a caller's larger buffer.
		sh.m[strings.Clone(key)] = head
	} else if grown {
		sh.m[key] = head
	}
	return nil
}

// decide runs p's algorithm on *st, writing r, and updates *st if it
// admits the cost.
func decide(st *algorithm.State, p *floodgate.Policy, now, cost int64, r *algorithm.Result) {
	switch p.Algorithm {
	case floodgate.FixedWindow:
		algorithm.FixedWindow(st, now, params(p), cost, r)
	case floodgate.SlidingWindowCounter:
		algorithm.SlidingWindowCounter(st, now, params(p), cost, r)
	case floodgate.TokenBucket:
		algorithm.TokenBucket(st, now, params(p), cost, r)
	default:
		algorithm.GCRA(st, now, params(p), cost, r)
	}
}

func params(p *floodgate.Policy) algorithm.Params {
	return algorithm.Params{Quota: p.Quota, Capacity: p.Capacity(), Window: p.Window.Microseconds()}
}

// setResult writes r's numbers into res, leaving res.Policy to the caller.
func setResult(res *floodgate.Result, r algorithm.Result) {
	res.Allowed = r.Allowed
	res.Remaining = r.Remaining
	res.ResetAfter = time.Duration(r.ResetAfter) * time.Microsecond
	res.RetryAfter = time.Duration(r.RetryAfter) * time.Microsecond
}

type pending struct {
	state algorithm.State
	exp   int64
}

func find(n *node, name string) *node {
	for ; n != nil; n = n.next {
		if n.name == name {
			return n
		}
	}
	return nil
}

// expiry is the latest expiry over a key's nodes.
func expiry(n *node) int64 {
	var exp int64
	for ; n != nil; n = n.next {
		exp = max(exp, n.exp)
	}
	return exp
}

// evict removes one key from a full shard: an expired one if the sample
// holds one, else the sampled key that expires first. Map iteration starts
// at a random place, which makes the sample random.
func (s *Store) evict(sh *shard, now int64) {
	const samples = 8
	var victim string
	best, seen := int64(0), 0
	for k, n := range sh.m {
		exp := expiry(n)
		if seen == 0 || exp < best {
			victim, best = k, exp
		}
		if seen++; seen == samples || exp <= now {
			break
		}
	}
	delete(sh.m, victim)
	s.keys.Add(-1)
	if best > now {
		s.evictions.Add(1)
	}
}

// Reset implements floodgate.Store: it forgets key's state under policies.
func (s *Store) Reset(ctx context.Context, key string, policies []floodgate.Policy) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	head := sh.m[key]
	for _, p := range policies {
		var prev *node
		for n := head; n != nil; prev, n = n, n.next {
			if n.name == p.Name {
				if prev == nil {
					head = n.next
				} else {
					prev.next = n.next
				}
				break
			}
		}
	}
	if head == nil {
		if _, held := sh.m[key]; held {
			delete(sh.m, key)
			s.keys.Add(-1)
		}
	} else {
		sh.m[key] = head
	}
	return nil
}

func (s *Store) sweeper(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Sweep()
		}
	}
}

// Sweep drops every expired key now; the sweeper calls it periodically.
// It holds one shard's lock at a time.
func (s *Store) Sweep() {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		now := s.nowMicro() // the clock expiries were set with
		for k, n := range sh.m {
			if expiry(n) <= now {
				delete(sh.m, k)
				s.keys.Add(-1)
			}
		}
		sh.mu.Unlock()
	}
}
