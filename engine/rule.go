package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/header"
)

// Mode is what a rule does with a denied request.
type Mode uint8

const (
	// Enforce refuses a denied request.
	Enforce Mode = iota
	// Shadow decides and reports, but admits every request and asks doors
	// to send no rate-limit fields: for trying a rule on real traffic.
	Shadow
	// Throttle holds a denied request until its policies admit it, in
	// arrival order per key, up to the rule's MaxDelay; a request that
	// cannot fit within MaxDelay behind the ones ahead of it is refused at
	// once (REQUIREMENTS T1).
	Throttle
)

var modeNames = [...]string{Enforce: "enforce", Shadow: "shadow", Throttle: "throttle"}

// String returns "enforce", "shadow" or "throttle".
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseMode is the inverse of Mode.String; "" means Enforce.
func ParseMode(s string) (Mode, error) {
	if s == "" {
		return Enforce, nil
	}
	for m, name := range modeNames {
		if name == s {
			return Mode(m), nil
		}
	}
	return 0, fmt.Errorf("engine: unknown mode %q (want enforce, shadow or throttle)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseMode.
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := ParseMode(string(b))
	*m = v
	return err
}

// Rule is a named set of limits and what to do with their denials.
type Rule struct {
	// Name labels the rule in events, metrics and logs; required.
	Name string
	// Policies are the rate policies, all or nothing (REQUIREMENTS K3):
	// each is charged the request's cost in its own unit.
	Policies []floodgate.Policy
	// Concurrency caps requests in flight per key.
	Concurrency []floodgate.Concurrency
	// Mode is Enforce (default), Shadow or Throttle.
	Mode Mode
	// MaxDelay bounds how long Throttle holds a request; required then, at
	// most MaxThrottleDelay, and refused in the other modes (where it would
	// do nothing).
	MaxDelay time.Duration
	// FailureMode is what answers while the store fails (S3); default
	// FailClosed.
	FailureMode floodgate.FailureMode
	// LocalShare is the share of each quota and cap enforced locally with
	// FailToLocal (e.g. 1/replicas); in (0, 1], 0 meaning 1.
	LocalShare float64
	// Lease bounds how long a crashed holder keeps a slot in a shared
	// store; default 1 minute, at least MinLease.
	Lease time.Duration
}

// Compiled is a Rule made ready to decide requests. Build it with
// Engine.Compile; it is safe for concurrent use.
type Compiled struct {
	e        *Engine
	name     string
	mode     Mode
	maxDelay time.Duration
	failure  floodgate.FailureMode
	share    float64
	lease    time.Duration

	static *set     // the rule's own limits; nil for a rule with none
	sets   sync.Map // plan or reduction name → *set, rebuilt when its limits change
	queues queues   // throttle waiters per key
}

// set enforces one policy set and cap list: a Limiter over the rates, and
// the slots.
type set struct {
	policies []floodgate.Policy
	caps     []floodgate.Concurrency
	limiter  *floodgate.Limiter // nil with no policies
	slots    floodgate.Slots    // nil with no caps
	local    floodgate.Slots    // with FailToLocal: slots while the store fails
	localCap []floodgate.Concurrency
	// field is the RateLimit-Policy value, the same on every response.
	field string
}

// MinLease is the shortest Rule.Lease: a slot must outlive the request
// that holds it, or the cap stops counting that request.
const MinLease = time.Second

// MaxThrottleDelay is the longest Rule.MaxDelay: a throttled request holds
// a connection and a goroutine while it waits, and a client told to wait
// longer is better refused with the Retry-After.
const MaxThrottleDelay = time.Hour

// Validate checks what Compile checks of r without an Engine. Errors
// name the rule and wrap the fault: a name with a control character, an
// invalid policy or cap (a
// *floodgate.PolicyError), two limits of one name, an unknown mode or
// failure mode, Throttle without a MaxDelay or with one above
// MaxThrottleDelay, a MaxDelay outside Throttle, a share outside (0, 1], a
// negative lease.
func (r Rule) Validate() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("engine: rule %q: %w", r.Name, fmt.Errorf(format, args...))
	}
	switch {
	case r.Name == "":
		return fmt.Errorf("engine: a rule needs a name")
	case strings.ContainsFunc(r.Name, unicode.IsControl): // it labels metrics and logs
		return fmt.Errorf("engine: %w", fmt.Errorf("rule name %q holds a control character", r.Name))
	case r.Mode > Throttle:
		return fail("unknown mode %d", r.Mode)
	case r.Mode == Throttle && r.MaxDelay <= 0:
		return fail("throttle mode needs a positive max delay, e.g. 2s")
	case r.MaxDelay < 0:
		return fail("negative max delay %v", r.MaxDelay)
	case r.MaxDelay > MaxThrottleDelay:
		return fail("max delay %v is above %v: refuse instead, with the Retry-After", r.MaxDelay, MaxThrottleDelay)
	case r.Mode != Throttle && r.MaxDelay > 0:
		return fail("a max delay applies to throttle mode only")
	case r.FailureMode > floodgate.FailToLocal:
		return fail("unknown failure mode %d", r.FailureMode)
	case !(r.LocalShare >= 0 && r.LocalShare <= 1): // NaN too
		return fail("local share %v is outside (0, 1] (0: the default, 1)", r.LocalShare)
	case r.Lease < 0:
		return fail("negative slot lease %v", r.Lease)
	case r.Lease > 0 && r.Lease < MinLease:
		return fail("slot lease %v is under %v: a request's slot would expire while it runs", r.Lease, MinLease)
	}
	if err := floodgate.ValidateLimits(r.Policies, r.Concurrency); err != nil {
		return fmt.Errorf("engine: rule %q: %w", r.Name, err)
	}
	return nil
}

