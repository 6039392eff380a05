package httplimit

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/floodgate/floodgate"
)

// rule is a Rule made ready to serve.
type rule struct {
	name     string
	pattern  *pattern
	key      []KeyPart
	cost     func(*http.Request) (int64, error)
	mode     Mode
	maxDelay time.Duration
	failure  floodgate.FailureMode
	maxBody  int64
	build    func(ps []floodgate.Policy) (*limits, error)

	static *limits // from Rule.Policies; nil when a Plan rule has none
	plan   func(r *http.Request) (string, Plan, error)
	plans  sync.Map // plan name → *limits, rebuilt when a plan's policies change
}

// limits enforces one policy set: one Limiter per unit, and slots.
type limits struct {
	policies  []floodgate.Policy
	requests  *floodgate.Limiter // Requests policies, nil if none
	bytes     *floodgate.Limiter // ContentBytes policies, nil if none
	slots     []floodgate.Policy // ConcurrentRequests policies
	slotStore floodgate.Slots
	lease     time.Duration
	// With FailToLocal: where slots are held while slotStore fails, and
	// this instance's share of each slot policy there.
	localSlots    floodgate.Slots
	localSlotCaps []floodgate.Policy

	// policyValue is RateLimit-Policy, the same on every response. Sharing
	// the slice is safe: len == cap, so an Add on it copies.
	policyValue []string
}

func newRule(in Rule, store, local floodgate.Store, logger *slog.Logger) (*rule, error) {
	name := in.Name
	if name == "" {
		name = in.Pattern
	}
	fail := func(err error) (*rule, error) { return nil, fmt.Errorf("httplimit: rule %q: %w", name, err) }
	pat, err := parsePattern(in.Pattern)
	if err != nil {
		return fail(err)
	}
	r := &rule{
		name: name, pattern: pat, key: in.Key, cost: in.Cost, mode: in.Mode,
		maxDelay: in.MaxDelay, failure: in.FailureMode, maxBody: in.MaxBodyBytes, plan: in.Plan,
	}
	if r.mode > Throttle {
		return fail(fmt.Errorf("unknown mode %d", in.Mode))
	}
	if r.mode == Throttle && r.maxDelay <= 0 {
		return fail(fmt.Errorf("throttle mode needs a positive max delay"))
	}
	if len(r.key) == 0 {
		r.key = []KeyPart{ClientIP()}
	}
	for i, k := range r.key {
		if k == nil {
			return fail(fmt.Errorf("key part %d is nil", i))
		}
	}
	switch {
	case in.MaxBodyBytes < 0:
		return fail(fmt.Errorf("max body bytes %d is negative (0: the default, 10 MiB)", in.MaxBodyBytes))
	case in.MaxBodyBytes == 0:
		r.maxBody = 10 << 20
	}
	switch {
	case in.FailureMode > floodgate.FailToLocal:
		return fail(fmt.Errorf("unknown failure mode %d", in.FailureMode))
	case in.FailureMode == floodgate.FailToLocal && local == nil:
		return fail(fmt.Errorf("fail-to-local needs Config.Local"))
	case !(in.LocalShare >= 0 && in.LocalShare <= 1): // NaN too
		return fail(fmt.Errorf("local share %v is outside (0, 1] (0: the default, 1)", in.LocalShare))
	}
	share := in.LocalShare
	if share == 0 {
		share = 1
	}
	r.build = func(ps []floodgate.Policy) (*limits, error) {
		opts := []floodgate.Option{floodgate.WithFailureMode(in.FailureMode), floodgate.WithLogger(logger)}
		if in.FailureMode == floodgate.FailToLocal {
			opts = append(opts, floodgate.WithLocalFallback(local, share))
		}
		l, err := newLimits(ps, store, opts)
		if err != nil || in.FailureMode != floodgate.FailToLocal || len(l.slots) == 0 {
			return l, err
		}
		if l.localSlots, _ = local.(floodgate.Slots); l.localSlots == nil {
			return nil, fmt.Errorf("fail-to-local with concurrent-requests policies needs a Config.Local with slots, %T has none", local)
		}
		for _, p := range l.slots {
			l.localSlotCaps = append(l.localSlotCaps, p.Scaled(share))
		}
		return l, nil
	}
	if in.Plan == nil || len(in.Policies) > 0 {
		if r.static, err = r.build(in.Policies); err != nil {
			return fail(err)
		}
	}
	return r, nil
}

func newLimits(policies []floodgate.Policy, store floodgate.Store, opts []floodgate.Option) (*limits, error) {
	if err := floodgate.ValidatePolicies(policies); err != nil {
		return nil, err
	}
	l := &limits{policies: policies, lease: time.Minute}
	var reqs, bytes []floodgate.Policy
	for _, p := range policies {
		switch p.Unit {
		case floodgate.Requests:
			reqs = append(reqs, p)
		case floodgate.ContentBytes:
			bytes = append(bytes, p)
		case floodgate.ConcurrentRequests:
			l.slots = append(l.slots, p)
		}
	}
	field, err := PolicyField(policies)
	if err != nil {
		return nil, err
	}
	l.policyValue = []string{field}
	if len(l.slots) > 0 {
		s, ok := store.(floodgate.Slots)
		if !ok {
			return nil, fmt.Errorf("concurrent-requests policies need a store with slots, %T has none", store)
		}
		l.slotStore = s
	}
	if len(reqs) > 0 {
		if l.requests, err = floodgate.NewLimiter(store, reqs, opts...); err != nil {
			return nil, err
		}
	}
	if len(bytes) > 0 {
		if l.bytes, err = floodgate.NewLimiter(store, bytes, opts...); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// limitsFor returns the limits of a request's plan, building them on first
// use and again when the plan's policies change.
func (r *rule) limitsFor(p Plan) (*limits, error) {
	if v, ok := r.plans.Load(p.Name); ok {
		if l := v.(*limits); slices.Equal(l.policies, p.Policies) {
			return l, nil
		}
	}
	l, err := r.build(slices.Clone(p.Policies))
	if err != nil {
		return nil, fmt.Errorf("plan %q: %w", p.Name, err)
	}
	r.plans.Store(p.Name, l)
	return l, nil
}
