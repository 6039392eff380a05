package floodgate

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Algorithm names the counting method of a Policy. The zero value is not a
// valid algorithm, so a Policy whose Algorithm was never set fails Validate.
type Algorithm uint8

const (
	// FixedWindow counts per window aligned to multiples of Window since the
	// Unix epoch (REQUIREMENTS A1). Up to 2 × Quota can pass across a boundary.
	FixedWindow Algorithm = iota + 1
	// SlidingWindowLog keeps one entry per admitted request: exact (A2).
	SlidingWindowLog
	// SlidingWindowCounter weights the previous window's count by the part of
	// it still inside the sliding window (A3). The recommended default.
	SlidingWindowCounter
	// TokenBucket refills Quota tokens per Window into a bucket of Burst (A4).
	TokenBucket
	// GCRA is the generic cell rate algorithm (theoretical arrival time); it
	// admits exactly what TokenBucket admits for the same policy.
	GCRA
	// AnchoredWindow counts per window of Window that each key opens with
	// the first request it is charged for, not aligned to the epoch: keys
	// do not all reset at once. Up to 2 × Quota can pass across the end of
	// one key's window, as with FixedWindow.
	AnchoredWindow
)

var algorithmNames = [...]string{
	FixedWindow:          "fixed-window",
	SlidingWindowLog:     "sliding-window-log",
	SlidingWindowCounter: "sliding-window-counter",
	TokenBucket:          "token-bucket",
	GCRA:                 "gcra",
	AnchoredWindow:       "anchored-window",
}

// Algorithms returns every algorithm, in the order of their constants: the
// one list that stores check themselves against when they are built and
// that every conformance suite loops over, so an algorithm added here and
// missed by a store fails loudly (docs/ARCHITECTURE.md, "Extension
// points"). The slice is the caller's.
func Algorithms() []Algorithm {
	all := make([]Algorithm, 0, len(algorithmNames)-1)
	for a := range algorithmNames[1:] {
		all = append(all, Algorithm(a+1))
	}
	return all
}

// String returns the algorithm's name as used in configuration, e.g.
// "sliding-window-counter".
func (a Algorithm) String() string {
	if a == 0 || int(a) >= len(algorithmNames) {
		return fmt.Sprintf("algorithm(%d)", uint8(a))
	}
	return algorithmNames[a]
}

// ParseAlgorithm is the inverse of Algorithm.String. It returns a
// *PolicyError for an unknown name.
func ParseAlgorithm(s string) (Algorithm, error) {
	for a, name := range algorithmNames {
		if a != 0 && name == s {
			return Algorithm(a), nil
		}
	}
	names := algorithmNames[1:]
	want := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	return 0, &PolicyError{Msg: fmt.Sprintf("unknown algorithm %q (want %s)", s, want)}
}

// MarshalText implements encoding.TextMarshaler.
func (a Algorithm) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *Algorithm) UnmarshalText(b []byte) error {
	v, err := ParseAlgorithm(string(b))
	*a = v
	return err
}

// Unit is what a policy's Quota counts: the quota units of
// draft-ietf-httpapi-ratelimit-headers-11 §3.1.2. The zero value is Requests.
type Unit uint8

const (
	Requests     Unit = iota // "requests": each request costs 1 by default
	ContentBytes             // "content-bytes": the cost is the request body size
)

// In-flight caps ("concurrent-requests" in draft-11) are not a rate, so
// they are not a Unit: see Concurrency.

var unitNames = [...]string{Requests: "requests", ContentBytes: "content-bytes"}

// String returns the unit's draft-11 name, e.g. "content-bytes".
func (u Unit) String() string {
	if int(u) >= len(unitNames) {
		return fmt.Sprintf("unit(%d)", uint8(u))
	}
	return unitNames[u]
}

// ParseUnit is the inverse of Unit.String; "" means Requests.
func ParseUnit(s string) (Unit, error) {
	if s == "" {
		return Requests, nil
	}
	for u, name := range unitNames {
		if name == s {
			return Unit(u), nil
		}
	}
	if s == "concurrent-requests" {
		return 0, &PolicyError{Msg: "concurrent-requests is not a rate: cap requests in flight with a Concurrency instead"}
	}
	return 0, &PolicyError{Msg: fmt.Sprintf("unknown unit %q (want requests or content-bytes)", s)}
}

// MarshalText implements encoding.TextMarshaler.
func (u Unit) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (u *Unit) UnmarshalText(b []byte) error {
	v, err := ParseUnit(string(b))
	*u = v
	return err
}

