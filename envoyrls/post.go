package envoyrls

import (
	"context"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
)

// decidePost decides the steps of post-charged limits (RateLimit.PostCharge)
// before the others, writing step i's outcome to outs[i], and reports
// whether one of them refuses the request: the others then spend nothing
// (REQUIREMENTS K3). A post-charged limit counts every hit, refused or
// not, as envoyproxy/ratelimit does, so that a cost Envoy reports when a
// stream ends (apply_on_stream_done, whose answer it ignores) is never
// dropped; it is not part of the all-or-nothing of the others.
func decidePost(ctx context.Context, steps []step, outs []engine.Outcome) (refused bool) {
	for i := range steps {
		st := &steps[i]
		l := st.limit
		if l == nil || l.rule == nil || !l.post {
			continue
		}
		st.out = len(steps) + i
		if st.cost == 0 {
			outs[i], st.peeked = l.rule.Peek(ctx, st.key), true
		} else {
			outs[i], st.counted = countHit(ctx, l.rule, st.key, st.cost)
		}
		if _, _, over := st.standing(&outs[i]); over && !l.shadow && !l.quota {
			refused = true
		}
	}
	return refused
}

// countHit spends cost from rule's limit for key when it fits (one store
// call), else counts it anyway as a post-charge (a second call), leaving
// the key in debt; it reports whether it did the latter. A store failure
// counts nothing but on fail-to-local's local store: the Outcome says
// Unavailable, or Degraded under a failure mode.
func countHit(ctx context.Context, rule *engine.Compiled, key string, cost int64) (engine.Outcome, bool) {
	o := rule.Decide(ctx, engine.Request{Key: key, Cost: floodgate.Cost{Requests: cost}})
	if o.Verdict == engine.Unavailable || o.Verdict == engine.Allowed && (o.Summary < 0 || o.Item(o.Summary).Allowed) {
		return o, false // spent (or a failure mode answered), or not counted at all
	}
	// Refused, over its limit in shadow or quota mode, larger than the
	// whole limit (Invalid), or the key blocked: counted all the same.
	p := rule.Post(ctx, key, floodgate.Cost{Requests: cost})
	// Degraded with standings: fail-to-local counted it on the local store;
	// degraded without (fail-open): nothing was counted.
	return p, p.Verdict == engine.Allowed && (!p.Degraded || p.Summary >= 0)
}
