package reduce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// AllPolicies as a Reduction's Policy applies it to every policy.
const AllPolicies = "*"

// Reduction is a temporary lowering of one policy's quota.
type Reduction struct {
	// Policy is the policy name, or AllPolicies.
	Policy string `json:"policy"`
	// Factor is the share of the quota in force, 0 < Factor < 1.
	Factor float64 `json:"factor"`
	// Until is when the reduction ends by itself.
	Until time.Time `json:"until"`
	// Reason is free text for operators, e.g. "database failover".
	Reason string `json:"reason,omitempty"`
}

// ReductionStore keeps reductions where every replica can read them.
type ReductionStore interface {
	// Put saves a reduction of policy for d from now, replacing any it
	// had, and returns it with Until set by the store's clock.
	Put(ctx context.Context, policy string, factor float64, d time.Duration, reason string) (Reduction, error)
	// Delete ends policy's reduction now; no reduction is not an error.
	Delete(ctx context.Context, policy string) error
	// List returns the reductions in force, with Until expressed in the
	// local clock.
	List(ctx context.Context) ([]Reduction, error)
}

// MemoryReductions is a ReductionStore for one process.
type MemoryReductions struct {
	mu  sync.Mutex
	m   map[string]Reduction
	now func() time.Time
}

// NewMemoryReductions returns an empty store on clock now (nil means
// time.Now).
func NewMemoryReductions(now func() time.Time) *MemoryReductions {
	if now == nil {
		now = time.Now
	}
	return &MemoryReductions{m: make(map[string]Reduction), now: now}
}

// Put implements ReductionStore.
func (s *MemoryReductions) Put(_ context.Context, policy string, factor float64, d time.Duration, reason string) (Reduction, error) {
	r := Reduction{Policy: policy, Factor: factor, Until: s.now().Add(d), Reason: reason}
	s.mu.Lock()
	s.m[policy] = r
	s.mu.Unlock()
	return r, nil
}

// Delete implements ReductionStore.
func (s *MemoryReductions) Delete(_ context.Context, policy string) error {
	s.mu.Lock()
	delete(s.m, policy)
	s.mu.Unlock()
	return nil
}

