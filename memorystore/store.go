package memorystore

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algorithm"
	"github.com/floodgate/floodgate/internal/algset"
)

// Store is an in-memory floodgate.Store. Create it with New; it is safe for
// concurrent use.
type Store struct {
	shards    []shard
	shift     uint8 // a key's shard is its hash's top bits: hash >> shift
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
	idents    sync.Map // ident → *ident (see Store.ident)
}

// shard holds a share of the keys. Its lock serialises changes to its
// table (new keys, removals, growth) and guards slots; deciding for a key
// it holds needs only the key's entry lock (see table).
type shard struct {
	mu    sync.Mutex
	tab   atomic.Pointer[table] // nil until the first key
	n     int                   // entries in tab
	slots map[slotKey]int64     // in-flight counts, made on first use
	_     [32]byte              // keep shards on separate cache lines
}

// node is one policy's state for one key: the first is part of the key's
// entry, further ones form a list after it.
type node struct {
	exp   int64  // µs; after it the state equals the zero state
	id    *ident // whose state this is
	state algorithm.State
	log   *algorithm.Log // sliding window log only
	next  *node
}

// ident is a state's identity: its policy's name and algorithm, as in the
// Redis store's key names, so one name under two algorithms keeps two
// states. Nodes point to one interned copy (Store.ident): a pointer where
// a name and an algorithm would take 24 bytes of every key.
type ident struct {
	name string
	alg  floodgate.Algorithm
}

// is reports whether id is p's identity.
func (id *ident) is(p *floodgate.Policy) bool { return id.name == p.Name && id.alg == p.Algorithm }

// Option configures a Store.
type Option func(*config) error

type config struct {
	maxKeys int
	shards  int
	sweep   time.Duration
	now     func() time.Time
}

// maxShards bounds WithShards: each shard is a lock and a map, so more
// than this only costs memory.
const maxShards = 1 << 16

// WithMaxKeys bounds the number of keys held (default 1,048,576; at least
// 1). A new key beyond it evicts one (see Evictions). A new key whose shard
// holds no key has nothing to evict, so the bound can be passed by at most
// the number of shards: by default max(1, MaxKeys/64) or fewer (1.6 %).
func WithMaxKeys(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("memorystore: max keys must be at least 1, got %d", n)
		}
		c.maxKeys = n
		return nil
	}
}

// WithShards sets the number of shards, from 1 to 65,536, rounded up to a
// power of two (default: MaxKeys/64 rounded down to a power of two, from 1
// to 256).
func WithShards(n int) Option {
	return func(c *config) error {
		if n < 1 || n > maxShards {
			return fmt.Errorf("memorystore: shards must be from 1 to %d, got %d", maxShards, n)
		}
		c.shards = n
		return nil
	}
}

// WithSweepInterval sets how often expired keys are swept (default 30 s;
// 0 or less disables the sweeper: expired keys are then treated as new
// when they return, and dropped only by eviction or Sweep).
func WithSweepInterval(d time.Duration) Option {
	return func(c *config) error { c.sweep = d; return nil }
}

// WithClock sets the store's clock (default time.Now); tests inject one for
// exact timing. The store reads it with microsecond resolution.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("memorystore: nil clock")
		}
		c.now = now
		return nil
	}
}

