package client

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/floodgate/floodgate/header"
	"github.com/sony/gobreaker/v2"
)

// stateKey identifies one observed policy (C6): the origin is the map the
// key lives in; dup tells apart items that repeat a name (vector lim-11).
type stateKey struct {
	policy string
	pk     string
	dup    int
}

// itemState is the last fresh observation of one policy.
type itemState struct {
	Item
	observed time.Time
	expires  time.Time // observed + t (or w, or noWindowTTL)
	seq      uint64    // reservation sequence of the request it answered
	spent    int64     // units reserved since the observation
}

// noWindowTTL is how long an observation without t or w stays fresh: r
// alone says nothing about time, so it is trusted only briefly.
const noWindowTTL = time.Second

// maxTracked bounds the policies kept per origin, so a server naming new
// ones in every response cannot grow the state (or slow each request)
// without end; items beyond it are ignored.
const maxTracked = 64

// origin is the client's state for one scheme://host[:port].
type origin struct {
	name    string
	breaker *gobreaker.TwoStepCircuitBreaker[struct{}] // nil when disabled

	mu        sync.Mutex
	limits    map[stateKey]*itemState // items carrying r (signals that expire)
	policies  map[stateKey]*itemState // items carrying only q/w (they pace; they expire after w)
	factor    float64                 // AIMD pace factor in (0, 1]
	prev      time.Time               // send time of the last reservation
	blocked   time.Time               // no request before this (Retry-After, exhaustion)
	needProbe bool                    // the next request goes alone and reads a fresh signal
	probe     chan struct{}           // non-nil while a probe is in flight; closed when it ends
	gen       uint64                  // bumped by every cut or block, invalidating reservations
	seq       uint64                  // reservations made so far
	lastCause string                  // why the last block or cut happened, for Probe output
	last      *Signal                 // the last signal observed, for Probe output
}

func newOrigin(name string) *origin {
	return &origin{name: name, limits: map[stateKey]*itemState{}, policies: map[stateKey]*itemState{}, factor: 1}
}

// ticket is one reservation at the origin gate.
type ticket struct {
	seq    uint64
	gen    uint64
	probe  bool
	within bool // sent while a fresh signal left quota (C8)
	costs  map[stateKey]int64
}

// gateResult says what a request must do before it may be sent.
type gateResult struct {
	wait    time.Duration // sleep this long, then ask again (or send, when t != nil)
	waitOn  chan struct{} // or wait for this probe to end
	t       *ticket       // non-nil: reserved; send after wait
	tooLong bool          // the queue is longer than maxWait: refuse
	reason  string        // why waiting, for logs
}

