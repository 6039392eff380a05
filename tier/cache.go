package tier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// CacheOptions configures a Cache. Zero values take the defaults.
type CacheOptions struct {
	// TTL is how long a found key is answered from memory; default 60 s.
	// A revoked key keeps passing until its entry expires.
	TTL time.Duration
	// NegativeTTL is how long an unknown or disabled key is answered from
	// memory; default 5 s. Kept short so that a key added just after a
	// client tried it starts working soon.
	NegativeTTL time.Duration
	// MaxStale is how long past its TTL an entry may still answer while
	// the source fails. 0 means for as long as the entry is kept: a
	// database outage then never locks out a key already seen. Negative
	// disables stale answers.
	MaxStale time.Duration
	// MaxEntries bounds the number of keys kept, found or not; default
	// 100,000. When full, a new key evicts a sampled entry, expired ones
	// first.
	MaxEntries int
	// QueryTimeout bounds one Source.Lookup; default 2 s. The query is
	// shared by every request waiting for the same key, so it is not
	// cancelled when one of them gives up.
	QueryTimeout time.Duration
	// RetryInterval is, while the source fails, the pause between probes:
	// meanwhile lookups that need the source fail at once without a query.
	// Default 1 s.
	RetryInterval time.Duration
	// Logger receives one record when the source starts failing and one
	// when it recovers, never one per request; default slog.Default().
	Logger *slog.Logger
	// Now is the clock; default time.Now. Without it, hits read a clock
	// that a background goroutine advances every 50 ms (clockTick): entries
	// may live up to that much past their TTL, and a hit costs no clock
	// read, which is slow on some virtual machines.
	Now func() time.Time
}

// clockTick is the resolution of the default clock of a hit.
const clockTick = 50 * time.Millisecond

// CacheStats are a Cache's counters since NewCache.
type CacheStats struct {
	// Entries is the number of keys held, expired ones included.
	Entries int
	// Misses counts lookups a fresh entry could not answer.
	Misses uint64
	// Queries counts calls of the source's Lookup.
	Queries uint64
	// Failures counts queries that failed to get an answer.
	Failures uint64
	// Outages counts transitions from answering to failing.
	Outages uint64
	// Stale counts lookups answered by an expired entry because the
	// source failed.
	Stale uint64
	// Down reports whether the last query failed.
	Down bool
}

// Cache is a Source that remembers another Source's answers: one query per
// key per TTL, one query for a burst of lookups of the same new key
// (singleflight), a bounded number of entries, and stale answers while
// the source is down. A hit takes a read lock on one of up to 64 shards
// and allocates nothing.
type Cache struct {
	src    Source
	opts   CacheOptions
	shards []shard
	mask   uint8
	per    int // entries per shard
	group  singleflight.Group

	misses, queries, failures, outages, stale atomic.Uint64
	down                                      atomic.Bool
	retryAt                                   atomic.Int64 // Unix ns of the next probe while down

	mu        sync.Mutex // orders the outage log records
	downSince time.Time

	coarse *atomic.Int64 // Unix ns, advanced every clockTick; nil with CacheOptions.Now
}

type shard struct {
	mu sync.RWMutex
	m  map[Hash]record // by value: one pointer hop fewer on a hit
	_  [128 - 32]byte  // one shard per cache line pair: hits on different shards do not contend
}

// record is one cached answer. The zero record, which a map read returns
// for an absent key, is expired and past MaxStale.
type record struct {
	entry      Entry
	err        error // nil, or an answer: ErrUnknownKey, ErrDisabledKey, ErrInvalidTier
	expires    int64 // Unix ns
	staleUntil int64 // Unix ns; math.MaxInt64 for no bound
}

