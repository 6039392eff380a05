package floodgate

import (
	"context"
	"errors"
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
	// ErrStoreUnavailable wraps a store's connection failure or timeout.
	ErrStoreUnavailable = errors.New("floodgate: store unavailable")
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

// Store keeps rate-limit state. Implementations must make each Take atomic
// across all of its policies, also against other processes sharing the
// store (REQUIREMENTS A5), and must give the decisions of package algorithm,
// which the storetest conformance suite checks.
type Store interface {
	// Take spends cost units of every policy for key, all or nothing: if any
	// policy denies, nothing is spent from any. It writes one Result per
	// policy into results (len(results) == len(policies)), leaving
	// Result.Policy to the caller. Cost 0 is a peek: it reports without
	// spending, and Allowed says whether a cost of 1 would pass.
	//
	// Errors: ErrInvalidCost, ErrCostExceedsQuota (see CheckCost), or
	// ErrStoreUnavailable wrapping the cause, or ctx's error.
	Take(ctx context.Context, key string, cost int64, policies []Policy, results []Result) error
	// Reset forgets the state of key under the given policies.
	Reset(ctx context.Context, key string, policies []Policy) error
}

// Slots holds in-flight slots for ConcurrentRequests policies: at most
// Policy.Quota requests per key at once. The HTTP middleware takes a slot
// before the handler runs and gives it back when the handler returns.
type Slots interface {
	// Acquire takes one slot of p for key. When ok is false the slots are
	// all taken and nothing is held. When ok is true the caller must call
	// release exactly once; a slot not released within lease (its holder
	// crashed) frees itself, in stores shared across processes. free is the
	// number of slots left after this call.
	Acquire(ctx context.Context, key string, p Policy, lease time.Duration) (release func(), free int64, ok bool, err error)
}