// Policy is one named quota: at most Quota units per Window for each
// partition key.
type Policy struct {
	// Name identifies the policy in headers (the RateLimit-Policy item name),
	// metrics and store keys. 1–64 characters from [A-Za-z0-9_.-].
	Name string
	// Algorithm is how usage is counted.
	Algorithm Algorithm
	// Quota is the number of units allowed per Window (q in RateLimit-Policy).
	Quota int64
	// Window is the span the quota applies to (w). At least 1 ms; the
	// algorithms work in whole microseconds, so sub-microsecond parts are
	// ignored.
	Window time.Duration
	// Burst is the bucket capacity of TokenBucket and GCRA: how many units may
	// pass at once after an idle period. 0 means Quota. The window algorithms
	// have no burst, so Validate rejects a Burst on them rather than ignore it.
	Burst int64
	// Unit is what Quota counts: which part of a Cost the policy is
	// charged (Cost.Of).
	Unit Unit
	// Calendar, for a FixedWindow only, counts per calendar period (a
	// day, week, month, year or billing period in a time zone) instead of
	// per Window since the epoch; nil for none.
	Calendar *Calendar
}

// maxExact bounds Capacity × Window in microseconds for the algorithms that
// multiply the two. The Redis scripts compute in Lua numbers (IEEE doubles),
// which hold integers exactly only up to 2^53; staying below it keeps both
// stores exact and identical.
const maxExact = 1 << 53

// Capacity is the most units the policy can admit at one instant: Burst
// for TokenBucket and GCRA (Quota when Burst is 0), Quota otherwise. A cost
// above it can never be admitted (ErrCostExceedsQuota).
func (p Policy) Capacity() int64 {
	if p.Burst > 0 && (p.Algorithm == TokenBucket || p.Algorithm == GCRA) {
		return p.Burst
	}
	return p.Quota
}

// Scaled returns p with Quota and Burst multiplied by share (0 < share ≤
// 1), rounded down but at least 1: one instance's part of a policy that
// several enforce together, as FailToLocal does while the store fails.
func (p Policy) Scaled(share float64) Policy {
	p.Quota = max(1, int64(float64(p.Quota)*share))
	if p.Burst > 0 {
		p.Burst = max(1, int64(float64(p.Burst)*share))
	}
	return p
}

// PolicyError is the error of Validate, ParseAlgorithm, ParseUnit,
// Concurrency.Validate and ValidateLimits: which limit, which of its
// fields and what is wrong, so that a reader of a configuration file can
// point at the line. It wraps ErrInvalidPolicy.
type PolicyError struct {
	Kind  string // "policy" or "concurrency"; "" when no one limit is at fault
	Name  string // the limit's name, as given
	Field string // "name", "algorithm", "unit", "quota", "window", "burst", "calendar" or "max"; "" for the limit as a whole
	Msg   string // what is wrong, without the field's name: "must be positive, got 0"
}

// Error formats as `floodgate: invalid policy: policy "api": quota must
// be positive, got 0`.
func (e *PolicyError) Error() string { return ErrInvalidPolicy.Error() + ": " + e.Detail() }