// reserve decides, at now, whether a request costing bodyBytes (−1 when
// unknown) may be sent, and if so reserves its place. pk is the predicted
// partition key (nil: every signal applies).
func (o *origin) reserve(tr *Transport, now time.Time, bodyBytes int64, pk []byte) gateResult {
	c := &tr.cfg
	o.mu.Lock()
	defer o.mu.Unlock()

	if o.probe != nil {
		return gateResult{waitOn: o.probe, reason: "probe in flight"}
	}
	if now.Before(o.blocked) {
		return gateResult{wait: o.blocked.Sub(now), reason: o.lastCause}
	}
	// Expire observations (C4). An expired signal is not a refill: the
	// next request probes for a fresh one.
	for k, s := range o.limits {
		if !now.Before(s.expires) {
			delete(o.limits, k)
			o.needProbe = true
		}
	}
	for k, p := range o.policies {
		if !now.Before(p.expires) {
			delete(o.policies, k) // no probe: q/w alone never let anything through
		}
	}
	if o.needProbe {
		o.needProbe = false
		o.probe = make(chan struct{})
		o.prev = now
		o.seq++
		return gateResult{t: &ticket{seq: o.seq, gen: o.gen, probe: true}}
	}

	t := &ticket{}
	interval := 0.0 // seconds between requests
	fresh := false
	var exhausted *itemState
	for k, s := range o.limits {
		if !pkApplies(pk, s.PartitionKey) || s.Outlier != "" || !s.KnownUnit {
			continue
		}
		cost := int64(0)
		switch s.Unit {
		case header.UnitRequests:
			cost = 1
		case header.UnitContentBytes:
			cost = max(bodyBytes, 0)
		}
		if cost == 0 {
			continue
		}
		fresh = true
		if s.spent+cost > s.Remaining {
			// Do not spend more than r within t (draft-11 §7): wait for the
			// window to end, with jitter, then probe.
			if exhausted == nil || s.expires.After(exhausted.expires) {
				exhausted = s
			}
			continue
		}
		if t.costs == nil {
			t.costs = map[stateKey]int64{}
		}
		t.costs[k] = cost
		interval = paceInterval(interval, s.Item, c.maxWindow)
	}
	if exhausted != nil {
		o.block(tr, now, exhausted.expires.Sub(now), "quota exhausted: policy "+strconv.Quote(exhausted.Policy))
		return gateResult{wait: o.blocked.Sub(now), reason: o.lastCause}
	}
	for _, p := range o.policies {
		if pkApplies(pk, p.PartitionKey) {
			interval = paceInterval(interval, p.Item, c.maxWindow)
		}
	}
	// The pace factor slows the tighter of the server pace and the local
	// rate; the local rate limiter applies on top in any case.
	interval = math.Max(interval, 1/c.rps) / o.factor
	step := durationOf(interval, c.maxWait)

	// Space from the previous reservation with the interval known now, so
	// a fresher signal (slower or faster) governs the next request.
	slot := o.prev.Add(step)
	if slot.Before(now) {
		slot = now
	}
	if wait := slot.Sub(now); wait > c.maxWait {
		// Queued too far behind this transport's own requests: refuse
		// instead of stalling (the caller can shed or retry later).
		return gateResult{tooLong: true, reason: "queue longer than max wait"}
	}
	o.prev = slot
	o.seq++
	t.seq, t.gen, t.within = o.seq, o.gen, fresh
	for k, cost := range t.costs {
		o.limits[k].spent += cost
	}
	return gateResult{t: t, wait: slot.Sub(now)}
}

// cancel gives back a reservation that was not used (its sleep was
// interrupted or invalidated).
func (o *origin) cancel(t *ticket) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, c := range t.costs {
		if s, ok := o.limits[k]; ok && s.seq < t.seq {
			s.spent -= c
		}
	}
	if t.probe {
		o.endProbe(false)
	}
}

// stale reports whether a reservation was overtaken by a cut or block.
func (o *origin) stale(t *ticket) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return t.gen != o.gen && !t.probe
}

// block stops sending for d plus jitter (clamped to maxWait) and makes
// the next request a probe. Called with o.mu held.
func (o *origin) block(tr *Transport, now time.Time, d time.Duration, cause string) {
	d = min(max(d, 0), tr.cfg.maxWait) // clamp first: d may be near MaxInt64
	d = min(d+tr.jitter(d), tr.cfg.maxWait)
	if until := now.Add(d); until.After(o.blocked) {
		o.blocked = until
	}
	o.needProbe = true
	o.gen++
	o.lastCause = cause
}

// endProbe releases the requests waiting for a probe. Called with o.mu held.
func (o *origin) endProbe(ok bool) {
	if o.probe != nil {
		close(o.probe)
		o.probe = nil
	}
	if !ok {
		o.needProbe = true
	}
}

