package httplimit

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/header"
)

// rule is a Rule made ready to serve.
type rule struct {
	name     string
	pattern  *pattern
	key      []KeyPart
	needsIP  bool
	cost     func(*http.Request) (int64, error)
	mode     Mode
	maxDelay time.Duration
	failure  floodgate.FailureMode
	maxBody  int64

	requests  *floodgate.Limiter // Requests policies, nil if none
	bytes     *floodgate.Limiter // ContentBytes policies, nil if none
	slots     []floodgate.Policy // ConcurrentRequests policies
	slotStore floodgate.Slots
	lease     time.Duration

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
	if err := floodgate.ValidatePolicies(in.Policies); err != nil {
		return fail(err)
	}
	r := &rule{
		name: name, pattern: pat, key: in.Key, cost: in.Cost, mode: in.Mode,
		maxDelay: in.MaxDelay, failure: in.FailureMode, maxBody: in.MaxBodyBytes,
		lease: time.Minute,
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
	r.needsIP = true // ClientIP parts are opaque funcs; resolving is cheap
	if r.maxBody <= 0 {
		r.maxBody = 10 << 20
	}
	var reqs, bytes []floodgate.Policy
	var fields []header.Policy
	for _, p := range in.Policies {
		switch p.Unit {
		case floodgate.Requests:
			reqs = append(reqs, p)
		case floodgate.ContentBytes:
			bytes = append(bytes, p)
		case floodgate.ConcurrentRequests:
			r.slots = append(r.slots, p)
		}
		hp := header.Policy{Name: p.Name, Quota: p.Quota, Unit: p.Unit.String()}
		if p.Unit != floodgate.ConcurrentRequests {
			hp.Window = windowSeconds(p.Window)
		}
		fields = append(fields, hp)
	}
	field, err := header.FormatPolicy(fields)
	if err != nil {
		return fail(err)
	}
	r.policyValue = []string{field}
	if len(r.slots) > 0 {
		s, ok := store.(floodgate.Slots)
		if !ok {
			return fail(fmt.Errorf("concurrent-requests policies need a store with slots, %T has none", store))
		}
		r.slotStore = s
	}
	newLimiter := func(ps []floodgate.Policy) (*floodgate.Limiter, error) {
		opts := []floodgate.Option{floodgate.WithFailureMode(in.FailureMode), floodgate.WithLogger(logger)}
		if in.FailureMode == floodgate.FailToLocal {
			if local == nil {
				return nil, fmt.Errorf("fail-to-local needs Config.Local")
			}
			share := in.LocalShare
			if share <= 0 || share > 1 {
				share = 1
			}
			opts = append(opts, floodgate.WithLocalFallback(local, share))
		}
		return floodgate.NewLimiter(store, ps, opts...)
	}
	if len(reqs) > 0 {
		if r.requests, err = newLimiter(reqs); err != nil {
			return fail(err)
		}
	}
	if len(bytes) > 0 {
		if r.bytes, err = newLimiter(bytes); err != nil {
			return fail(err)
		}
	}
	return r, nil
}

// windowSeconds is w for RateLimit-Policy: whole seconds, at least 1.
func windowSeconds(d time.Duration) int64 {
	return max(1, ceilSeconds(d))
}

func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}
