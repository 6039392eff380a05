package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/internal/ctxend"
)

// Request is what a door asks about one request.
type Request struct {
	// Key is the partition key of the rule's own limits.
	Key string
	// Cost is what the request spends, per unit; the zero Cost is a peek.
	Cost floodgate.Cost
	// Plan, if set, looks up a plan whose limits are added (a pricing
	// tier, K6). It runs only once the rule's own limits admitted the
	// request: those guard the lookup by client address (K7), so they are
	// spent even when the plan then refuses. A nil Plan adds nothing. An
	// error wrapping ErrRejected refuses the request (Verdict Rejected);
	// any other is a failing source, answered by the rule's failure mode.
	Plan func(ctx context.Context) (*Plan, error)
}

// ErrRejected marks a plan lookup's refusal of the request itself (no
// API key, an unknown one), as opposed to a source that failed.
var ErrRejected = errors.New("engine: request rejected")

// Plan is a named set of limits chosen per request, under its own key.
// Its limits are readied once per name and again when they change.
type Plan struct {
	Name        string
	Key         string // the plan's partition key; "" means Request.Key
	Policies    []floodgate.Policy
	Concurrency []floodgate.Concurrency
}

// Verdict is what became of a request.
type Verdict uint8

const (
	// Allowed: every limit admitted it (or a shadow rule would have
	// denied it: see Outcome.Shadow).
	Allowed Verdict = iota
	// Denied: a limit refused it (HTTP 429, Envoy OVER_LIMIT, gRPC
	// RESOURCE_EXHAUSTED).
	Denied
	// Blocked: the Blocker holds the key (429 with the
	// abnormal-usage-detected problem type, draft-11 §5).
	Blocked
	// Reduced: refused only because a capacity reduction lowered a quota
	// (503 with the temporary-reduced-capacity problem type).
	Reduced
	// Unavailable: the store failed under FailClosed, a plan could not be
	// readied, or the request's context ended first (503); see Err.
	Unavailable
	// Invalid: a cost that can never pass (Err wraps
	// floodgate.ErrInvalidCost or floodgate.ErrCostExceedsQuota).
	Invalid
	// Rejected: the plan lookup refused the request (Err wraps
	// ErrRejected, and says how: the door writes it).
	Rejected
	// Bypassed: let through unlimited by a door (a bypass token or
	// network); only doors report it, through Engine.Report.
	Bypassed
)

var verdictNames = [...]string{Allowed: "allowed", Denied: "denied", Blocked: "blocked", Reduced: "reduced",
	Unavailable: "unavailable", Invalid: "invalid", Rejected: "rejected", Bypassed: "bypassed"}

// String returns the verdict's lower-case name, e.g. "denied", as used in
// metric labels.
func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// Item is one limit's standing after a request: a rate policy's or a
// concurrency cap's.
type Item struct {
	Name   string
	Quota  int64         // q: per Window, or a cap's Max
	Window time.Duration // w; 0 for a concurrency cap
	Unit   string        // draft-11 qu: "requests", "content-bytes" or "concurrent-requests"
	// Capacity bounds Remaining: a bucket's Burst (Policy.Capacity); 0: Quota.
	Capacity int64
	// Allowed reports whether this limit alone would admit the request.
	Allowed bool
	// Remaining is what is left after the request (before it, when the
	// request was refused or a peek); ≥ 0.
	Remaining int64
	// ResetAfter is draft-11's t: until more becomes available.
	ResetAfter time.Duration
	// RetryAfter is, for a refusing limit, when the request would fit.
	RetryAfter time.Duration
	// FullAfter is a sliding window counter's time until its whole quota
	// is free again (floodgate.Result.FullAfter); 0 otherwise.
	FullAfter time.Duration
	// Algorithm is the rate policy's (0 for a cap).
	Algorithm floodgate.Algorithm
}