// observe applies a response's signal to the state. t is the ticket the
// request was sent with; now is when the response arrived.
func (o *origin) observe(tr *Transport, t *ticket, now time.Time, s *Signal, attempts int) {
	c := &tr.cfg
	o.mu.Lock()
	defer o.mu.Unlock()
	if t.probe {
		o.endProbe(true)
		o.factor = math.Min(o.factor, c.rampStart)
	}
	o.last = s
	// Values from a cache describe someone else's past (draft-11 §7), so
	// its items are not kept; a refusal still means "not now" (a 429 must
	// not have been cached at all, RFC 6585 §4).
	dups := map[stateKey]int{}
	for _, it := range s.Items {
		if s.Cached {
			break
		}
		base := stateKey{policy: it.Policy, pk: string(it.PartitionKey)}
		k := base
		k.dup = dups[base]
		dups[base]++
		if it.Outlier != "" {
			// An exhausted quota with an absurd window still means "not
			// now": wait the maximum, then probe, rather than stall for the
			// window or ignore the refusal (draft-11 §7).
			if it.HasRemaining && it.Remaining == 0 && it.HasWindow && it.EffectiveWindow > int64(c.maxWindow/time.Second) {
				o.block(tr, now, c.maxWait, "quota exhausted, window beyond the maximum: policy "+strconv.Quote(it.Policy))
			}
			continue
		}
		_, inLimits := o.limits[k]
		_, inPolicies := o.policies[k]
		if !inLimits && !inPolicies && len(o.limits)+len(o.policies) >= maxTracked {
			tr.stats.ignored.Add(1)
			continue
		}
		if !it.HasRemaining {
			// w bounds how long q/w is worth believing; without one, the
			// maximum window does.
			ttl := c.maxWindow
			if it.Window > 0 {
				ttl = durationOf(float64(it.Window), c.maxWindow)
			}
			o.policies[k] = &itemState{Item: it, observed: now, expires: now.Add(ttl)}
			continue
		}
		if cur, ok := o.limits[k]; ok && cur.seq > t.seq {
			continue // a newer response already updated this policy
		}
		ttl := noWindowTTL
		switch {
		case it.HasWindow: // at most the maximum window, or it is an outlier
			ttl = time.Duration(it.EffectiveWindow) * time.Second
		case it.HasPolicy && it.Window > 0:
			ttl = durationOf(float64(it.Window), c.maxWindow)
		}
		// Requests reserved after this one may not be in r yet: count
		// them as spent, which can only make the client slower.
		o.limits[k] = &itemState{Item: it, observed: now, expires: now.Add(ttl), seq: t.seq, spent: int64(o.seq - t.seq)}
	}

	cut := s.Status == 429
	switch s.ProblemType() {
	case header.ProblemQuotaExceeded, header.ProblemTemporaryReducedCapacity, header.ProblemAbnormalUsageDetected:
		cut = true
	}
	switch {
	case cut:
		// Cut once per episode: refusals of requests sent before the last
		// cut describe the same overload, not a new one.
		if t.gen == o.gen || t.probe {
			o.factor = math.Max(c.minFactor, o.factor*c.decrease)
		}
		// Retry-After is a lower bound, not a promise (C5): a zero or past
		// value still waits the local interval at the reduced factor, so
		// repeated refusals back off exponentially.
		d := max(retryDelay(tr, s, o.factor, attempts), durationOf(1/(c.rps*o.factor), c.maxWait))
		o.block(tr, now, d, "server refused: "+refusal(s))
	case s.Status >= 500 && s.HasRetryAfter:
		// A lower bound, as after a refusal: a zero Retry-After on a 502
		// must not make retries faster than having none.
		o.block(tr, now, max(s.RetryDelay, tr.backoff(attempts)), strconv.Itoa(s.Status)+" with Retry-After")
	case s.Status < 500 && !t.probe:
		// Additive increase; a probe's answer only restarts the ramp.
		o.factor = math.Min(1, o.factor+c.rampStep)
	}
}

