package grpclimit_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clientip"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/grpclimit"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/memorystore"
)

var at = time.Date(2031, 3, 4, 5, 10, 0, 0, time.UTC)

// serve runs the health service (a unary and a server-streaming method)
// behind the interceptors of a rule of quota an hour, keyed by key.
func serve(t *testing.T, quota int64, key grpclimit.KeyFunc) healthpb.HealthClient {
	t.Helper()
	store := testkit.Memory(t, memorystore.WithClock(func() time.Time { return at }))
	eng, err := engine.New(engine.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	rule, err := eng.Compile(engine.Rule{Name: "grpc", Policies: []floodgate.Policy{{Name: "calls", Algorithm: floodgate.FixedWindow, Quota: quota, Window: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := grpclimit.New(grpclimit.Config{Rule: rule, Key: key, Fields: engine.Fields{Style: engine.Draft11}})
	if err != nil {
		t.Fatal(err)
	}
	return dial(t, grpc.NewServer(grpc.UnaryInterceptor(l.Unary()), grpc.StreamInterceptor(l.Stream())))
}

func dial(t *testing.T, g *grpc.Server, opts ...grpc.DialOption) healthpb.HealthClient {
	t.Helper()
	healthpb.RegisterHealthServer(g, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// fields parses the ratelimit and ratelimit-policy metadata.
func fields(t *testing.T, md metadata.MD) (remaining int64, quota int64) {
	t.Helper()
	limits, err := header.ParseLimit(md.Get("ratelimit")...)
	if err != nil || len(limits) != 1 {
		t.Fatalf("ratelimit %q: %v", md.Get("ratelimit"), err)
	}
	policies, err := header.ParsePolicy(md.Get("ratelimit-policy")...)
	if err != nil || len(policies) != 1 || policies[0].Name != "calls" || policies[0].Window != 3600 {
		t.Fatalf("ratelimit-policy %q: %v %v", md.Get("ratelimit-policy"), policies, err)
	}
	return limits[0].Remaining, policies[0].Quota
}

func checkRefusal(t *testing.T, err error) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("refusal %v, want ResourceExhausted", err)
	}
	var retry *errdetails.RetryInfo
	var quota *errdetails.QuotaFailure
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			retry = d
		case *errdetails.QuotaFailure:
			quota = d
		}
	}
	if retry == nil || retry.RetryDelay.AsDuration() != 50*time.Minute {
		t.Errorf("RetryInfo %v, want the window's end in 50m", retry)
	}
	if quota == nil || len(quota.Violations) != 1 || quota.Violations[0].Subject != "calls" {
		t.Errorf("QuotaFailure %v", quota)
	}
	if d, ok := grpclimit.RetryDelay(err); !ok || d != 50*time.Minute {
		t.Errorf("RetryDelay: %v %v", d, ok)
	}
}

func TestUnary(t *testing.T) {
	c := serve(t, 2, grpclimit.ByMethod())
	ctx := context.Background()
	for want := int64(1); want >= 0; want-- {
		var md metadata.MD
		if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md)); err != nil {
			t.Fatal(err)
		}
		if r, q := fields(t, md); r != want || q != 2 {
			t.Errorf("r=%d q=%d, want r=%d q=2", r, q, want)
		}
	}
	var md metadata.MD
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md))
	checkRefusal(t, err)
	if r, _ := fields(t, md); r != 0 {
		t.Errorf("refused call's metadata says r=%d", r)
	}
}

func TestStream(t *testing.T) {
	c := serve(t, 1, grpclimit.ByMetadata("x-api-key"))
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k1"))
	defer cancel()
	s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatalf("first stream: %v", err)
	}
	md, _ := s.Header()
	if r, _ := fields(t, md); r != 0 {
		t.Errorf("r=%d", r)
	}
	s2, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = s2.Recv()
	}
	checkRefusal(t, err)
	// Another key has its own quota; no key at all is refused.
	other := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k2")
	if _, err := c.Check(other, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("k2: %v", err)
	}
	if _, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("no key: %v", err)
	}
}

func TestByPeerTrustsForwardedForFromProxiesOnly(t *testing.T) {
	for name, tc := range map[string]struct {
		trusted []string
		spoofed bool // x-forwarded-for names its own client
	}{"trusted loopback": {[]string{"127.0.0.1/32"}, true}, "no trusted proxy": {nil, false}} {
		r, err := clientip.New(clientip.Config{TrustedProxies: tc.trusted, Sources: []clientip.Source{clientip.XForwardedFor}})
		if err != nil {
			t.Fatal(err)
		}
		c := serve(t, 1, grpclimit.ByPeer(r))
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-forwarded-for", "198.51.100.7")
		if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
		ctx = metadata.AppendToOutgoingContext(context.Background(), "x-forwarded-for", "198.51.100.8")
		_, err = c.Check(ctx, &healthpb.HealthCheckRequest{})
		if separate := err == nil; separate != tc.spoofed {
			t.Errorf("%s: second client admitted %v, want %v (%v)", name, separate, tc.spoofed, err)
		}
	}
}

func TestClientRetryHonoursRetryInfo(t *testing.T) {
	store := testkit.Memory(t)
	eng, _ := engine.New(engine.Config{Store: store})
	rule, err := eng.Compile(engine.Rule{Name: "grpc", Policies: []floodgate.Policy{{Name: "pace", Algorithm: floodgate.GCRA, Quota: 20, Window: time.Second, Burst: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := grpclimit.New(grpclimit.Config{Rule: rule, Key: grpclimit.ByMethod()})
	c := dial(t, grpc.NewServer(grpc.UnaryInterceptor(l.Unary())), grpc.WithUnaryInterceptor(grpclimit.UnaryClientRetry(20, time.Second)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 { // one a 50ms: the second and third wait, then pass
		if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
}