// NewCache returns a Cache in front of src.
func NewCache(src Source, opts CacheOptions) *Cache {
	if opts.TTL <= 0 {
		opts.TTL = 60 * time.Second
	}
	if opts.NegativeTTL <= 0 {
		opts.NegativeTTL = 5 * time.Second
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = 100_000
	}
	if opts.QueryTimeout <= 0 {
		opts.QueryTimeout = 2 * time.Second
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	var coarse *atomic.Int64
	if opts.Now == nil {
		opts.Now = time.Now
		coarse = startClock()
	}
	// As many shards as keep at least 64 entries each, so that the bound
	// stays close to MaxEntries while hits spread over locks.
	n := 64
	for n > 1 && opts.MaxEntries/n < 64 {
		n /= 2
	}
	c := &Cache{src: src, opts: opts, shards: make([]shard, n), mask: uint8(n - 1), per: opts.MaxEntries / n}
	for i := range c.shards {
		c.shards[i].m = make(map[Hash]record)
	}
	if coarse != nil {
		c.coarse = coarse
		// The ticking goroutine holds only the clock, so the Cache can be
		// collected; the cleanup then stops the goroutine. No Close needed.
		stop := make(chan struct{})
		go tick(coarse, stop)
		runtime.AddCleanup(c, func(stop chan struct{}) { close(stop) }, stop)
	}
	return c
}

// Lookup implements Source: a fresh entry answers at once; otherwise the
// source is asked, once for all concurrent lookups of h. When the source
// fails, an expired entry within MaxStale answers instead; without one the
// error wraps ErrUnavailable. Answers about the key (ErrUnknownKey,
// ErrDisabledKey, ErrInvalidTier) are cached like entries, for NegativeTTL.
// ctx bounds only this caller's wait, not the shared query.
func (c *Cache) Lookup(ctx context.Context, h Hash) (Entry, error) {
	var now int64
	if c.coarse != nil {
		now = c.coarse.Load()
	} else {
		now = c.opts.Now().UnixNano()
	}
	sh := &c.shards[h[0]&c.mask]
	sh.mu.RLock()
	rec := sh.m[h]
	sh.mu.RUnlock()
	if now < rec.expires {
		return rec.entry, rec.err
	}
	return c.miss(ctx, h, rec, now)
}

// miss is Lookup's slow path, apart so that h escapes to the heap (as the
// singleflight key) only on a miss, not on every hit.
func (c *Cache) miss(ctx context.Context, h Hash, rec record, now int64) (Entry, error) {
	c.misses.Add(1)

	if c.down.Load() {
		// One probe per RetryInterval: whoever moves retryAt makes it.
		at := c.retryAt.Load()
		if now < at || !c.retryAt.CompareAndSwap(at, now+int64(c.opts.RetryInterval)) {
			return c.fallback(rec, now, errOutage)
		}
	}
	ch := c.group.DoChan(string(h[:]), func() (any, error) { return c.fill(ctx, h) })
	select {
	case res := <-ch:
		if res.Err != nil {
			return c.fallback(rec, c.opts.Now().UnixNano(), res.Err)
		}
		got := res.Val.(record)
		return got.entry, got.err
	case <-ctx.Done():
		return Entry{}, ctx.Err()
	}
}

func startClock() *atomic.Int64 {
	c := new(atomic.Int64)
	c.Store(time.Now().UnixNano())
	return c
}

func tick(c *atomic.Int64, stop chan struct{}) {
	t := time.NewTicker(clockTick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.Store(time.Now().UnixNano())
		case <-stop:
			return
		}
	}
}

var errOutage = errors.New("tier: source unavailable, waiting to retry")