// retryDelay is how long to wait after a refusal: Retry-After when sent
// (it takes precedence over t, draft-11 §7, C5), else the longest t of
// an exhausted or violated policy, else the backoff scaled by the pace
// factor. Unclamped; callers clamp to maxWait.
func retryDelay(tr *Transport, s *Signal, factor float64, attempt int) time.Duration {
	if s.HasRetryAfter {
		return s.RetryDelay
	}
	var d time.Duration
	violated := map[string]bool{}
	if s.Problem != nil {
		for _, n := range s.Problem.ViolatedPolicies {
			violated[n] = true
		}
	}
	for _, it := range s.Items {
		if it.Outlier == "" && it.HasWindow && it.HasRemaining && (it.Remaining == 0 || violated[it.Policy]) {
			d = max(d, time.Duration(it.EffectiveWindow)*time.Second)
		}
	}
	if d > 0 {
		return d
	}
	b := float64(tr.cfg.backoff) * math.Pow(2, float64(max(attempt-1, 0))) / factor
	return time.Duration(math.Min(b, float64(math.MaxInt64/2)))
}

func refusal(s *Signal) string {
	if p := s.ProblemType(); p != "" && p != "about:blank" {
		if name, ok := strings.CutPrefix(p, ianaProblemTypes); ok && name != "" {
			return name
		}
		return p
	}
	return "status " + strconv.Itoa(s.Status)
}

// paceInterval returns the larger of interval and the seconds between
// requests that it permits, when it paces requests.
func paceInterval(interval float64, it Item, maxWindow time.Duration) float64 {
	if it.Unit != header.UnitRequests {
		return interval
	}
	if p, ok := it.Pace(maxWindow); ok {
		interval = math.Max(interval, 1/math.Max(p, 1e-9))
	}
	return interval
}

// pkApplies reports whether a signal with partition key have applies to a
// request predicted to carry want (nil: unknown, everything applies).
func pkApplies(want, have []byte) bool {
	return want == nil || have == nil || bytes.Equal(want, have)
}

// durationOf converts seconds to a Duration, clamped to [0, max].
func durationOf(sec float64, maxD time.Duration) time.Duration {
	if sec <= 0 {
		return 0
	}
	if sec >= maxD.Seconds() {
		return maxD
	}
	return time.Duration(sec * float64(time.Second))
}

// PolicyState is a snapshot of one observed policy of an origin.
type PolicyState struct {
	Item
	// Observed is when the signal arrived; Expires when it stops applying
	// (for policy-only items, after w or the maximum window).
	Observed, Expires time.Time
	// Spent is the units the client reserved since the observation.
	Spent int64
}

// OriginState is a snapshot of the client's state for one origin.
type OriginState struct {
	Origin string
	// Factor is the AIMD pace factor in (0, 1].
	Factor float64
	// Interval is the spacing the next requests get, before local caps.
	Interval time.Duration
	// BlockedUntil is when sending resumes after a refusal or exhaustion;
	// zero or past when not blocked.
	BlockedUntil time.Time
	// NeedProbe says the next request goes alone, as a probe (C4).
	NeedProbe bool
	// Cause is why the last block happened.
	Cause    string
	Policies []PolicyState
	// Last is the last signal observed, nil before the first response.
	Last *Signal
}

func (o *origin) snapshot(tr *Transport) OriginState {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := OriginState{Origin: o.name, Factor: o.factor, BlockedUntil: o.blocked, NeedProbe: o.needProbe, Cause: o.lastCause, Last: o.last}
	interval := 0.0
	for _, s := range o.limits {
		st.Policies = append(st.Policies, PolicyState{Item: s.Item, Observed: s.observed, Expires: s.expires, Spent: s.spent})
		interval = paceInterval(interval, s.Item, tr.cfg.maxWindow)
	}
	for _, p := range o.policies {
		st.Policies = append(st.Policies, PolicyState{Item: p.Item, Observed: p.observed, Expires: p.expires})
		interval = paceInterval(interval, p.Item, tr.cfg.maxWindow)
	}
	st.Interval = durationOf(math.Max(interval, 1/tr.cfg.rps)/o.factor, tr.cfg.maxWait)
	return st
}
