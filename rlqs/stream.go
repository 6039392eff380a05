package rlqs

import (
	"context"
	"maps"
	"math"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate"
)

// stream is one client's state; only its stream's goroutine touches it.
type stream struct {
	srv     *Server
	reload  chan struct{}
	domain  string
	buckets map[string]*bucket // by bucket key

	windowStart time.Time // of the MaxMessages count
	messages    int
}

// bucket is one bucket of one stream.
type bucket struct {
	id          *rlqspb.BucketId
	policy      floodgate.Policy
	outstanding int64   // reserved in the Store and not yet reported spent; < 0 is a debt
	window      int64   // the fixed window outstanding was reserved in; -1 for none
	lease       int64   // the current assignment's tokens; 0 is DENY_ALL
	demand      float64 // requests/s, as counted in the stream's shared demand
	leased      time.Time
	active      time.Time // last report that counted a request
}

// handle checks a whole message before it changes anything, then charges
// each report and answers the buckets due a lease.
func (st *stream) handle(ctx context.Context, m *rlqspb.RateLimitQuotaUsageReports) (*rlqspb.RateLimitQuotaResponse, error) {
	now := st.srv.opt.Now()
	if err := st.admit(now, m); err != nil {
		return nil, err
	}
	rules := st.srv.rules.Load()
	resp := &rlqspb.RateLimitQuotaResponse{}
	for _, u := range m.BucketQuotaUsages {
		id := u.BucketId.GetBucket()
		key := bucketKey(st.domain, id)
		b := st.buckets[key]
		if b == nil {
			rule, ok := rules.match(st.domain, id)
			if !ok {
				// No rule limits it, as at the other doors; an abandon
				// would only bring its next request back as a new report.
				resp.BucketAction = append(resp.BucketAction, st.assignment(u.BucketId, allowAll()))
				continue
			}
			b = st.join(key, u.BucketId, rule.Policy, now)
		}
		st.report(key, b, u, now)
		if b.active.Add(st.srv.opt.IdleAfter).Before(now) {
			resp.BucketAction = append(resp.BucketAction, abandon(b.id))
			st.forget(key, b)
			continue
		}
		if now.Sub(b.leased) >= st.srv.opt.Interval/2 {
			st.assign(ctx, key, b, u, now)
		}
		// Sooner, the same lease again: unchanged, it extends its TTL and
		// leaves the client's bucket as it is.
		resp.BucketAction = append(resp.BucketAction, st.action(b))
	}
	return resp, nil
}

// admit validates m against the stream's domain and bounds.
func (st *stream) admit(now time.Time, m *rlqspb.RateLimitQuotaUsageReports) error {
	o := &st.srv.opt
	if now.Sub(st.windowStart) >= o.Interval {
		st.windowStart, st.messages = now, 0
	}
	if st.messages++; st.messages > o.MaxMessages {
		return status.Errorf(codes.ResourceExhausted, "rlqs: more than %d messages within %v: report once per interval", o.MaxMessages, o.Interval)
	}
	switch {
	case st.domain == "" && m.Domain == "":
		return invalid("the first message must name a domain")
	case st.domain == "":
		if _, ok := st.srv.rules.Load().domains[m.Domain]; !ok {
			return invalid("unknown domain %q", m.Domain)
		}
		st.domain = m.Domain
	case m.Domain != "" && m.Domain != st.domain:
		return invalid("domain %q differs from the stream's %q: open a new stream", m.Domain, st.domain)
	}
	added := 0
	for i, u := range m.BucketQuotaUsages {
		id := u.GetBucketId().GetBucket()
		if len(id) == 0 {
			return invalid("bucket_quota_usages[%d]: empty bucket_id", i)
		}
		if len(id) > o.MaxEntries {
			return invalid("bucket_quota_usages[%d]: bucket_id has %d entries, at most %d", i, len(id), o.MaxEntries)
		}
		for k, v := range id {
			if k == "" || len(k)+len(v) > o.MaxEntryBytes {
				return invalid("bucket_quota_usages[%d]: a bucket_id entry has an empty key or more than %d bytes", i, o.MaxEntryBytes)
			}
		}
		if st.buckets[bucketKey(st.domain, id)] == nil {
			added++
		}
	}
	if len(st.buckets)+added > o.MaxBuckets {
		return status.Errorf(codes.ResourceExhausted, "rlqs: more than %d buckets on one stream", o.MaxBuckets)
	}
	return nil
}