// New returns a Store; call Close to stop its sweeper. Options apply in
// order, a later one of a kind replacing an earlier one, and do not depend
// on each other's order.
//
// Errors: floodgate.ErrInvalidOption (wrapped) for a nil option or an
// option out of range; an error naming the algorithm for one of
// floodgate.Algorithms() that the store does not decide (a build that
// added an algorithm and missed this store).
func New(opts ...Option) (*Store, error) {
	if err := checkAlgorithms(floodgate.Algorithms()); err != nil {
		return nil, err
	}
	c := config{maxKeys: 1 << 20, sweep: 30 * time.Second}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: memorystore: nil option", floodgate.ErrInvalidOption)
		}
		if err := o(&c); err != nil {
			return nil, fmt.Errorf("%w: %w", floodgate.ErrInvalidOption, err)
		}
	}
	if c.shards == 0 { // the largest power of two within both bounds
		c.shards = 1 << (bits.Len(uint(min(256, max(1, c.maxKeys/64)))) - 1)
	}
	n := 1
	for n < c.shards {
		n <<= 1
	}
	s := &Store{
		shards:  make([]shard, n),
		shift:   uint8(64 - bits.TrailingZeros(uint(n))),
		seed:    maphash.MakeSeed(),
		maxKeys: int64(c.maxKeys),
		now:     c.now,
		base:    time.Now(),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	s.baseMicro = s.base.UnixMicro()
	if c.sweep > 0 {
		go s.sweeper(c.sweep)
	} else {
		close(s.done)
	}
	return s, nil
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

// shard returns key's shard and hash. The shard takes the hash's top bits
// and the shard's table its bottom bits, so the two choices are independent.
func (s *Store) shard(key string) (*shard, uint64) {
	h := maphash.String(s.seed, key)
	return &s.shards[h>>s.shift], h
}

// Take implements floodgate.Store. It returns ErrInvalidCost or
// ErrCostExceedsQuota for a cost that can never pass, ErrInvalidPolicy for
// a policy of an algorithm it does not decide, and ctx's error if ctx
// is already done; otherwise it cannot fail. It does not allocate for a key
// it already holds, except to grow a sliding window log.
func (s *Store) Take(ctx context.Context, key string, cost floodgate.Cost, policies []floodgate.Policy, results []floodgate.Result) error {
	if cost.Requests < 0 || cost.ContentBytes < 0 {
		return floodgate.CheckCost(cost, policies)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	sh, hash := s.shard(key)
	e, _ := sh.tab.Load().find(hash, key)
	// The clock is read after find: its counter read is fenced (the vDSO
	// keeps later loads from starting before it), so read first it held
	// back the lookup's cache misses, which are here already under way.
	now := s.nowMicro()
	if e == nil {
		return s.takeLocked(sh, hash, key, now, cost, policies, results)
	}
	e.mu.Lock()
	if e.dead { // removed since find: look again under the shard's lock
		e.mu.Unlock()
		return s.takeLocked(sh, hash, key, now, cost, policies, results)
	}
	// Deferred, so that a panic (an unvalidated policy dividing by zero,
	// recovered by net/http) cannot leave the key locked for good.
	defer e.mu.Unlock()
	head := &e.first
	if len(policies) != 1 || head.next != nil || head.log != nil || !head.id.is(&policies[0]) || cost.Kind != floodgate.Admit {
		_, err := s.take(head, false, now, cost, policies, results)
		return err
	}
	// The common case, one policy on a key already held: decide and write
	// in place, with nothing else on the way.
	p := &policies[0]
	c := cost.Of(p.Unit)
	if c > p.Capacity() {
		return floodgate.CheckCost(cost, policies)
	}
	if head.exp <= now {
		head.state = algorithm.State{} // what an expired state equals
	}
	var r algorithm.Result
	decide(&head.state, p, now, c, &r)
	if r.Allowed && c > 0 {
		head.exp = r.Expires
	}
	if c == 0 && !cost.IsPeek() {
		r.Allowed, r.RetryAfter = true, 0 // charged nothing: it cannot deny (see Store.Take)
	}
	setResult(&results[0], r)
	return nil
}

// takeLocked is Take under the shard's lock: for a key that is new, or
// that Take missed while the table changed.
func (s *Store) takeLocked(sh *shard, hash uint64, key string, now int64, cost floodgate.Cost, policies []floodgate.Policy, results []floodgate.Result) error {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := sh.tab.Load()
	if e, _ := t.find(hash, key); e != nil {
		// Live, for removals need sh.mu; Take missed it while t changed.
		e.mu.Lock()
		defer e.mu.Unlock()
		_, err := s.take(&e.first, false, now, cost, policies, results)
		return err
	}
	var fresh node
	if charged, err := s.take(&fresh, true, now, cost, policies, results); err != nil || !charged {
		return err // nothing to remember: denied, a peek, or an error
	}
	// The bound is global, so unevenly filled shards waste nothing; the
	// victim comes from this shard, whose lock is held. An empty shard
	// cannot give one, so the bound may be passed by at most the number of
	// shards.
	if s.keys.Load() >= s.maxKeys && sh.n > 0 {
		s.evict(sh, t, now)
	}
	if (sh.n+1)*4 > t.size()*3 { // keep the load at most 3/4
		t = t.rehash(max(minSlots, 2*t.size()))
		sh.tab.Store(t)
	}
	t.place(newEntry(hash, key, fresh))
	sh.n++
	s.keys.Add(1)
	return nil
}

// take decides cost for policies on a key's list of states, head, and if
// every policy admits it, charges it, reporting whether it did (Take has a
// shortcut for one policy). unused says that head holds no state yet, for
// a new key. It refuses a policy of an algorithm the store does not
// decide; Take's shortcut needs no such check, as it runs only for a
// policy whose algorithm a state node already holds, written here.
func (s *Store) take(head *node, unused bool, now int64, cost floodgate.Cost, policies []floodgate.Policy, results []floodgate.Result) (charged bool, err error) {
	if err := decides.Refuse("memorystore", policies); err != nil {
		return false, err
	}
	if err := floodgate.CheckCost(cost, policies); err != nil {
		return false, err
	}
	if cost.Kind != floodgate.Admit {
		return s.settle(head, unused, now, cost, policies, results), nil
	}
	var buf [4]pending
	pend := buf[:0]
	if len(policies) > len(buf) {
		pend = make([]pending, 0, len(policies))
	}
	pend, allowed := decideAll(head, unused, now, cost, policies, results, pend)
	if !allowed {
		// All or nothing: the policies that would admit report their
		// standing without this request's cost.
		for i := range results {
			if results[i].Allowed {
				results[i].Remaining += cost.Of(policies[i].Unit)
			}
		}
		return false, nil
	}
	if cost.IsPeek() {
		return false, nil
	}
	return s.commit(head, unused, now, cost, policies, pend), nil
}

// decideAll decides every policy on its state, writing results and the
// states each would leave into pend, and reports whether all admit.
func decideAll(head *node, unused bool, now int64, cost floodgate.Cost, policies []floodgate.Policy, results []floodgate.Result, pend []pending) ([]pending, bool) {
	peek := cost.IsPeek()
	allowed := true
	for i := range policies {
		p := &policies[i]
		c := cost.Of(p.Unit)
		var n *node
		if !unused {
			n = find(head, p)
		}
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
			r = log.Take(now, params(p, now), c)
		} else {
			if n != nil && n.exp > now {
				st = n.state
			}
			decide(&st, p, now, c, &r)
		}
		if c == 0 && !peek {
			// Charged nothing, it reports its standing and takes no
			// part in the decision.
			r.Allowed, r.RetryAfter = true, 0
		}
		allowed = allowed && r.Allowed
		pend = append(pend, pending{state: st, exp: r.Expires})
		setResult(&results[i], r)
	}
	return pend, allowed
}

// commit writes the states pend holds for the policies charged, and
// reports whether it wrote any: a request that charged only units these
// policies do not count (a GET against a content-bytes policy) leaves a
// new key with no state to keep. A policy without a state gets one: head
// itself while it is unused, else a node after it.
func (s *Store) commit(head *node, unused bool, now int64, cost floodgate.Cost, policies []floodgate.Policy, pend []pending) bool {
	wrote := false
	for i := range policies {
		p := &policies[i]
		c := cost.Of(p.Unit)
		if c == 0 {
			continue
		}
		wrote = true
		n := s.node(head, &unused, p)
		n.exp = pend[i].exp
		if p.Algorithm == floodgate.SlidingWindowLog {
			if n.log == nil {
				n.log = new(algorithm.Log)
			}
			n.log.Add(now, params(p, now), c)
			continue
		}
		n.state = pend[i].state
	}
	return wrote
}

// node returns p's state node in the list at head, adding one if there is
// none: head itself while it is unused (which it then no longer is), else
// a node after it.
func (s *Store) node(head *node, unused *bool, p *floodgate.Policy) *node {
	var n *node
	if !*unused {
		n = find(head, p)
	}
	switch {
	case n != nil:
	case *unused:
		n, *unused = head, false
		n.id = s.ident(p)
	default:
		n = &node{id: s.ident(p), next: head.next}
		head.next = n
	}
	return n
}

// settle applies a Post or a Refund to every policy it charges, then
// reports each policy's standing after it, Allowed; it reports whether it
// wrote a state (a refund never adds one).
func (s *Store) settle(head *node, unused bool, now int64, cost floodgate.Cost, policies []floodgate.Policy, results []floodgate.Result) bool {
	wrote := false
	at := cost.At.UnixMicro()
	for i := range policies {
		p := &policies[i]
		c := cost.Of(p.Unit)
		if c == 0 || cost.Kind == floodgate.Refund && (unused || find(head, p) == nil) {
			continue
		}
		n := s.node(head, &unused, p)
		if n.exp <= now { // what an expired state equals
			n.state = algorithm.State{}
			if n.log != nil {
				*n.log = algorithm.Log{}
			}
		}
		if cost.Kind == floodgate.Refund {
			refund(n, p, at, c)
			continue
		}
		wrote = true
		post(n, p, now, c)
		n.exp = max(n.exp, now+1) // alive for the peek below, which gives the real expiry
	}
	var buf [4]pending
	pend, _ := decideAll(head, unused, now, floodgate.Cost{}, policies, results, buf[:0])
	for i := range results {
		results[i].Allowed, results[i].RetryAfter = true, 0
		if c := cost.Of(policies[i].Unit); c > 0 && cost.Kind == floodgate.Post {
			find(head, &policies[i]).exp = pend[i].exp
		}
	}
	return wrote
}

// post charges n's state c at now whatever the quota.
func post(n *node, p *floodgate.Policy, now, c int64) {
	if p.Algorithm != floodgate.SlidingWindowLog {
		settlers[p.Algorithm].post(&n.state, now, params(p, now), c)
		return
	}
	if n.log == nil {
		n.log = new(algorithm.Log)
	}
	n.log.Post(now, params(p, now), c)
}

// refund gives c admitted at time at back to n's state.
func refund(n *node, p *floodgate.Policy, at, c int64) {
	if p.Algorithm != floodgate.SlidingWindowLog {
		settlers[p.Algorithm].refund(&n.state, at, params(p, at), c)
	} else if n.log != nil {
		n.log.Refund(at, c)
	}
}

// settlers[a] posts and refunds the State of algorithm a, for the
// algorithms decide runs; settle is off the hot path, so a table serves.
var settlers = [...]struct {
	post, refund func(s *algorithm.State, t int64, p algorithm.Params, c int64)
}{
	floodgate.FixedWindow:          {algorithm.PostFixedWindow, algorithm.RefundFixedWindow},
	floodgate.SlidingWindowCounter: {algorithm.PostSlidingWindowCounter, algorithm.RefundSlidingWindowCounter},
	floodgate.TokenBucket: {algorithm.PostTokenBucket, func(s *algorithm.State, _ int64, p algorithm.Params, c int64) {
		algorithm.RefundTokenBucket(s, p, c)
	}},
	floodgate.GCRA: {algorithm.PostGCRA, func(s *algorithm.State, _ int64, p algorithm.Params, c int64) {
		algorithm.RefundGCRA(s, p, c)
	}},
	floodgate.AnchoredWindow: {algorithm.PostAnchoredWindow, algorithm.RefundAnchoredWindow},
}

// decide runs p's algorithm on *st, writing r, and updates *st if it
// admits the cost. Its switch is the one list of the algorithms that keep
// an algorithm.State (decided is read off it); Take refuses any other, so
// the default cannot be reached from Take. An algorithm added here needs
// its entry in settlers too. The calls are static: through
// a table of functions, r would escape and cost an allocation per call.
func decide(st *algorithm.State, p *floodgate.Policy, now, cost int64, r *algorithm.Result) {
	switch p.Algorithm {
	case floodgate.FixedWindow:
		algorithm.FixedWindow(st, now, params(p, now), cost, r)
	case floodgate.SlidingWindowCounter:
		algorithm.SlidingWindowCounter(st, now, params(p, now), cost, r)
	case floodgate.TokenBucket:
		algorithm.TokenBucket(st, now, params(p, now), cost, r)
	case floodgate.GCRA:
		algorithm.GCRA(st, now, params(p, now), cost, r)
	case floodgate.AnchoredWindow:
		algorithm.AnchoredWindow(st, now, params(p, now), cost, r)
	default:
		panic("memorystore: no decision for algorithm " + p.Algorithm.String())
	}
}

// decided[a] reports whether the store decides a: the sliding window log
// (its entries are kept apart, in node.log), or an algorithm that decide
// runs, found once by running it on each value, and settlers holds.
var decided = func() (d [256]bool) {
	for a := range d {
		d[a] = floodgate.Algorithm(a) == floodgate.SlidingWindowLog || decideRuns(floodgate.Algorithm(a)) && settles(floodgate.Algorithm(a))
	}
	return d
}()

func decideRuns(a floodgate.Algorithm) (ok bool) {
	defer func() { ok = recover() == nil }()
	var st algorithm.State
	var r algorithm.Result
	decide(&st, &floodgate.Policy{Algorithm: a, Quota: 1, Window: time.Second}, 0, 0, &r)
	return true
}

// settles reports whether settlers has a's entry.
func settles(a floodgate.Algorithm) bool { return int(a) < len(settlers) && settlers[a].post != nil }

// decides is the set of algorithms the store decides.
var decides = algset.Set(func(a floodgate.Algorithm) bool { return decided[a] })

// checkAlgorithms names the first of all the store does not decide.
func checkAlgorithms(all []floodgate.Algorithm) error {
	return decides.Missing(all, "memorystore", "decide's switch (memorystore/store.go)")
}

// params returns p's numbers for the algorithms; for a calendar policy,
// with the window (start and length) that holds now.
func params(p *floodgate.Policy, now int64) algorithm.Params {
	ap := algorithm.Params{Quota: p.Quota, Capacity: p.Capacity(), Window: p.Window.Microseconds()}
	if p.Calendar != nil {
		ap.Start, ap.Window = p.Span(now)
	}
	return ap
}

// setResult writes r's numbers into res, leaving res.Policy to the caller.
func setResult(res *floodgate.Result, r algorithm.Result) {
	res.Allowed = r.Allowed
	res.Remaining = r.Remaining
	res.ResetAfter = time.Duration(r.ResetAfter) * time.Microsecond
	res.RetryAfter = time.Duration(r.RetryAfter) * time.Microsecond
	res.FullAfter = time.Duration(r.Full) * time.Microsecond
}

type pending struct {
	state algorithm.State
	exp   int64
}

// ident returns the interned identity of p's state. Interning runs only
// when a state is first stored; the table holds one entry per policy name
// and algorithm ever used, which the configuration bounds.
func (s *Store) ident(p *floodgate.Policy) *ident {
	k := ident{p.Name, p.Algorithm}
	if v, ok := s.idents.Load(k); ok {
		return v.(*ident)
	}
	v, _ := s.idents.LoadOrStore(k, &k)
	return v.(*ident)
}

// find returns p's state node in the list at n: the one of p's name and
// algorithm, nil if none.
func find(n *node, p *floodgate.Policy) *node {
	for ; n != nil; n = n.next {
		if n.id.is(p) {
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

// evict removes one key from sh (whose lock is held, and whose table is
// t): an expired one if the sample holds one, else the sampled key that
// expires first. The sample is the keys that follow a random slot.
func (s *Store) evict(sh *shard, t *table, now int64) {
	const samples = 8
	mask := len(t.slots) - 1
	var victim *entry
	at, best, seen := -1, int64(0), 0
	for i := rand.IntN(len(t.slots)); seen < min(samples, sh.n); i = (i + 1) & mask {
		e := t.slots[i].Load()
		if e == nil {
			continue
		}
		e.mu.Lock()
		exp := expiry(&e.first)
		e.mu.Unlock()
		if seen == 0 || exp < best {
			victim, at, best = e, i, exp
		}
		if seen++; exp <= now {
			break
		}
	}
	victim.mu.Lock()
	best = expiry(&victim.first) // a Take may have charged it since it was sampled
	victim.dead = true
	victim.mu.Unlock()
	s.drop(sh, t, at)
	if best > now {
		s.evictions.Add(1)
	}
}

// drop removes the (dead) entry in slot i of sh's table t.
func (s *Store) drop(sh *shard, t *table, i int) {
	t.remove(i)
	sh.n--
	s.keys.Add(-1)
}

// Reset implements floodgate.Store: it forgets key's state under policies.
func (s *Store) Reset(ctx context.Context, key string, policies []floodgate.Policy) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	sh, hash := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := sh.tab.Load()
	e, i := t.find(hash, key)
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range policies {
		var prev *node
		for n := &e.first; n != nil; prev, n = n, n.next {
			if !n.id.is(&p) {
				continue
			}
			switch {
			case prev != nil:
				prev.next = n.next
			case n.next != nil:
				e.first = *n.next
			default: // the key's last state
				e.dead = true
				s.drop(sh, t, i)
				return nil
			}
			break
		}
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

// expire marks e dead if all its states have expired, and reports whether
// it did.
func (e *entry) expire(now int64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if expiry(&e.first) <= now {
		e.dead = true
	}
	return e.dead
}

// Sweep drops every expired key now; the sweeper calls it periodically.
// It holds one shard's lock at a time.
func (s *Store) Sweep() {
	for k := range s.shards {
		sh := &s.shards[k]
		sh.mu.Lock()
		now := s.nowMicro() // the clock expiries were set with
		t := sh.tab.Load()
		// A removal at i refills slot i from later in its probe run, so
		// slot i is looked at again. Near the table's end that run may
		// wrap, bringing an entry already looked at from the start: it is
		// looked at twice, which is harmless, and none is skipped.
		for i := 0; t != nil && i < len(t.slots); {
			if e := t.slots[i].Load(); e != nil && e.expire(now) {
				s.drop(sh, t, i)
				continue
			}
			i++
		}
		// Shrink a table left at most 1/8 full, so that a burst of keys
		// that has since expired does not keep its slots.
		if t != nil && len(t.slots) > minSlots && sh.n*8 <= len(t.slots) {
			size := len(t.slots)
			for size > minSlots && sh.n*8 <= size {
				size /= 2
			}
			sh.tab.Store(t.rehash(size))
		}
		sh.mu.Unlock()
	}
}