// Detail is Error without the package's prefix: `policy "api": quota
// must be positive, got 0`.
func (e *PolicyError) Detail() string {
	var b strings.Builder
	if e.Kind != "" {
		fmt.Fprintf(&b, "%s %q: ", e.Kind, e.Name)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteByte(' ')
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInvalidPolicy) hold.
func (e *PolicyError) Unwrap() error { return ErrInvalidPolicy }

// Validate reports whether the policy can be enforced. The error is a
// *PolicyError naming the policy and the field at fault; when several of
// quota, window and burst are at fault, one *PolicyError per field, joined
// (errors.Join; errors.As finds the first).
func (p Policy) Validate() error {
	fail := func(field, format string, args ...any) error {
		return &PolicyError{Kind: "policy", Name: p.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if msg := validName(p.Name); msg != "" {
		return fail("name", "%s", msg)
	}
	if int(p.Algorithm) >= len(algorithmNames) {
		return fail("", "unknown algorithm %d", p.Algorithm)
	}
	if int(p.Unit) >= len(unitNames) {
		return fail("", "unknown unit %d", p.Unit)
	}
	if p.Algorithm == 0 {
		return fail("", "no algorithm set (want one of %s)", strings.Join(algorithmNames[1:], ", "))
	}
	if p.Calendar != nil {
		if msg := p.Calendar.check(&p); msg != "" {
			return fail("calendar", "%s", msg)
		}
	}
	// The fields' own checks, all reported at once.
	var errs []error
	if p.Quota <= 0 {
		errs = append(errs, fail("quota", "must be positive, got %d", p.Quota))
	}
	if p.Window < time.Millisecond {
		errs = append(errs, fail("window", "must be at least 1ms, got %v", p.Window))
	}
	if p.Burst < 0 {
		errs = append(errs, fail("burst", "must not be negative, got %d", p.Burst))
	} else if p.Burst > 0 && p.Algorithm != TokenBucket && p.Algorithm != GCRA {
		errs = append(errs, fail("burst", "applies to token-bucket and gcra only, not %s (use a second, shorter policy for a burst limit)", p.Algorithm))
	}
	switch len(errs) {
	case 0:
	case 1:
		return errs[0]
	default:
		return errors.Join(errs...)
	}
	switch p.Algorithm {
	case SlidingWindowCounter, TokenBucket, GCRA:
		if w := p.Window.Microseconds(); p.Capacity() > maxExact/w {
			return fail("", "capacity %d × window %v exceeds 2^53 µs·units, beyond exact arithmetic; use a shorter window or the fixed-window algorithm", p.Capacity(), p.Window)
		}
	}
	return nil
}

// validName accepts the characters that are safe unquoted in a header's
// sf-string, a Prometheus label value and a Redis key alike. It returns
// what is wrong with s, or "".
func validName(s string) string {
	if s == "" {
		return "is empty"
	}
	if len(s) > 64 {
		return fmt.Sprintf("is %d bytes long, at most 64 allowed", len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Sprintf("has character %q at %d; use letters, digits, '_', '-' or '.'", c, i)
		}
	}
	return ""
}

// ValidatePolicies checks each policy and that names are unique, since names
// link RateLimit items to RateLimit-Policy items and key the store. Errors
// are *PolicyError.
func ValidatePolicies(policies []Policy) error {
	if len(policies) == 0 {
		return &PolicyError{Msg: "no policies"}
	}
	return ValidateLimits(policies, nil)
}

// ValidateLimits checks a set enforced together: each policy and cap
// valid, and no name used twice, since policies and caps share the names
// of RateLimit items. An empty set is valid. Errors are *PolicyError.
func ValidateLimits(policies []Policy, caps []Concurrency) error {
	seen := make(map[string]string, len(policies)+len(caps))
	twice := func(kind, name string) error {
		if other, ok := seen[name]; ok {
			if other == kind {
				return &PolicyError{Msg: fmt.Sprintf("%s name %q used twice", kind, name)}
			}
			return &PolicyError{Msg: fmt.Sprintf("%q names both a policy and a concurrency cap", name)}
		}
		seen[name] = kind
		return nil
	}
	for _, p := range policies {
		if err := p.Validate(); err != nil {
			return err
		}
		if err := twice("policy", p.Name); err != nil {
			return err
		}
	}
	for _, c := range caps {
		if err := c.Validate(); err != nil {
			return err
		}
		if err := twice("concurrency", c.Name); err != nil {
			return err
		}
	}
	return nil
}

// CheckCost returns ErrInvalidCost for a negative cost, an unknown Kind
// or a Post above MaxPost, and, for an Admit or a Refund,
// ErrCostExceedsQuota when the cost in some policy's unit is above its
// Capacity: such a request could never pass, so waiting would not help
// (and no admitted cost is larger, to refund). Stores call it before
// touching any state.
func CheckCost(cost Cost, policies []Policy) error {
	switch {
	case cost.Requests < 0:
		return fmt.Errorf("%w: %d requests; a cost is at least 0", ErrInvalidCost, cost.Requests)
	case cost.ContentBytes < 0:
		return fmt.Errorf("%w: %d content bytes; a cost is at least 0", ErrInvalidCost, cost.ContentBytes)
	case cost.Kind > Refund:
		return fmt.Errorf("%w: unknown cost kind %d", ErrInvalidCost, cost.Kind)
	case cost.Kind == Post:
		if cost.Requests > MaxPost || cost.ContentBytes > MaxPost {
			return fmt.Errorf("%w: a post-charge is at most 2^53 in each unit", ErrInvalidCost)
		}
		return nil
	}
	for i := range policies { // by index: a Policy is too large to copy on every request
		if p := &policies[i]; cost.Of(p.Unit) > p.Capacity() {
			return fmt.Errorf("%w: cost %d %s, policy %q admits at most %d at once", ErrCostExceedsQuota, cost.Of(p.Unit), p.Unit, p.Name, p.Capacity())
		}
	}
	return nil
}