// List implements ReductionStore; expired entries are removed as it goes.
func (s *MemoryReductions) List(context.Context) ([]Reduction, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Reduction, 0, len(s.m))
	for k, r := range s.m {
		if !now.Before(r.Until) {
			delete(s.m, k)
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// ReductionsConfig configures NewReductions.
type ReductionsConfig struct {
	// Store keeps the reductions; default a MemoryReductions. A shared
	// store (RedisReductions) is re-read every Refresh, so a reduction set
	// through any replica reaches all of them within that time.
	Store ReductionStore
	// Refresh is how often Store is re-read; default 1s.
	Refresh time.Duration
	// MaxDuration bounds one reduction; default 24h.
	MaxDuration time.Duration
	// Logger reports refresh failures (once per failing spell) and every
	// reduction set or ended; default slog.Default().
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Reductions implements engine.Capacity over a ReductionStore, answering
// from a local copy refreshed in the background, so the request path never
// waits on the store. A reduction ends at its Until even if the store
// cannot be read any more. It is also a prometheus.Collector exporting
// floodgate_capacity_factor.
type Reductions struct {
	cfg    ReductionsConfig
	snap   atomic.Pointer[map[string]Reduction]
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	failed atomic.Bool
	// writeMu and gen keep a refresh that read the store before a local
	// change from overwriting that change with its older view.
	writeMu sync.Mutex
	gen     uint64
	desc    *prometheus.Desc
}

// Errors of Reductions.Set.
var (
	ErrBadFactor   = errors.New("reduce: factor must be greater than 0 and less than 1")
	ErrBadDuration = errors.New("reduce: duration must be positive and within the maximum")
	ErrNoPolicies  = errors.New(`reduce: no policy to reduce (use "*" for all)`)
)

// NewReductions reads the store once and starts refreshing it every
// Refresh; Close stops that. A failing first read is logged, not returned:
// the daemon must come up while the store is down.
func NewReductions(cfg ReductionsConfig) *Reductions {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Store == nil {
		cfg.Store = NewMemoryReductions(cfg.Now)
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = time.Second
	}
	if cfg.MaxDuration <= 0 {
		cfg.MaxDuration = 24 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Reductions{
		cfg: cfg, stop: make(chan struct{}), done: make(chan struct{}),
		desc: prometheus.NewDesc("floodgate_capacity_factor",
			"Share of the policy's quota in force while a temporary capacity reduction holds (policy \"*\" means all); absent when none.",
			[]string{"policy"}, nil),
	}
	empty := map[string]Reduction{}
	r.snap.Store(&empty)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	r.Refresh(ctx)
	cancel()
	go r.loop()
	return r
}

func (r *Reductions) loop() {
	defer close(r.done)
	t := time.NewTicker(r.cfg.Refresh)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Refresh)
			r.Refresh(ctx)
			cancel()
		}
	}
}

// Refresh re-reads the store now. On failure the previous copy stays in
// use (its reductions still end on time) and the error is returned.
func (r *Reductions) Refresh(ctx context.Context) error {
	r.writeMu.Lock()
	gen := r.gen
	r.writeMu.Unlock()
	list, err := r.cfg.Store.List(ctx)
	if err != nil {
		if !r.failed.Swap(true) {
			r.cfg.Logger.Error("capacity reductions: store unreadable; keeping the last known reductions", slog.Any("error", err))
		}
		return err
	}
	if r.failed.Swap(false) {
		r.cfg.Logger.Info("capacity reductions: store readable again")
	}
	m := make(map[string]Reduction, len(list))
	for _, x := range list {
		m[x.Policy] = x
	}
	r.writeMu.Lock()
	if r.gen == gen {
		r.snap.Store(&m)
	}
	r.writeMu.Unlock()
	return nil
}

// Close stops the background refresh.
func (r *Reductions) Close() {
	r.once.Do(func() { close(r.stop) })
	<-r.done
}

// Factor implements engine.Capacity: the smallest factor among the
// policy's own reduction and an AllPolicies one, with its end; 1 and the
// zero time when none holds.
func (r *Reductions) Factor(policy string) (float64, time.Time) {
	m := *r.snap.Load()
	if len(m) == 0 {
		return 1, time.Time{}
	}
	now := r.cfg.Now()
	f, until := 1.0, time.Time{}
	for _, name := range [2]string{policy, AllPolicies} {
		if x, ok := m[name]; ok && now.Before(x.Until) && x.Factor < f {
			f, until = x.Factor, x.Until
		}
	}
	return f, until
}

// Set reduces each of policies (AllPolicies for all) to factor of its
// quota for d, replacing earlier reductions of the same policies, and
// returns them. Errors: ErrBadFactor, ErrBadDuration, ErrNoPolicies, or
// the store's error (some policies may then be reduced already).
func (r *Reductions) Set(ctx context.Context, policies []string, factor float64, d time.Duration, reason string) ([]Reduction, error) {
	if !(factor > 0 && factor < 1) { // NaN fails both comparisons
		return nil, fmt.Errorf("%w, got %v", ErrBadFactor, factor)
	}
	if d <= 0 || d > r.cfg.MaxDuration {
		return nil, fmt.Errorf("%w (%v), got %v", ErrBadDuration, r.cfg.MaxDuration, d)
	}
	if len(policies) == 0 {
		return nil, ErrNoPolicies
	}
	out := make([]Reduction, 0, len(policies))
	for _, p := range policies {
		x, err := r.cfg.Store.Put(ctx, p, factor, d, reason)
		if err != nil {
			return out, fmt.Errorf("reduce: reduce %q: %w", p, err)
		}
		out = append(out, x)
		r.cfg.Logger.Warn("capacity reduced", slog.String("policy", p), slog.Float64("factor", factor),
			slog.Time("until", x.Until), slog.String("reason", reason))
	}
	r.apply(func(m map[string]Reduction) {
		for _, x := range out {
			m[x.Policy] = x
		}
	})
	return out, nil
}

// End ends the reductions of policies now.
func (r *Reductions) End(ctx context.Context, policies []string) error {
	for _, p := range policies {
		if err := r.cfg.Store.Delete(ctx, p); err != nil {
			return fmt.Errorf("reduce: end reduction of %q: %w", p, err)
		}
		r.cfg.Logger.Warn("capacity reduction ended", slog.String("policy", p))
	}
	r.apply(func(m map[string]Reduction) {
		for _, p := range policies {
			delete(m, p)
		}
	})
	return nil
}

// apply changes the local copy at once, so this replica does not wait for
// the next refresh to see its own change.
func (r *Reductions) apply(change func(map[string]Reduction)) {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	r.gen++
	m := maps.Clone(*r.snap.Load())
	change(m)
	r.snap.Store(&m)
}

// Active returns the reductions in force, by policy name.
func (r *Reductions) Active() []Reduction {
	now := r.cfg.Now()
	var out []Reduction
	for _, x := range *r.snap.Load() {
		if now.Before(x.Until) {
			out = append(out, x)
		}
	}
	slices.SortFunc(out, func(a, b Reduction) int { return strings.Compare(a.Policy, b.Policy) })
	return out
}

// Describe implements prometheus.Collector.
func (r *Reductions) Describe(ch chan<- *prometheus.Desc) { ch <- r.desc }

// Collect implements prometheus.Collector.
func (r *Reductions) Collect(ch chan<- prometheus.Metric) {
	for _, x := range r.Active() {
		ch <- prometheus.MustNewConstMetric(r.desc, prometheus.GaugeValue, x.Factor, x.Policy)
	}
}