// fallback answers with rec when it is within MaxStale, else with err.
func (c *Cache) fallback(rec record, now int64, err error) (Entry, error) {
	if now < rec.staleUntil {
		c.stale.Add(1)
		return rec.entry, rec.err
	}
	if !errors.Is(err, ErrUnavailable) {
		err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return Entry{}, err
}

// fill queries the source for h and stores the answer. It runs once per
// flight; the error it returns is a failure to answer.
func (c *Cache) fill(ctx context.Context, h Hash) (record, error) {
	sh := &c.shards[h[0]&c.mask]
	// A flight that ended between our miss and this one's start has
	// already stored a fresh answer: use it rather than query again.
	sh.mu.RLock()
	rec := sh.m[h]
	sh.mu.RUnlock()
	if c.opts.Now().UnixNano() < rec.expires {
		return rec, nil
	}

	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.QueryTimeout)
	defer cancel()
	c.queries.Add(1)
	e, err := c.src.Lookup(qctx, h)
	now := c.opts.Now()
	ttl := c.opts.TTL
	switch {
	case err == nil:
	case isAnswer(err):
		ttl = c.opts.NegativeTTL
		e = Entry{}
	case errors.Is(err, ErrInvalidTier):
		// The source works but holds a bad tier; asking again each request
		// would not fix it, so remember it as briefly as a negative.
		ttl = c.opts.NegativeTTL
		e = Entry{}
		c.opts.Logger.Error("tier: key has an unusable tier", slog.String("key", h.ID()), slog.Any("error", err))
	default:
		c.failed(now, err)
		return record{}, err
	}
	c.recovered(now)
	rec = record{entry: e, err: err, expires: now.Add(ttl).UnixNano(), staleUntil: stalePast(now.Add(ttl), c.opts.MaxStale)}
	c.store(sh, h, rec, now.UnixNano())
	return rec, nil
}

func stalePast(expires time.Time, maxStale time.Duration) int64 {
	switch {
	case maxStale < 0:
		return 0
	case maxStale == 0:
		return 1<<63 - 1
	}
	return expires.Add(maxStale).UnixNano()
}

// store puts rec under h, evicting when the shard is full: among a few
// sampled entries one expired at now if any, else the first sampled. Go's
// random map iteration order makes the sample random.
func (c *Cache) store(sh *shard, h Hash, rec record, now int64) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[h]; !ok && len(sh.m) >= c.per {
		var victim *Hash
		n := 0
		for k, r := range sh.m {
			if r.expires <= now {
				victim = &k
				break
			}
			if victim == nil {
				victim = &k
			}
			if n++; n == 8 {
				break
			}
		}
		delete(sh.m, *victim)
	}
	sh.m[h] = rec
}

// failed counts a failed query and logs the start of an outage.
func (c *Cache) failed(now time.Time, err error) {
	c.failures.Add(1)
	c.retryAt.Store(now.Add(c.opts.RetryInterval).UnixNano())
	if c.down.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down.CompareAndSwap(false, true) {
		c.outages.Add(1)
		c.downSince = now
		c.opts.Logger.Error("tier: key source unavailable; serving cached keys, unknown keys follow the rule's failure mode",
			slog.Any("error", err), slog.Duration("retry_every", c.opts.RetryInterval))
	}
}

// recovered logs the end of an outage.
func (c *Cache) recovered(now time.Time) {
	if !c.down.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down.CompareAndSwap(true, false) {
		c.opts.Logger.Info("tier: key source recovered", slog.Duration("down_for", now.Sub(c.downSince)),
			slog.Uint64("failed_queries_total", c.failures.Load()))
	}
}

// Forget drops h from the cache, so that its next lookup asks the source:
// for a key revoked through this process.
func (c *Cache) Forget(h Hash) {
	sh := &c.shards[h[0]&c.mask]
	sh.mu.Lock()
	delete(sh.m, h)
	sh.mu.Unlock()
}

// Stats returns the counters.
func (c *Cache) Stats() CacheStats {
	s := CacheStats{
		Misses:   c.misses.Load(),
		Queries:  c.queries.Load(),
		Failures: c.failures.Load(),
		Outages:  c.outages.Load(),
		Stale:    c.stale.Load(),
		Down:     c.down.Load(),
	}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		s.Entries += len(sh.m)
		sh.mu.RUnlock()
	}
	return s
}