// Outcome is the engine's answer for one request.
type Outcome struct {
	Verdict Verdict
	// Shadow: the rule is a shadow rule. Its requests are never refused
	// by a limit (a denial becomes Allowed, and is reported as a shadow
	// denial), and doors send no rate-limit fields for them.
	Shadow bool
	// Degraded: the store failed and a failure mode answered (FailOpen or
	// FailToLocal); Items then say what that mode knows, not the store.
	Degraded bool
	// Summary indexes the Item (see Len and Item) the scalar fields of a
	// response speak of: the refusing one with the longest RetryAfter, or
	// else the one closest to its limit; -1 when there are none.
	Summary int
	// RetryAfter is, when refused, the longest wait over the refusing
	// limits (or the Blocker's, or the throttle queue's).
	RetryAfter time.Duration
	// Field is the RateLimit-Policy value of the limits in Items.
	Field string
	// Waits is how many times a throttle rule held the request.
	Waits int
	// Err says why a request is Unavailable or Invalid.
	Err error

	// The limits asked, caps then rates: the rates are the store's own
	// results, so an outcome costs no allocation of its own.
	caps  []Item
	rates []floodgate.Result

	release func()
	spent   [2]spent // the sets decided (the rule's, a plan's), for Charge
}

// CallerEnded reports whether o went undecided (Unavailable) because the
// caller's context ended, its deadline passed or it was cancelled, not
// because the store failed: the store's own failures and timeouts wrap
// floodgate.ErrStoreUnavailable. A door answers it with the context's
// error, never with a failure mode, and it is no store error.
func (o *Outcome) CallerEnded() bool {
	return o.Verdict == Unavailable && !errors.Is(o.Err, floodgate.ErrStoreUnavailable) &&
		(errors.Is(o.Err, context.DeadlineExceeded) || errors.Is(o.Err, context.Canceled))
}

// Len is the number of limits the request met: every cap, then every
// rate policy, the rule's before the plan's; a limit not reached (after a
// refusal) is left out.
func (o *Outcome) Len() int { return len(o.caps) + len(o.rates) }

// Item returns limit i of o, 0 ≤ i < Len().
func (o *Outcome) Item(i int) Item {
	if i < len(o.caps) {
		return o.caps[i]
	}
	return rateItem(&o.rates[i-len(o.caps)])
}

// NewOutcome builds an Outcome from items, for doors' tests and for
// callers that answer without the engine; Summary is set as Decide sets
// it.
func NewOutcome(v Verdict, field string, items ...Item) Outcome {
	o := Outcome{Verdict: v, Field: field, caps: items}
	o.summarize()
	return o
}

// spent is one set an Outcome decided, under its key.
type spent struct {
	s   *set
	key string
}

// Charge spends more of an admitted request's cost from the rate
// policies it was decided against (the rule's and the plan's, each under
// its key): for a body of unknown length, as it is read. It reports
// whether every policy admitted it; a store failure counts as a refusal
// under FailClosed. It holds no slot and reports no Event.
func (o *Outcome) Charge(ctx context.Context, cost floodgate.Cost) bool {
	for _, sp := range o.spent {
		if sp.s == nil || sp.s.limiter == nil {
			continue
		}
		d, err := sp.s.limiter.TakeCost(ctx, sp.key, cost)
		if err != nil || !d.Allowed {
			return false
		}
	}
	return true
}

// Release gives back the in-flight slots the request holds; call it when
// the request's work ends (a door defers it, so it runs on panic too).
// Calling it again, or on an Outcome without slots, does nothing.
func (o *Outcome) Release() {
	if o.release != nil {
		o.release()
		o.release = nil
	}
}

// Violated returns the names of the refusing limits.
func (o *Outcome) Violated() []string {
	var names []string
	for i := range o.Len() {
		if it := o.Item(i); !it.Allowed {
			names = append(names, it.Name)
		}
	}
	return names
}

func (c *Compiled) decide(ctx context.Context, req Request) Outcome {
	req.Key = BoundKey(req.Key)
	out := Outcome{Summary: -1}
	var took timing
	if b := c.e.blocker; b != nil {
		if ra, blocked := b.Blocked(c.name, req.Key); blocked {
			out.Verdict, out.RetryAfter = Blocked, ra
			if c.static != nil {
				out.Field = c.static.field // the limits are known, if not their state
			}
			c.report(&out, req.Key, timing{}, false)
			return out
		}
	}
	if c.static != nil {
		took.add(c.step(ctx, &out, c.static, req.Key, req.Cost))
	}
	if req.Plan != nil && out.Verdict == Allowed {
		took.add(c.plan(ctx, &out, req))
	}
	out.summarize()
	wouldDeny := false
	if c.mode == Shadow {
		out.Shadow = true
		if wouldDeny = out.Verdict == Denied || out.Verdict == Reduced; wouldDeny {
			out.Verdict = Allowed
		}
	}
	if out.Verdict != Allowed {
		out.Release()
	}
	c.report(&out, req.Key, took, wouldDeny)
	return out
}

