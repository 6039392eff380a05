package rlqs_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/memorystore"
	"github.com/floodgate/floodgate/rlqs"
	"github.com/floodgate/floodgate/rlqs/rlqsclient"
)

// start is on a whole minute, so fixed windows of a second or a minute
// begin there.
var start = time.Date(2031, 3, 4, 5, 10, 0, 0, time.UTC)

// clock is a manual clock shared by a test's store, server and clients.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(start.UnixNano())
	return c
}
func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// interval is the tests' report interval: ten per window of a second.
const interval = 100 * time.Millisecond

var perSecond = floodgate.Policy{Name: "api", Algorithm: floodgate.FixedWindow, Quota: 1000, Window: time.Second}

func rules(t testing.TB, p floodgate.Policy) *rlqs.Rules {
	t.Helper()
	r, err := rlqs.NewRules(map[string][]rlqs.Rule{"envoy": {{Match: map[string]string{"name": rlqs.Any}, Policy: p}}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// serve starts srv on loopback and returns a connection to it.
func serve(t testing.TB, srv *rlqs.Server) *grpc.ClientConn {
	t.Helper()
	_, addr := listen(t, srv, "127.0.0.1:0")
	return dial(t, addr)
}

// listen serves srv on a gRPC server listening on addr, stopped at the
// test's end, and returns the server and the address it listens on.
func listen(t testing.TB, srv *rlqs.Server, addr string) (*grpc.Server, string) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	srv.Register(g)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return g, lis.Addr().String()
}

func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// fixture is a server on a memory store, both on clk.
func fixture(t testing.TB, clk *clock, p floodgate.Policy, opt rlqs.Options) (*rlqs.Server, *grpc.ClientConn, floodgate.Store) {
	t.Helper()
	store := testkit.Memory(t, memorystore.WithClock(clk.Now))
	opt.Now = clk.Now
	if opt.Interval == 0 {
		opt.Interval = interval
	}
	srv, err := rlqs.NewServer(store, rules(t, p), opt)
	if err != nil {
		t.Fatal(err)
	}
	return srv, serve(t, srv), store
}

func client(t testing.TB, conn *grpc.ClientConn, clk *clock, set rlqsclient.Settings) *rlqsclient.Client {
	t.Helper()
	if set.Domain == "" {
		set.Domain = "envoy"
	}
	if set.Interval == 0 {
		set.Interval = interval
	}
	c, err := rlqsclient.New(conn, set, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func syncNow(t testing.TB, c *rlqsclient.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

var api = map[string]string{"name": "api"}

func tokens(t testing.TB, s *typev3.RateLimitStrategy) uint32 {
	t.Helper()
	if s.GetBlanketRule() == typev3.RateLimitStrategy_DENY_ALL {
		return 0
	}
	tb := s.GetTokenBucket()
	if tb == nil || tb.TokensPerFill.GetValue() != tb.MaxTokens || tb.FillInterval.AsDuration() != interval {
		t.Fatalf("strategy %v: want a token bucket refilling its max per interval", s)
	}
	return tb.MaxTokens
}

// spend decides n requests at the client's clock, returning those allowed.
func spend(c *rlqsclient.Client, n int) (allowed int) {
	for range n {
		if c.Allow(api) {
			allowed++
		}
	}
	return allowed
}

// TestSubscribe: the first report subscribes the bucket and is answered
// with an assignment: at first a lease of an even part of the quota per
// interval (1,000/s for one client: ⌈100 × 1.25⌉ + 1 = 126 tokens) with the
// server's TTL, which the client enforces from then on; the next lease
// follows the reported demand (400 requests in an interval: 501).
func TestSubscribe(t *testing.T) {
	clk := newClock()
	srv, conn, store := fixture(t, clk, perSecond, rlqs.Options{})
	c := client(t, conn, clk, rlqsclient.Settings{})
	if got := spend(c, 10); got != 10 {
		t.Fatalf("no assignment yet (allow all by default): %d of 10 allowed", got)
	}
	syncNow(t, c)
	state, s := c.State(api)
	if state != rlqsclient.Active || tokens(t, s) != 126 {
		t.Fatalf("state %v, strategy %v: want active with 126 tokens", state, s)
	}
	if got := spend(c, 200); got != 126 {
		t.Fatalf("%d of 200 allowed under a lease of 126", got)
	}
	// Reserved: the lease and one refill (252), after the 10 reported.
	if rem := peek(t, store, srv); rem != 1000-10-252 {
		t.Fatalf("remaining %d, want %d", rem, 1000-10-252)
	}
	clk.Advance(interval)
	spend(c, 400) // 126 refilled
	syncNow(t, c)
	// 200 + 400 requests reported over an interval: 6,000/s wanted, but the
	// lease and its refill are bounded by what is left: (738 + 0 held) / 2.
	if _, s := c.State(api); tokens(t, s) != 369 {
		t.Fatalf("strategy %v: want 369 tokens", s)
	}
	if srv.StoreCalls() != 2 {
		t.Fatalf("%d store calls, want 2", srv.StoreCalls())
	}
}

// peek reads what is left of the api bucket's quota without spending.
func peek(t testing.TB, store floodgate.Store, _ *rlqs.Server) int64 {
	t.Helper()
	var res [1]floodgate.Result
	key := "rlqs:5:envoy4:name3:api"
	if err := store.Take(context.Background(), key, floodgate.Cost{}, []floodgate.Policy{perSecond}, res[:]); err != nil {
		t.Fatal(err)
	}
	return res[0].Remaining
}

// TestShrinkAndGrowBack: a client over the quota sees its lease shrink to
// DENY_ALL as the window's quota is spent, never admits more than the
// quota in the window, and gets a lease again in the next window.
func TestShrinkAndGrowBack(t *testing.T) {
	clk := newClock()
	_, conn, _ := fixture(t, clk, perSecond, rlqs.Options{})
	c := client(t, conn, clk, rlqsclient.Settings{NoAssignment: deny()})
	admitted, least := 0, uint32(1<<31)
	for range 9 { // 0.9 s at 4,000 requests/s
		admitted += spend(c, 400)
		clk.Advance(interval)
		syncNow(t, c)
		_, s := c.State(api)
		least = min(least, tokens(t, s))
	}
	// The lease shrinks to what the client still holds reserved.
	if least > 5 || admitted > 1000 || admitted < 900 {
		t.Fatalf("admitted %d in the window, least lease %d: want 900–1000 and the lease down to a few tokens", admitted, least)
	}
	clk.Advance(interval) // the next window
	syncNow(t, c)
	if _, s := c.State(api); tokens(t, s) == 0 {
		t.Fatal("no lease in a fresh window")
	}
	if got := spend(c, 400); got == 0 {
		t.Fatal("nothing admitted in a fresh window")
	}
}

func deny() *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_DENY_ALL}}
}

// TestSharesAreDemandWeighted: four clients over the quota, one with three
// times the demand of each other, share every window within the quota and
// the busy one gets the larger part.
func TestSharesAreDemandWeighted(t *testing.T) {
	clk := newClock()
	srv, conn, _ := fixture(t, clk, perSecond, rlqs.Options{})
	cs := make([]*rlqsclient.Client, 4)
	for i := range cs {
		cs[i] = client(t, conn, clk, rlqsclient.Settings{NoAssignment: deny()})
	}
	got := make([]int, 4)
	for step := range 30 { // three windows
		for i, c := range cs {
			n := 50
			if i == 0 {
				n = 150
			}
			got[i] += spend(c, n)
		}
		clk.Advance(interval)
		for _, c := range cs {
			syncNow(t, c)
		}
		if step%10 == 9 {
			total := got[0] + got[1] + got[2] + got[3]
			if total > 1000 {
				t.Fatalf("window %d: %d admitted, quota 1000", step/10, total)
			}
			if got[0] < 2*got[1] || total < 800 {
				t.Fatalf("window %d: admitted %v: want the busy client's share near 3× and 800–1000 in all", step/10, got)
			}
			got = make([]int, 4)
		}
	}
	if calls := srv.StoreCalls(); calls > 4*30 {
		t.Fatalf("%d store calls for 4 clients × 30 reports", calls)
	}
}

// TestAbandonOnRuleRemoval: when the reloaded rules match a bucket no more,
// its clients are told to abandon it and forget it.
func TestAbandonOnRuleRemoval(t *testing.T) {
	clk := newClock()
	srv, conn, _ := fixture(t, clk, perSecond, rlqs.Options{})
	c := client(t, conn, clk, rlqsclient.Settings{})
	spend(c, 1)
	syncNow(t, c)
	before := c.Answers()
	r, err := rlqs.NewRules(map[string][]rlqs.Rule{"envoy": {{Match: map[string]string{"name": "other"}, Policy: perSecond}}})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetRules(r)
	waitFor(t, func() bool { return c.Answers() > before })
	if state, _ := c.State(api); state != rlqsclient.Untracked {
		t.Fatalf("state %v after abandon, want untracked", state)
	}
	// A new request subscribes again and, unmatched, is not limited.
	spend(c, 1)
	syncNow(t, c)
	if state, s := c.State(api); state != rlqsclient.Active || s.GetBlanketRule() != typev3.RateLimitStrategy_ALLOW_ALL {
		t.Fatalf("state %v, strategy %v for an unmatched bucket: want ALLOW_ALL", state, s)
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
	}
}

// TestExpiryAndReconnect: with the server gone, the assignment expires
// after its TTL and the fallback applies, then after its timeout the
// bucket is abandoned; a server on the same address takes the client's
// next report on a new stream.
func TestExpiryAndReconnect(t *testing.T) {
	clk := newClock()
	store := testkit.Memory(t, memorystore.WithClock(clk.Now))
	srv, err := rlqs.NewServer(store, rules(t, perSecond), rlqs.Options{Now: clk.Now, Interval: interval})
	if err != nil {
		t.Fatal(err)
	}
	g, addr := listen(t, srv, "127.0.0.1:0")
	conn := dial(t, addr)
	c := client(t, conn, clk, rlqsclient.Settings{Expired: &rlqsclient.Expired{Timeout: time.Second, Fallback: deny()}})
	spend(c, 5)
	syncNow(t, c)
	g.Stop()

	clk.Advance(rlqs.DefaultTTLIntervals*interval - time.Millisecond)
	if state, _ := c.State(api); state != rlqsclient.Active {
		t.Fatalf("state %v before the TTL, want active", state)
	}
	clk.Advance(time.Millisecond)
	if state, _ := c.State(api); state != rlqsclient.ExpiredState || c.Allow(api) {
		t.Fatalf("state %v after the TTL: want expired, denying per the fallback", state)
	}
	clk.Advance(time.Second)
	if state, _ := c.State(api); state != rlqsclient.Untracked {
		t.Fatalf("state %v after the expired behaviour's timeout, want untracked", state)
	}

	listen(t, srv, addr)
	spend(c, 5)
	waitFor(t, func() bool { // the old stream's end may be seen first
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		return c.Sync(ctx) == nil
	})
	if state, _ := c.State(api); state != rlqsclient.Active {
		t.Fatalf("state %v after reconnecting, want active", state)
	}
}

// raw opens a stream of its own, for messages the reference client never sends.
func raw(t testing.TB, conn *grpc.ClientConn) rlqspb.RateLimitQuotaService_StreamRateLimitQuotasClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	s, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func usage(id map[string]string, allowed uint64) *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage {
	return &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: &rlqspb.BucketId{Bucket: id}, NumRequestsAllowed: allowed}
}

// TestBadInput: each bad message ends its stream with a clear status and
// spends nothing; a good client's state and the quota are untouched.
func TestBadInput(t *testing.T) {
	clk := newClock()
	reg := prometheus.NewRegistry()
	srv, conn, store := fixture(t, clk, perSecond, rlqs.Options{MaxBuckets: 3, MaxMessages: 5, Registerer: reg})
	good := client(t, conn, clk, rlqsclient.Settings{})
	spend(good, 10)
	syncNow(t, good)
	left, calls := peek(t, store, srv), srv.StoreCalls()

	huge := map[string]string{}
	for i := range 17 {
		huge[string(rune('a'+i))] = "v"
	}
	many := []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{}
	for _, n := range []string{"a", "b", "c", "d"} {
		many = append(many, usage(map[string]string{"name": n}, 1000))
	}
	for _, tc := range []struct {
		name string
		msgs []*rlqspb.RateLimitQuotaUsageReports
		code codes.Code
		want string
	}{
		{"no domain", []*rlqspb.RateLimitQuotaUsageReports{{BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(api, 1)}}}, codes.InvalidArgument, "must name a domain"},
		{"unknown domain", []*rlqspb.RateLimitQuotaUsageReports{{Domain: "nope"}}, codes.InvalidArgument, `unknown domain "nope"`},
		{"domain changed", []*rlqspb.RateLimitQuotaUsageReports{{Domain: "envoy"}, {Domain: "other"}}, codes.InvalidArgument, "differs"},
		{"empty bucket id", []*rlqspb.RateLimitQuotaUsageReports{{Domain: "envoy", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(api, 1000), usage(nil, 1)}}}, codes.InvalidArgument, "bucket_quota_usages[1]: empty bucket_id"},
		{"huge map", []*rlqspb.RateLimitQuotaUsageReports{{Domain: "envoy", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(huge, 1)}}}, codes.InvalidArgument, "17 entries, at most 16"},
		{"huge entry", []*rlqspb.RateLimitQuotaUsageReports{{Domain: "envoy", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(map[string]string{"name": strings.Repeat("x", 300)}, 1)}}}, codes.InvalidArgument, "more than 256 bytes"},
		{"too many buckets", []*rlqspb.RateLimitQuotaUsageReports{{Domain: "envoy", BucketQuotaUsages: many}}, codes.ResourceExhausted, "more than 3 buckets"},
		{"report storm", storm(), codes.ResourceExhausted, "more than 5 messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := raw(t, conn)
			for _, m := range tc.msgs {
				if err := s.Send(m); err != nil {
					break // the server ended the stream; Recv says why
				}
			}
			var err error
			for err == nil {
				_, err = s.Recv()
			}
			if st := status.Convert(err); st.Code() != tc.code || !strings.Contains(st.Message(), tc.want) {
				t.Fatalf("got %v, want %v containing %q", err, tc.code, tc.want)
			}
		})
	}
	// The storm's first message was good and leased once; nothing else spent.
	if got := srv.StoreCalls(); got != calls+1 {
		t.Fatalf("%d store calls after the bad streams, want %d", got, calls+1)
	}
	if state, _ := good.State(api); state != rlqsclient.Active {
		t.Fatalf("the good client's bucket is %v", state)
	}
	if rem := peek(t, store, srv); rem >= left {
		t.Fatalf("remaining %d, want below %d by the storm's one lease", rem, left)
	}
	want := `
		# HELP floodgate_rlqs_streams_refused_total Rate limit quota service streams ended for bad input, by gRPC code.
		# TYPE floodgate_rlqs_streams_refused_total counter
		floodgate_rlqs_streams_refused_total{code="InvalidArgument"} 6
		floodgate_rlqs_streams_refused_total{code="ResourceExhausted"} 2
		# HELP floodgate_rlqs_store_calls_total Leases taken from the store by the rate limit quota service, by result: taken, refused (less was left), error.
		# TYPE floodgate_rlqs_store_calls_total counter
		floodgate_rlqs_store_calls_total{result="taken"} 2
	`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "floodgate_rlqs_streams_refused_total", "floodgate_rlqs_store_calls_total"); err != nil {
		t.Fatal(err)
	}
	// The bad streams have ended; the good client's is open.
	waitFor(t, func() bool { return streams(t, reg) == 1 })
}