// Compile validates r (Validate) and readies it. Beyond Validate, it
// refuses FailToLocal without Config.Local and caps over a store without
// slots.
func (e *Engine) Compile(r Rule) (*Compiled, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if r.FailureMode == floodgate.FailToLocal && e.local == nil {
		return nil, fmt.Errorf("engine: rule %q: fail-to-local needs Config.Local", r.Name)
	}
	c := &Compiled{e: e, name: r.Name, mode: r.Mode, maxDelay: r.MaxDelay, failure: r.FailureMode, share: r.LocalShare, lease: r.Lease}
	if c.share == 0 {
		c.share = 1
	}
	if c.lease == 0 {
		c.lease = time.Minute
	}
	if len(r.Policies) > 0 || len(r.Concurrency) > 0 {
		s, err := c.build(r.Policies, r.Concurrency)
		if err != nil {
			return nil, fmt.Errorf("engine: rule %q: %w", r.Name, err)
		}
		c.static = s
	}
	return c, nil
}

// Name returns the rule's name.
func (c *Compiled) Name() string { return c.name }

// Mode returns the rule's mode.
func (c *Compiled) Mode() Mode { return c.mode }

// Policies returns the rule's own rate policies (not a plan's).
func (c *Compiled) Policies() []floodgate.Policy {
	if c.static == nil {
		return nil
	}
	return slices.Clone(c.static.policies)
}

// Reset forgets key's state under the rule's own policies (slots are
// not state: they end with their requests or leases).
func (c *Compiled) Reset(ctx context.Context, key string) error {
	if c.static == nil || c.static.limiter == nil {
		return nil
	}
	return c.static.limiter.Reset(ctx, BoundKey(key))
}

func (c *Compiled) build(policies []floodgate.Policy, caps []floodgate.Concurrency) (*set, error) {
	s := &set{policies: slices.Clone(policies), caps: slices.Clone(caps)}
	if err := floodgate.ValidateLimits(policies, caps); err != nil {
		return nil, err // plans and reductions come here without Validate
	}
	if len(policies) > 0 {
		opts := []floodgate.Option{floodgate.WithLogger(c.e.logger), floodgate.WithClock(c.e.clock), floodgate.WithBreaker(c.e.breaker)}
		if c.failure == floodgate.FailToLocal {
			opts = append(opts, floodgate.WithLocalFallback(c.e.local, c.share))
		} else {
			opts = append(opts, floodgate.WithFailureMode(c.failure))
		}
		l, err := floodgate.NewLimiter(c.e.store, s.policies, opts...)
		if err != nil {
			return nil, err
		}
		s.limiter = l
	}
	if len(caps) > 0 {
		var ok bool
		if s.slots, ok = c.e.store.(floodgate.Slots); !ok {
			return nil, fmt.Errorf("concurrency caps need a store with slots, %T has none", c.e.store)
		}
		if c.failure == floodgate.FailToLocal {
			if s.local, ok = c.e.local.(floodgate.Slots); !ok {
				return nil, fmt.Errorf("fail-to-local with concurrency caps needs a Config.Local with slots, %T has none", c.e.local)
			}
			for _, k := range caps {
				s.localCap = append(s.localCap, k.Scaled(c.share))
			}
		}
	}
	field, err := PolicyField(s.policies, s.caps)
	if err != nil {
		return nil, err
	}
	s.field = field
	return s, nil
}

// setFor returns the set cached under name, building it on first use and
// again when its limits change (a plan edited, a reduction changed).
func (c *Compiled) setFor(name string, policies []floodgate.Policy, caps []floodgate.Concurrency) (*set, error) {
	if v, ok := c.sets.Load(name); ok {
		if s := v.(*set); slices.Equal(s.policies, policies) && slices.Equal(s.caps, caps) {
			return s, nil
		}
	}
	s, err := c.build(policies, caps)
	if err != nil {
		return nil, err
	}
	c.sets.Store(name, s)
	return s, nil
}

// PolicyField formats the RateLimit-Policy value of a set of limits: each
// policy's name, q, w in whole seconds (at least 1) and qu when not
// "requests"; each cap's name, q and qu="concurrent-requests", with no w
// (draft-11 §3.1). Errors: a name the field cannot carry.
func PolicyField(policies []floodgate.Policy, caps []floodgate.Concurrency) (string, error) {
	fields := make([]header.Policy, 0, len(policies)+len(caps))
	for _, p := range policies {
		fields = append(fields, header.Policy{Name: p.Name, Quota: p.Quota, Unit: p.Unit.String(), Window: header.Seconds(p.Window)})
	}
	for _, k := range caps {
		fields = append(fields, header.Policy{Name: k.Name, Quota: k.Max, Unit: header.UnitConcurrentRequests})
	}
	return header.FormatPolicy(fields)
}
