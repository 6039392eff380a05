package floodgate

import (
	"context"
	"errors"
	"fmt"
	"time"
)

var (
	// ErrInvalidPolicy is wrapped by every policy validation error.
	ErrInvalidPolicy = errors.New("floodgate: invalid policy")
	// ErrInvalidCost is returned for a negative cost.
	ErrInvalidCost = errors.New("floodgate: invalid cost")
	// ErrCostExceedsQuota is returned when a cost is above a policy's
	// capacity: the request can never pass, so it is an error, not a wait.
	ErrCostExceedsQuota = errors.New("floodgate: cost exceeds quota")
	// ErrStoreUnavailable wraps a store's failure: the connection's error,
	// an error reply, or a timeout (which also satisfies
	// errors.Is(err, context.DeadlineExceeded)).
	ErrStoreUnavailable = errors.New("floodgate: store unavailable")
	// ErrInvalidOption is wrapped by every constructor's refusal of its
	// arguments other than policies: a nil store or client, an option out
	// of range, or two options that contradict each other.
	ErrInvalidOption = errors.New("floodgate: invalid option")
	// ErrWaitExceedsDeadline is returned by Wait when the request could not
	// be admitted before the context's deadline: Wait refuses at once
	// instead of sleeping in vain.
	ErrWaitExceedsDeadline = errors.New("floodgate: wait would exceed the context deadline")
)

// Result is one policy's answer within a Decision.
type Result struct {
	// Policy is the policy this result is for.
	Policy Policy
	// Allowed reports whether this policy alone would admit the request.
	Allowed bool
	// Remaining is the units still available under the policy after this
	// request (before it, when the request was denied or was a peek); ≥ 0.
	Remaining int64
	// ResetAfter is the effective window t of draft-11 §3.2: the time over
	// which Remaining applies, i.e. until more quota next becomes available
	// (the algorithm package documents it per algorithm). ≥ 0.
	ResetAfter time.Duration
	// RetryAfter is, for a denied request, the earliest time after which the
	// same cost fits this policy if nothing else is spent meanwhile; 0 when
	// allowed.
	RetryAfter time.Duration
	// FullAfter is, for a sliding window counter, the time until its whole
	// quota is free again if nothing more is spent (X-RateLimit-Reset); 0
	// when it is, and for the other algorithms. The counter's ResetAfter
	// moves earlier the more a window spends (a larger count decays
	// faster), which a reset must not.
	FullAfter time.Duration
	// Cached is true when the store answered from memory a denial it had
	// already seen, without a round trip (redisstore.WithNearCache); the
	// same for every Result of one call. Metrics keep that time apart from
	// the store's.
	Cached bool
}

// Decision is the answer for one request across all of its policies.
type Decision struct {
	// Allowed is true only if every policy admitted the request; a denied
	// request consumed nothing from any policy.
	Allowed bool
	// Policy is the policy the scalar fields below report: when denied, the
	// denying policy with the longest RetryAfter; when allowed, the policy
	// closest to its limit (least remaining share of its quota).
	Policy Policy
	// Remaining, ResetAfter and RetryAfter are those of Policy's Result,
	// except RetryAfter, which is the longest over all denying policies.
	Remaining  int64
	ResetAfter time.Duration
	RetryAfter time.Duration
	// Results holds one Result per policy, in the order the policies were given.
	Results []Result
	// Degraded is true when the store failed and the Limiter's failure mode
	// answered instead (FailOpen or FailToLocal).
	Degraded bool
}

// Violated returns the names of the policies that denied the request.
func (d Decision) Violated() []string {
	var names []string
	for _, r := range d.Results {
		if !r.Allowed {
			names = append(names, r.Policy.Name)
		}
	}
	return names
}

// summarize fills the scalar fields of d from d.Results.
func (d *Decision) summarize() {
	d.Allowed = true
	best := -1
	for i := range d.Results { // by index: a Result is too large to copy on every request
		r := &d.Results[i]
		if !r.Allowed {
			if d.Allowed || r.RetryAfter > d.RetryAfter {
				best = i
				d.RetryAfter = r.RetryAfter
			}
			d.Allowed = false
		}
	}
	if d.Allowed {
		// Closest to its limit: the smallest Remaining/Quota, compared as
		// cross products to stay in integers.
		for i := range d.Results {
			r := &d.Results[i]
			if best < 0 || r.Remaining*d.Results[best].Policy.Quota < d.Results[best].Remaining*r.Policy.Quota {
				best = i
			}
		}
	}
	if best >= 0 {
		r := &d.Results[best]
		d.Policy, d.Remaining, d.ResetAfter = r.Policy, r.Remaining, r.ResetAfter
	}
}

