package engine

import (
	"context"
	"strings"

	"github.com/floodgate/floodgate"
)

// Step is one rule and one request of a decision over several partition
// keys, such as the descriptors of one Envoy rate limit request.
type Step struct {
	Rule    *Compiled
	Request Request
}

// DecideAll decides steps all or nothing, writing each step's Outcome to
// outs[i] (len(outs) ≥ len(steps)), and reports whether every step was
// admitted. Shadow rules never refuse the others.
//
// Each step is its own key (on a Redis Cluster, its own slot), so no one
// store call can spend them together. With more than one enforcing step,
// DecideAll first peeks at every enforcing step's own limits: if one
// would refuse the request's cost, nothing is spent, the refusing step's
// Outcome is Denied (reported to the Observer like a decision) and the
// others hold their peeks. Only when all fit does it Decide each step in
// order. Requests for the same keys that land between the peeks and the
// takes can still make a later step refuse after earlier ones spent: the
// remaining steps are then not decided (their Outcomes hold the peeks)
// and the earlier ones stay spent. That window is one store round trip
// per step wide.
//
// A step whose rule has concurrency caps or plans is decided as Decide
// does, but its peek sees the rule's rate policies only; the caller must
// Release every Outcome.
func DecideAll(ctx context.Context, steps []Step, outs []Outcome) bool {
	enforcing := 0
	for _, st := range steps {
		if st.Rule.mode != Shadow {
			enforcing++
		}
	}
	if enforcing > 1 {
		if !peekAll(ctx, steps, outs) {
			return false
		}
	}
	ok := true
	for i, st := range steps {
		if !ok && st.Rule.mode != Shadow {
			continue // outs[i] holds its peek: nothing more is spent
		}
		outs[i] = st.Rule.Decide(ctx, st.Request)
		if outs[i].Verdict != Allowed {
			ok = false
		}
	}
	return ok
}

// peekAll peeks at every step into outs and reports whether all enforcing
// ones fit their cost. A peek the store cannot answer counts as fitting:
// the Decide that follows meets the same failure and answers it by the
// rule's failure mode.
func peekAll(ctx context.Context, steps []Step, outs []Outcome) bool {
	// Steps of one rule and key spend one counter: what must fit is their
	// costs together (a descriptor sent twice, two hits_addend values).
	type counter struct {
		rule *Compiled
		key  string
	}
	together := make(map[counter]floodgate.Cost, len(steps))
	for _, st := range steps {
		c, k := together[counter{st.Rule, st.Request.Key}], st.Request.Cost
		together[counter{st.Rule, st.Request.Key}] = floodgate.Cost{Requests: c.Requests + k.Requests, ContentBytes: c.ContentBytes + k.ContentBytes}
	}
	refused := -1
	for i, st := range steps {
		outs[i] = st.Rule.Peek(ctx, st.Request.Key)
		req := st.Request
		req.Cost = together[counter{st.Rule, req.Key}]
		if refused < 0 && st.Rule.mode != Shadow && outs[i].Verdict != Unavailable && !fits(&outs[i], req) {
			refused = i
		}
	}
	if refused < 0 {
		return true
	}
	st, out := steps[refused], &outs[refused]
	out.Verdict = Denied
	out.summarize()
	st.Rule.report(out, st.Request.Key, timing{}, false)
	return false
}

// fits reports whether req's cost fits every rate of a peek, marking the
// rates it does not fit as refusing (retry: when the peek's limit resets).
func fits(out *Outcome, req Request) bool {
	ok := true
	for i := range out.rates {
		r := &out.rates[i]
		if r.Remaining >= req.Cost.Of(r.Policy.Unit) && r.Allowed {
			continue
		}
		r.Allowed = false
		if r.RetryAfter == 0 {
			r.RetryAfter = r.ResetAfter
		}
		ok = false
	}
	return ok
}

// Merge combines the Outcomes of one multi-key decision into one, for
// the response fields: every non-shadow Outcome's limits and Field, the
// first Verdict that is not Allowed, the longest RetryAfter and a Summary
// over all the limits. It carries no slots: Release the Outcomes themselves.
func Merge(outs []Outcome) Outcome {
	m := Outcome{Summary: -1}
	var fields []string
	for i := range outs {
		o := &outs[i]
		if m.Verdict == Allowed && o.Verdict != Allowed {
			m.Verdict, m.Err = o.Verdict, o.Err
		}
		m.Degraded = m.Degraded || o.Degraded
		m.RetryAfter = max(m.RetryAfter, o.RetryAfter)
		if o.Shadow || o.Len() == 0 {
			continue
		}
		m.caps = append(m.caps, o.caps...)
		m.rates = append(m.rates, o.rates...)
		if o.Field != "" {
			fields = append(fields, o.Field)
		}
	}
	m.Field = strings.Join(fields, ", ")
	m.summarize()
	return m
}