// plan looks up req's plan and decides its limits into out.
func (c *Compiled) plan(ctx context.Context, out *Outcome, req Request) timing {
	p, err := req.Plan(ctx)
	switch {
	case err != nil && errors.Is(err, ErrRejected):
		out.Verdict, out.Err = Rejected, err
		return timing{}
	case err != nil && ctxend.Err(ctx) != nil:
		out.Verdict, out.Err = Unavailable, ctxend.Err(ctx) // not the source's failure
		return timing{}
	case err != nil && c.failure != floodgate.FailClosed:
		out.Degraded = true // the source failed; the failure mode lets it through
		return timing{}
	case err != nil:
		out.Verdict, out.Err = Unavailable, fmt.Errorf("%w: plan source: %w", floodgate.ErrStoreUnavailable, err)
		return timing{}
	case p == nil:
		return timing{}
	}
	s, err := c.setFor("plan\x00"+p.Name, p.Policies, p.Concurrency)
	if err != nil {
		out.Verdict, out.Err = Unavailable, fmt.Errorf("engine: rule %q: plan %q: %w", c.name, p.Name, err)
		return timing{}
	}
	key := BoundKey(p.Key)
	if key == "" {
		key = req.Key
	}
	return c.step(ctx, out, s, key, req.Cost)
}

func (c *Compiled) report(out *Outcome, key string, took timing, shadowDenied bool) {
	if c.e.observer == nil {
		return
	}
	ev := Event{Rule: c.name, Key: key, Verdict: out.Verdict, Shadow: shadowDenied, Degraded: out.Degraded,
		CallerEnded: out.CallerEnded(), Waits: out.Waits, Latency: took.store, CachedLatency: took.cached}
	if out.Verdict != Allowed || shadowDenied {
		ev.RetryAfter = out.RetryAfter
		if out.Summary >= 0 {
			if it := out.Item(out.Summary); !it.Allowed {
				ev.Policy = it.Name
			}
		}
	}
	c.e.observer.Observe(ev)
}

// step decides one set for key into out: its caps, then its rates. It
// returns the time spent in the store, measured only for an Observer.
func (c *Compiled) step(ctx context.Context, out *Outcome, s *set, key string, cost floodgate.Cost) timing {
	timed := c.e.observer != nil
	lim := s
	if c.e.capacity != nil && s.limiter != nil {
		lim = c.reduced(s) // its lowered quotas are the ones in force (draft-11 §5)
	}
	if out.Field == "" {
		out.Field = lim.field
	} else {
		out.Field += ", " + lim.field
	}
	if !c.acquire(ctx, out, s, key) || s.limiter == nil {
		return timing{}
	}
	if out.spent[0].s == nil {
		out.spent[0] = spent{lim, key}
	} else {
		out.spent[1] = spent{lim, key}
	}
	var start time.Time
	if timed {
		start = time.Now()
	}
	d, err := c.take(ctx, out, lim.limiter, key, cost)
	var took timing
	if timed {
		took.store = time.Since(start)
		if len(d.Results) > 0 && d.Results[0].Cached {
			took.store, took.cached = 0, took.store
		}
	}
	switch {
	case errors.Is(err, floodgate.ErrCostExceedsQuota) || errors.Is(err, floodgate.ErrInvalidCost):
		out.Verdict, out.Err = Invalid, err
		return took
	case err != nil:
		out.Verdict, out.Err = Unavailable, err
		return took
	}
	out.Degraded = out.Degraded || d.Degraded
	if out.rates == nil {
		out.rates = d.Results // the common case: no copy
	} else {
		out.rates = append(out.rates, d.Results...)
	}
	if !d.Allowed {
		out.Verdict = Denied
		if lim != s && fitsFull(ctx, s, key, cost) {
			out.Verdict = Reduced
		}
	}
	return took
}

func rateItem(r *floodgate.Result) Item {
	return Item{Name: r.Policy.Name, Quota: r.Policy.Quota, Capacity: r.Policy.Capacity(), Window: r.Policy.Window, Unit: r.Policy.Unit.String(),
		Allowed: r.Allowed, Remaining: r.Remaining, ResetAfter: r.ResetAfter, RetryAfter: r.RetryAfter, FullAfter: r.FullAfter,
		Algorithm: r.Policy.Algorithm}
}