// join subscribes the stream to a bucket.
func (st *stream) join(key string, id *rlqspb.BucketId, p floodgate.Policy, now time.Time) *bucket {
	b := &bucket{id: &rlqspb.BucketId{Bucket: maps.Clone(id.Bucket)}, policy: p, active: now, window: -1}
	st.buckets[key] = b
	s := st.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.shared[key]
	if sh == nil {
		sh = &shared{}
		s.shared[key] = sh
	}
	sh.holders++
	return b
}

// forget unsubscribes the stream from a bucket.
func (st *stream) forget(key string, b *bucket) {
	delete(st.buckets, key)
	st.srv.mu.Lock()
	defer st.srv.mu.Unlock()
	st.srv.leave(key, b.demand)
}

// report charges a usage report: what was allowed spends the reservation,
// and the demand (allowed and denied per second) moves towards the
// report's, at once when it rose (a flash crowd gets its share in one
// interval), halfway when it fell.
func (st *stream) report(key string, b *bucket, u *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage, now time.Time) {
	st.charge(b, u, now)
	n := u.NumRequestsAllowed + u.NumRequestsDenied
	if n > 0 {
		b.active = now
	}
	if n == 0 && b.demand == 0 {
		return
	}
	// A first report comes right after its first request: over its own
	// microseconds it would read as an enormous rate.
	elapsed := max(u.GetTimeElapsed().AsDuration(), st.srv.opt.Interval)
	d := float64(n) / elapsed.Seconds()
	s := st.srv
	s.mu.Lock()
	s.shared[key].demand += d - b.demand
	s.mu.Unlock()
	b.demand = d
}

// charge spends a report's allowed requests from the reservation. A fixed
// window's reservation belongs to the window it was taken in: once that
// window is over, what the client spent since it ended (estimated pro rata
// over the report's time) is a debt to the new window, which the next
// lease pays, and what it held unspent is void.
func (st *stream) charge(b *bucket, u *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage, now time.Time) {
	allowed := clampInt(u.NumRequestsAllowed)
	w := windowOf(b.policy, now)
	if b.window < 0 || w == b.window {
		b.outstanding -= allowed
		return
	}
	since := now.Sub(time.UnixMicro(w * b.policy.Window.Microseconds()))
	elapsed := max(u.GetTimeElapsed().AsDuration(), time.Microsecond)
	b.outstanding = -int64(math.Ceil(float64(allowed) * min(1, since.Seconds()/elapsed.Seconds())))
	b.window = w
}

// windowOf is the index of the fixed window holding now (windows are
// aligned to multiples of their length, REQUIREMENTS A1), or -1 for the
// other algorithms, whose quota has no edge.
func windowOf(p floodgate.Policy, now time.Time) int64 {
	if p.Algorithm != floodgate.FixedWindow {
		return -1
	}
	return now.UnixMicro() / p.Window.Microseconds()
}

// assign sizes the bucket's next lease and reserves it: L is the demand of
// one interval and a quarter (an even part of the quota at the first
// lease, before reports tell), bounded so that what the client may spend
// before its next report (L now and L refilled per interval elapsed, plus
// Options.Slack intervals) is its demand-weighted part of the quota left. What the stream holds beyond
// that goes to this server's pool for the bucket, which the other streams
// draw on before the Store: at most one Store call.
func (st *stream) assign(ctx context.Context, key string, b *bucket, u *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage, now time.Time) {
	s := st.srv
	periods := max(1, u.GetTimeElapsed().AsDuration().Seconds()/s.opt.Interval.Seconds()) + s.opt.Slack
	w := windowOf(b.policy, now)
	s.mu.Lock()
	sh := s.shared[key]
	demand := b.demand
	if b.leased.IsZero() {
		demand = max(demand, float64(b.policy.Quota)/b.policy.Window.Seconds()/float64(sh.holders))
	}
	lease := int64(math.Ceil(demand*s.opt.Interval.Seconds()*1.25)) + 1
	if sh.poolWindow != w {
		sh.pool, sh.poolWindow = 0, w // a past window's reservations are void
	}
	left := sh.left(b.policy, now) + sh.pool
	if sh.demand > 0 {
		part := float64(left+max(b.outstanding, 0)) * b.demand / sh.demand
		lease = max(0, min(lease, int64(part/(1+periods))))
	}
	need := int64(float64(lease)*(1+periods)) - b.outstanding
	if need > left { // more would be refused: take what is left, debts first
		need, lease = left, max(0, int64(float64(left+b.outstanding)/(1+periods)))
	}
	if need < 0 && b.window == w {
		sh.pool -= need // the new lease bounds what the client may spend
		b.outstanding += need
	}
	pooled := min(max(need, 0), sh.pool)
	sh.pool -= pooled
	b.outstanding += pooled
	need -= pooled
	s.mu.Unlock()
	if pooled > 0 {
		b.window = w
	}
	if need > 0 && !st.reserve(ctx, key, sh, b, need, now) {
		// What this stream already holds is the most it may spend.
		lease = int64(float64(max(b.outstanding, 0)) / (1 + periods))
	}
	b.lease, b.leased = lease, now
}

