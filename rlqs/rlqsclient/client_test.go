package rlqsclient

import (
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

var t0 = time.Date(2031, 3, 4, 5, 10, 0, 0, time.UTC)

func tokenBucketOf(max, fill uint32, every time.Duration) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
		MaxTokens: max, TokensPerFill: wrapperspb.UInt32(fill), FillInterval: durationpb.New(every)}}}
}

func count(l local, now time.Time, n int) (allowed int) {
	for range n {
		if l.allow(now) {
			allowed++
		}
	}
	return allowed
}

// TestEnforcers: each strategy of envoy.type.v3.RateLimitStrategy, locally.
func TestEnforcers(t *testing.T) {
	tb := enforcer(tokenBucketOf(10, 5, time.Second), t0)
	if got := count(tb, t0, 20); got != 10 {
		t.Fatalf("token bucket full: %d of 20, want 10", got)
	}
	if got := count(tb, t0.Add(600*time.Millisecond), 20); got != 3 {
		t.Fatalf("token bucket after 0.6 s at 5/s: %d, want 3", got)
	}
	// tokens_per_fill unset is 1.
	one := enforcer(&typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
		MaxTokens: 2, FillInterval: durationpb.New(time.Second)}}}, t0)
	if got := count(one, t0.Add(time.Second), 5); got != 2 {
		t.Fatalf("tokens_per_fill unset: %d, want 2 (capped at max)", got)
	}
	pu := enforcer(&typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_RequestsPerTimeUnit_{RequestsPerTimeUnit: &typev3.RateLimitStrategy_RequestsPerTimeUnit{
		RequestsPerTimeUnit: 3, TimeUnit: typev3.RateLimitUnit_SECOND}}}, t0)
	if a, b := count(pu, t0.Add(900*time.Millisecond), 5), count(pu, t0.Add(time.Second), 5); a != 3 || b != 3 {
		t.Fatalf("requests per second: %d then %d, want 3 and 3", a, b)
	}
	deny := enforcer(&typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_DENY_ALL}}, t0)
	if count(deny, t0, 3) != 0 || count(enforcer(nil, t0), t0, 3) != 3 {
		t.Fatal("DENY_ALL must deny and an unset strategy allow")
	}
}

func newClient(t *testing.T, now *time.Time, set Settings) *Client {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///unused", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	set.Domain, set.Interval = "d", time.Second
	c, err := New(conn, set, func() time.Time { return *now })
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func assign(s *typev3.RateLimitStrategy, ttl time.Duration) *rlqspb.RateLimitQuotaResponse {
	return &rlqspb.RateLimitQuotaResponse{BucketAction: []*rlqspb.RateLimitQuotaResponse_BucketAction{{
		BucketId: &rlqspb.BucketId{Bucket: map[string]string{"b": "1"}},
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{QuotaAssignmentAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
			AssignmentTimeToLive: durationpb.New(ttl), RateLimitStrategy: s}}}}}
}

// TestReplacing follows rlqs.proto's QuotaAssignmentAction: the same
// strategy extends the TTL and keeps the limiter's state; a different one
// starts a fresh limiter; a TTL of 0 expires at once.
func TestReplacing(t *testing.T) {
	now := t0
	c := newClient(t, &now, Settings{})
	id := map[string]string{"b": "1"}
	c.Allow(id)
	c.apply(assign(tokenBucketOf(2, 2, time.Hour), time.Second))
	if got := admitted(c, id, 3); got != 2 {
		t.Fatalf("a lease of 2 admitted %d of 3", got)
	}
	now = now.Add(900 * time.Millisecond)
	c.apply(assign(tokenBucketOf(2, 2, time.Hour), time.Second)) // same: extends
	now = now.Add(900 * time.Millisecond)
	if st, _ := c.State(id); st != Active || c.Allow(id) {
		t.Fatalf("same strategy: state %v; want active, its spent bucket kept", st)
	}
	c.apply(assign(tokenBucketOf(3, 3, time.Hour), time.Second)) // different: fresh
	if count(c.buckets[keyOf(id)].enforce, now, 5) != 3 {
		t.Fatal("a new strategy must start full")
	}
	c.apply(assign(tokenBucketOf(3, 3, time.Hour), 0))
	if st, _ := c.State(id); st != Untracked {
		t.Fatalf("TTL 0 with no expired behaviour: state %v, want abandoned", st)
	}
}

// TestNoAssignmentAndReuse: the no-assignment fallback applies before the
// first assignment; reuse_last_assignment keeps the expired limiter.
func TestNoAssignmentAndReuse(t *testing.T) {
	now := t0
	c := newClient(t, &now, Settings{NoAssignment: tokenBucketOf(1, 1, time.Hour), Expired: &Expired{ReuseLast: true}})
	id := map[string]string{"b": "1"}
	if !c.Allow(id) || c.Allow(id) {
		t.Fatal("no-assignment fallback of 1 token")
	}
	c.apply(assign(tokenBucketOf(2, 2, time.Hour), time.Second))
	c.Allow(id)
	now = now.Add(time.Second)
	if st, _ := c.State(id); st != ExpiredState || !c.Allow(id) || c.Allow(id) {
		t.Fatalf("reuse last: state %v; want expired with the lease's last token", st)
	}
}

// BenchmarkAllow is one local decision on an active lease, from every
// core at once (each goroutine a client of its own, as each Envoy is).
func BenchmarkAllow(b *testing.B) {
	conn, err := grpc.NewClient("passthrough:///unused", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	id := map[string]string{"b": "1"}
	b.RunParallel(func(pb *testing.PB) {
		c, err := New(conn, Settings{Domain: "d", Interval: time.Second}, nil)
		if err != nil {
			b.Error(err)
			return
		}
		c.Allow(id)
		c.apply(assign(tokenBucketOf(1<<31, 1<<31, time.Millisecond), time.Hour))
		for pb.Next() {
			c.Allow(id)
		}
	})
}

// admitted counts how many of n calls for id the client admits.
func admitted(c *Client, id map[string]string, n int) int {
	k := 0
	for range n {
		if c.Allow(id) {
			k++
		}
	}
	return k
}