// streams reads floodgate_rlqs_streams from reg.
func streams(t testing.TB, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "floodgate_rlqs_streams" {
			return mf.Metric[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no floodgate_rlqs_streams")
	return 0
}

// storm is six reports at once on one stream, the first naming the domain.
func storm() []*rlqspb.RateLimitQuotaUsageReports {
	var ms []*rlqspb.RateLimitQuotaUsageReports
	for i := range 6 {
		m := &rlqspb.RateLimitQuotaUsageReports{BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(api, 1)}}
		if i == 0 {
			m.Domain = "envoy"
		}
		ms = append(ms, m)
	}
	return ms
}

// TestRulesRefuseAnchoredWindow: a lease of an anchored window could not
// be voided at its window's end, so the rules refuse it by name.
func TestRulesRefuseAnchoredWindow(t *testing.T) {
	p := perSecond
	p.Algorithm = floodgate.AnchoredWindow
	_, err := rlqs.NewRules(map[string][]rlqs.Rule{"envoy": {{Policy: p}}})
	if !errors.Is(err, floodgate.ErrInvalidPolicy) || !strings.Contains(err.Error(), `domain "envoy" rule 0: anchored-window is not served`) {
		t.Fatalf("NewRules = %v, want ErrInvalidPolicy naming the rule", err)
	}
}
