package envoyrls

import (
	"cmp"
	"context"
	"math"
	"strconv"
	"strings"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
)

// decide asks the engine about steps and writes the answer into resp.
func (s *Service) decide(ctx context.Context, steps []step, resp *response) error {
	var ebuf [4]engine.Step
	es := ebuf[:0] // decided together; the others are looked at or post-charged
	refuseAll := false
	for i := range steps {
		refuseAll = refuseAll || steps[i].refuses()
	}
	// A step's outcome is outs[i] when decided together, else
	// outs[len(steps)+i].
	var obuf [8]engine.Outcome
	outs := obuf[:]
	if n := 2 * len(steps); n > len(obuf) {
		outs = make([]engine.Outcome, n)
	}
	refuseAll = decidePost(ctx, steps, outs[len(steps):2*len(steps)]) || refuseAll
	for i := range steps {
		st := &steps[i]
		if st.limit == nil || st.limit.rule == nil || st.limit.post {
			continue
		}
		if st.cost == 0 || refuseAll {
			// A check only, or a request refused anyway: spend nothing,
			// and show what is left (REQUIREMENTS K3).
			st.out, st.peeked, st.refused = len(steps)+i, true, refuseAll
			continue
		}
		st.out = len(es)
		es = append(es, engine.Step{Rule: st.limit.rule, Request: engine.Request{Key: st.key, Cost: floodgate.Cost{Requests: st.cost}}})
	}
	if len(es) > 0 {
		engine.DecideAll(ctx, es, outs[:len(es)])
	}
	for i := range steps {
		if st := &steps[i]; st.peeked && !st.limit.post {
			outs[st.out] = st.limit.rule.Peek(ctx, st.key)
		}
	}
	resp.code = rlsv3.RateLimitResponse_OK
	for i := range steps {
		ds, err := s.status(&steps[i], outs)
		if err != nil {
			return err
		}
		if ds.code == rlsv3.RateLimitResponse_OVER_LIMIT {
			resp.code = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		resp.statuses = append(resp.statuses, ds)
	}
	switch {
	case s.opt.LimitHeaders != nil:
		resp.headers = s.limitHeaders(steps, resp.statuses, resp.headers)
	case s.opt.Fields.Style != engine.None && len(es) > 0 && !refuseAll:
		resp.headers = s.headers(outs[:len(es)], resp.headers)
	}
	return nil
}

// status is one descriptor's answer, as envoyproxy/ratelimit gives it: OK
// alone when no limit applies, OK with the largest remaining for an
// unlimited one; else the limit's code, remaining (0 when over) and
// duration_until_reset. A shadow-mode limit is OK whatever it says, and a
// quota-mode one over its limit is OK with remaining 0 and no reset.
func (s *Service) status(st *step, outs []engine.Outcome) (descStatus, error) {
	l := st.limit
	switch {
	case st.unlimited:
		return descStatus{code: rlsv3.RateLimitResponse_OK, remaining: math.MaxUint32}, nil
	case l == nil:
		return descStatus{code: rlsv3.RateLimitResponse_OK}, nil
	}
	ds := descStatus{code: rlsv3.RateLimitResponse_OK, limit: l}
	over := st.cost > 0 // requests_per_unit 0 (no rule): any spending is over
	var remaining int64
	var reset time.Duration
	if l.rule != nil {
		o := &outs[st.out]
		if o.CallerEnded() {
			// Envoy gave up on this call, or is about to: an answer now
			// would refuse in place of Envoy's own failure mode.
			return ds, grpcstatus.FromContextError(o.Err).Err()
		}
		if o.Verdict == engine.Unavailable && l.errorOnFailure && !st.refused {
			return ds, grpcstatus.Error(codes.Unavailable, "rate limit store unavailable")
		}
		remaining, reset, over = st.standing(o)
	}
	s.opt.Stats.observe(l, st.cost, !over, remaining)
	ds.remaining = uint32(min(remaining, math.MaxUint32))
	if reset <= 0 {
		w := l.policy.Window
		reset = w - time.Duration(s.opt.Now().UnixNano())%w
	}
	ds.reset, ds.hasReset = reset, true
	if over {
		ds.remaining = 0
		if l.quota && !l.shadow {
			st.quotaOver = true
			ds.hasReset = false
		} else if !l.shadow {
			ds.code = rlsv3.RateLimitResponse_OVER_LIMIT
		}
	}
	return ds, nil
}

// standing reads a step's outcome: what is left, until when, and whether
// the step is over its limit.
func (st *step) standing(o *engine.Outcome) (remaining int64, reset time.Duration, over bool) {
	if o.Summary >= 0 {
		it := o.Item(o.Summary)
		remaining, reset = it.Remaining, it.ResetAfter
		// A peek's Allowed says whether a cost of 1 fits.
		over = !it.Allowed || st.peeked && it.Remaining < st.cost
	}
	switch {
	case st.counted:
		over = true // the post-charge's standing is after the debt it made
	case st.cost == 0 && st.limit.post:
		over = o.Verdict != engine.Allowed // not one unit is left
	case st.cost == 0:
		over = false // a check only: these counters never pass the limit
	case o.Verdict == engine.Denied && st.peeked, o.Verdict == engine.Unavailable && st.refused:
	case o.Verdict != engine.Allowed:
		over = true
	}
	return remaining, reset, over
}

// dynamicMetadata is envoyproxy/ratelimit's response dynamic metadata for
// req (see Options.DynamicMetadata).
func dynamicMetadata(req *request, steps []step, resp *response) *structpb.Struct {
	descs := make([]*structpb.Value, 0, len(req.descriptors))
	for i := range req.descriptors {
		d := &req.descriptors[i]
		entries := make([]*structpb.Value, 0, d.n)
		for _, e := range req.entriesOf(d) {
			entries = append(entries, structpb.NewStringValue(string(e.key)+"="+string(e.value)))
		}
		f := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: entries})}
		if d.limit != nil {
			var o commonv3.RateLimitDescriptor_RateLimitOverride
			_ = proto.Unmarshal(d.limit, &o) // parse read it already
			f["limit"] = structpb.NewStringValue(prototext.MarshalOptions{}.Format(&o))
		}
		if d.hasHits {
			f["hitsAddend"] = structpb.NewNumberValue(float64(d.hits))
		}
		descs = append(descs, structpb.NewStructValue(&structpb.Struct{Fields: f}))
	}
	fields := map[string]*structpb.Value{
		"domain":      structpb.NewStringValue(string(req.domain)),
		"descriptors": structpb.NewListValue(&structpb.ListValue{Values: descs}),
	}
	if h := req.hitsAddend; h != 0 {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(h))
	}
	var violations []*structpb.Value
	enabled := false
	for i, st := range steps {
		enabled = enabled || st.limit != nil && st.limit.quota
		if st.quotaOver {
			violations = append(violations, structpb.NewNumberValue(float64(i)))
		}
	}
	if len(violations) > 0 {
		fields["quotaModeViolations"] = structpb.NewListValue(&structpb.ListValue{Values: violations})
	}
	fields["quotaModeEnabled"] = structpb.NewBoolValue(enabled)
	return &structpb.Struct{Fields: fields}
}