// reserve takes need from the Store for b, reporting whether it could.
func (st *stream) reserve(ctx context.Context, key string, sh *shared, b *bucket, need int64, now time.Time) bool {
	s := st.srv
	s.calls.Add(1)
	var res [1]floodgate.Result
	err := s.store.Take(ctx, key, floodgate.Cost{Requests: need}, []floodgate.Policy{b.policy}, res[:])
	if err != nil {
		if ctx.Err() != nil {
			return false // the stream ended
		}
		s.m.calls.WithLabelValues("error").Inc()
		s.opt.Logger.Warn("rlqs: store failed; the bucket's lease shrinks to what it holds", "domain", st.domain, "err", err)
		return false
	}
	s.mu.Lock()
	sh.remaining, sh.until = res[0].Remaining, now.Add(res[0].ResetAfter)
	s.mu.Unlock()
	if !res[0].Allowed {
		s.m.calls.WithLabelValues("refused").Inc()
		return false
	}
	s.m.calls.WithLabelValues("taken").Inc()
	b.outstanding += need
	b.window = windowOf(b.policy, now)
	return true
}

// action is the bucket's current lease as an assignment.
func (st *stream) action(b *bucket) *rlqspb.RateLimitQuotaResponse_BucketAction {
	return st.assignment(b.id, strategy(b.lease, st.srv.opt.Interval))
}

// assignment assigns s to the bucket id for the server's TTL.
func (st *stream) assignment(id *rlqspb.BucketId, s *typev3.RateLimitStrategy) *rlqspb.RateLimitQuotaResponse_BucketAction {
	return &rlqspb.RateLimitQuotaResponse_BucketAction{
		BucketId: id,
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
			QuotaAssignmentAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
				AssignmentTimeToLive: durationpb.New(st.srv.opt.TTL),
				RateLimitStrategy:    s,
			},
		},
	}
}

func allowAll() *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_ALLOW_ALL}}
}

// reconcile, after a reload, abandons the buckets no rule matches any more
// and marks those whose policy changed due a lease against the new one.
func (st *stream) reconcile() *rlqspb.RateLimitQuotaResponse {
	rules := st.srv.rules.Load()
	resp := &rlqspb.RateLimitQuotaResponse{}
	for key, b := range st.buckets {
		rule, ok := rules.match(st.domain, b.id.Bucket)
		switch {
		case !ok:
			resp.BucketAction = append(resp.BucketAction, abandon(b.id))
			st.forget(key, b)
		case rule.Policy != b.policy:
			b.policy, b.outstanding, b.leased, b.window = rule.Policy, 0, time.Time{}, -1
		}
	}
	return resp
}

// strategy is a lease as Envoy's token bucket: tokens full at once and
// refilled per interval; no tokens is DENY_ALL.
func strategy(tokens int64, interval time.Duration) *typev3.RateLimitStrategy {
	if tokens <= 0 {
		return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_DENY_ALL}}
	}
	n := uint32(min(tokens, math.MaxUint32))
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
		MaxTokens:     n,
		TokensPerFill: wrapperspb.UInt32(n),
		FillInterval:  durationpb.New(interval),
	}}}
}

func abandon(id *rlqspb.BucketId) *rlqspb.RateLimitQuotaResponse_BucketAction {
	return &rlqspb.RateLimitQuotaResponse_BucketAction{
		BucketId:     id,
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction_{AbandonAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction{}},
	}
}

func clampInt(v uint64) int64 { return int64(min(v, math.MaxInt64/4)) }