// Cost is what one request spends, in each unit of quota: policies whose
// Unit is Requests are charged Requests, ContentBytes policies
// ContentBytes. Both are ≥ 0; the zero Cost is a peek.
type Cost struct {
	Requests     int64
	ContentBytes int64
	// Kind is how the cost is charged: Admit (the zero value) spends it
	// only if it fits; Post always counts it; Refund gives it back.
	Kind CostKind
	// At is, for a Refund, when the refunded cost was admitted: the window
	// algorithms give it back only to the window it was spent in (a
	// window that has ended was charged and is gone). It is read on the
	// caller's clock, so a skew between that clock and the store's moves a
	// refund admitted within the skew of a window's end to the other
	// window. Ignored by Admit and Post.
	At time.Time
}

// CostKind says how a Store charges a Cost.
type CostKind uint8

const (
	// Admit spends the cost only if every policy has room for it, all or
	// nothing (the Store.Take of a request before its work).
	Admit CostKind = iota
	// Post counts the cost whatever the quota: a charge that arrives after
	// the work (tokens an answer used, rows it exported). A key past its
	// quota is left in debt: the next requests are refused until the
	// debt is repaid, by the window's end for the window algorithms and
	// by refill for the bucket ones (package algorithm, "Post-charges").
	// Every policy charged reports Allowed; a post-charge may exceed a
	// policy's capacity, up to MaxPost.
	Post
	// Refund gives back a cost admitted at Cost.At, never below an empty
	// state: the difference when a request used less than it reserved.
	// Every policy reports its standing after the refund, Allowed.
	Refund
)

// MaxPost is the largest post-charge in one unit: 2^53, where the Redis
// store's numbers stop being exact. The debt a key can hold is bounded the
// same way (package algorithm, "Post-charges").
const MaxPost = 1 << 53

// Of returns the cost in unit u.
func (c Cost) Of(u Unit) int64 {
	if u == ContentBytes {
		return c.ContentBytes
	}
	return c.Requests
}

// IsPeek reports whether c is an Admit that spends nothing in any unit.
func (c Cost) IsPeek() bool { return c.Requests == 0 && c.ContentBytes == 0 && c.Kind == Admit }

// Store keeps rate-limit state. Implementations must make each Take atomic
// across all of its policies, also against other processes sharing the
// store (REQUIREMENTS A5), and must give the decisions of package algorithm,
// which the storetest conformance suite checks. A policy's state is
// identified by the partition key, the policy's Name and its Algorithm, so
// one name used with two algorithms keeps two states.
type Store interface {
	// Take spends cost of every policy for key, each policy in its own
	// unit (Cost.Of), all or nothing: if any policy denies, nothing is
	// spent from any. It writes one Result per policy into results
	// (len(results) == len(policies)), leaving Result.Policy to the
	// caller. A policy charged 0 reports its standing and never denies,
	// unless the whole cost is 0: that is a peek, which spends nothing and
	// whose Allowed says whether a cost of 1 would pass.
	//
	// Errors: ErrInvalidCost, ErrCostExceedsQuota (see CheckCost), or
	// ErrStoreUnavailable wrapping the cause, or ctx's error.
	Take(ctx context.Context, key string, cost Cost, policies []Policy, results []Result) error
	// Reset forgets the state of key under the given policies.
	Reset(ctx context.Context, key string, policies []Policy) error
}

// Concurrency caps the requests in flight at once per partition key: not
// a rate, so it has no window and no algorithm. It is the
// "concurrent-requests" quota unit of draft-11 §3.1.2.
type Concurrency struct {
	// Name identifies the cap in headers, metrics and store keys, with the
	// rules of Policy.Name; it shares their namespace within a rule.
	Name string
	// Max is how many requests may be in flight at once; ≥ 1.
	Max int64
}

// Validate reports whether c can be enforced. The error wraps
// ErrInvalidPolicy: a *PolicyError naming c and the field at fault.
func (c Concurrency) Validate() error {
	if msg := validName(c.Name); msg != "" {
		return &PolicyError{Kind: "concurrency", Name: c.Name, Field: "name", Msg: msg}
	}
	if c.Max <= 0 {
		return &PolicyError{Kind: "concurrency", Name: c.Name, Field: "max", Msg: fmt.Sprintf("must be positive, got %d", c.Max)}
	}
	return nil
}

// Scaled returns c with Max multiplied by share (0 < share ≤ 1), rounded
// down but at least 1: one instance's part of a cap several enforce.
func (c Concurrency) Scaled(share float64) Concurrency {
	c.Max = max(1, int64(float64(c.Max)*share))
	return c
}

// Slots holds in-flight slots: at most Concurrency.Max requests per key at
// once. A door takes a slot before the request's work runs and gives it
// back when the work ends.
type Slots interface {
	// Acquire takes one slot of c for key. When ok is false the slots are
	// all taken and nothing is held. When ok is true the caller must call
	// release (once; further calls do nothing); a slot not released within
	// lease (its holder crashed) frees itself, in stores shared across
	// processes. free is the number of slots left after this call.
	//
	// Errors: ErrStoreUnavailable wrapping the cause, or ctx's error.
	Acquire(ctx context.Context, key string, c Concurrency, lease time.Duration) (release func(), free int64, ok bool, err error)
}