// limitHeaders appends to hv envoyproxy/ratelimit's headers of a response
// (see LimitHeaders), or none when no descriptor has a limit.
func (s *Service) limitHeaders(steps []step, statuses []descStatus, hv []headerValue) []headerValue {
	var chosen *descStatus
	var window time.Duration
	least := uint32(math.MaxUint32)
	for i := range statuses {
		ds := &statuses[i]
		refused := ds.code == rlsv3.RateLimitResponse_OVER_LIMIT
		if ds.limit != nil && (refused || ds.remaining < least) {
			chosen, window, least = ds, steps[i].limit.policy.Window, ds.remaining
			if refused {
				least = 0
			}
		}
	}
	if chosen == nil {
		return hv
	}
	h := *s.opt.LimitHeaders
	now := s.opt.Now()
	secs := int64(window / time.Second)
	reset := secs - now.Unix()%max(secs, 1)
	return append(hv,
		headerValue{cmp.Or(h.Limit, "RateLimit-Limit"), strconv.FormatUint(uint64(chosen.limit.current.RequestsPerUnit), 10)},
		headerValue{cmp.Or(h.Remaining, "RateLimit-Remaining"), strconv.FormatUint(uint64(chosen.remaining), 10)},
		headerValue{cmp.Or(h.Reset, "RateLimit-Reset"), strconv.FormatInt(reset, 10)},
	)
}

// headers appends to hv the RateLimit fields of every decided descriptor.
func (s *Service) headers(outs []engine.Outcome, hv []headerValue) []headerValue {
	m := engine.Merge(outs)
	h := map[string][]string{}
	s.opt.Fields.Set(h, &m)
	for k, vs := range h {
		for _, v := range vs {
			hv = append(hv, headerValue{strings.ToLower(k), v})
		}
	}
	return hv
}