// slotRetry is what a refused slot tells the client to wait: a slot frees
// when some request ends, which the store cannot foresee; a second is a
// fair guess.
const slotRetry = time.Second

// acquire takes s's slots for key, reporting whether the request may go
// on. A slot the store cannot give is taken locally under FailToLocal,
// skipped under FailOpen, and refuses the request under FailClosed.
func (c *Compiled) acquire(ctx context.Context, out *Outcome, s *set, key string) bool {
	for i, k := range s.caps {
		rel, free, ok, err := s.slots.Acquire(ctx, key, k, c.lease)
		if err != nil && ctxend.Err(ctx) == nil {
			out.Degraded = true
			switch {
			case s.local != nil:
				rel, free, ok, err = s.local.Acquire(ctx, key, s.localCap[i], c.lease)
			case c.failure == floodgate.FailOpen:
				continue
			}
		}
		if err != nil {
			out.Verdict, out.Err = Unavailable, err
			return false
		}
		it := Item{Name: k.Name, Quota: k.Max, Unit: header.UnitConcurrentRequests, Allowed: ok, Remaining: free}
		if !ok {
			it.ResetAfter, it.RetryAfter = slotRetry, slotRetry
			out.caps = append(out.caps, it)
			out.Verdict = Denied
			return false
		}
		out.caps = append(out.caps, it)
		out.release = chain(out.release, rel)
	}
	return true
}

// reduced returns s with every quota scaled by its policy's capacity
// factor, or s itself when no reduction holds.
func (c *Compiled) reduced(s *set) *set {
	var scaled []floodgate.Policy
	for i, p := range s.policies {
		f, _ := c.e.capacity.Factor(p.Name)
		if f >= 1 || f <= 0 {
			continue
		}
		if scaled == nil {
			scaled = append([]floodgate.Policy(nil), s.policies...)
		}
		scaled[i] = p.Scaled(f)
	}
	if scaled == nil {
		return s
	}
	r, err := c.setFor("reduced\x00"+s.field, scaled, s.caps)
	if err != nil {
		c.e.logger.Error("capacity reduction", "rule", c.name, "error", err)
		return s
	}
	return r
}

// fitsFull reports whether a request refused under reduced quotas would
// fit the full ones: then the reduction, not the client, refused it. It
// peeks, spending nothing, on that rare path only.
func fitsFull(ctx context.Context, full *set, key string, cost floodgate.Cost) bool {
	d, err := full.limiter.TakeCost(ctx, key, floodgate.Cost{})
	if err != nil {
		return false
	}
	for _, r := range d.Results {
		if r.Remaining < cost.Of(r.Policy.Unit) {
			return false
		}
	}
	return true
}

// summarize sets Summary and RetryAfter from the limits: the refusing one
// with the longest RetryAfter, or, when all admit, the one closest to its
// limit (least remaining share of its capacity, as cross products).
func (o *Outcome) summarize() {
	best, refused := -1, false
	var b standing
	for i := range o.Len() {
		s := o.standing(i)
		switch {
		case !s.allowed && (!refused || s.retry > b.retry):
			best, refused, b = i, true, s
		case !refused && (best < 0 || s.remaining*b.capacity < b.remaining*s.capacity):
			best, b = i, s
		}
	}
	o.Summary = best
	if refused {
		o.RetryAfter = max(o.RetryAfter, b.retry)
	}
}

// standing is what summarize compares of a limit.
type standing struct {
	allowed             bool
	remaining, capacity int64
	retry               time.Duration
}

func (o *Outcome) standing(i int) standing {
	if i < len(o.caps) {
		c := &o.caps[i]
		return standing{c.Allowed, c.Remaining, c.Quota, c.RetryAfter}
	}
	r := &o.rates[i-len(o.caps)]
	return standing{r.Allowed, r.Remaining, r.Policy.Capacity(), r.RetryAfter}
}

func chain(a, b func()) func() {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func() { b(); a() }
}

// Peek reports key's standing under the rule's own rate policies,
// spending nothing: no slot is taken, nothing waits and no Event is
// reported. Its Verdict is Denied when a cost of 1 would not pass now,
// Unavailable when the store fails under FailClosed.
func (c *Compiled) Peek(ctx context.Context, key string) Outcome {
	out := c.direct(ctx, key, floodgate.Cost{})
	if out.Err == nil && out.Summary >= 0 && !out.Item(out.Summary).Allowed {
		out.Verdict = Denied // a cost of 1 would not pass now
	}
	return out
}
