package grpclimit_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/grpclimit"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/memorystore"
)

// report sets the cost a call asks for (metadata want-cost) as the
// handler's trailer, or, with want-in=header, in its header: what a
// service that counts tokens would do.
func report(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	if c := md.Get("want-cost"); len(c) > 0 {
		out := metadata.Pairs("x-tokens-used", c[0], "x-other", "kept")
		if len(md.Get("want-in")) > 0 {
			grpc.SetHeader(ctx, out)
		} else {
			grpc.SetTrailer(ctx, out)
		}
	}
}

// costLimiter is a per-method limiter (100 an hour, fixed window, clock
// fixed at at) that settles each call with the cost its handler reports
// under costKey, and left, which reads what a key has left by a Take of
// cost 0.
func costLimiter(t *testing.T, costKey string) (*grpclimit.Limiter, func(key string) int64) {
	t.Helper()
	now := func() time.Time { return at }
	store := testkit.Memory(t, memorystore.WithClock(now))
	eng, err := engine.New(engine.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	p := floodgate.Policy{Name: "tokens", Algorithm: floodgate.FixedWindow, Quota: 100, Window: time.Hour}
	rule, err := eng.Compile(engine.Rule{Name: "grpc", Policies: []floodgate.Policy{p}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := grpclimit.New(grpclimit.Config{Rule: rule, Key: grpclimit.ByMethod(), Fields: engine.Fields{Now: now}, CostKey: costKey})
	if err != nil {
		t.Fatal(err)
	}
	left := func(key string) int64 {
		t.Helper()
		var res [1]floodgate.Result
		if err := store.Take(t.Context(), key, floodgate.Cost{}, []floodgate.Policy{p}, res[:]); err != nil {
			t.Fatal(err)
		}
		return res[0].Remaining
	}
	return l, left
}

// TestCostKey: a handler reports a call's actual cost in its trailer or
// header; a real client on loopback never sees it, and the call's cost
// of 1 is settled with it, unary and streaming alike.
func TestCostKey(t *testing.T) {
	l, left := costLimiter(t, "X-Tokens-Used")
	client := dial(t, grpc.NewServer(
		grpc.ChainUnaryInterceptor(l.Unary(), func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			report(ctx)
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(l.Stream(), func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			report(ss.Context())
			return status.Error(codes.Canceled, "one message is enough") // ends the watch
		})))
	for i, c := range []struct {
		cost   int64
		header bool
		left   int64
	}{{40, false, 60}, {1, true, 59}, {0, false, 59}} { // the last refunds its 1
		ctx := metadata.AppendToOutgoingContext(t.Context(), "want-cost", strconv.FormatInt(c.cost, 10))
		if c.header {
			ctx = metadata.AppendToOutgoingContext(ctx, "want-in", "header")
		}
		var hdr, trl metadata.MD
		if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr), grpc.Trailer(&trl)); err != nil {
			t.Fatal(err)
		}
		if len(hdr.Get("x-tokens-used"))+len(trl.Get("x-tokens-used")) > 0 {
			t.Fatalf("call %d: the client sees the cost: header %v, trailer %v", i, hdr, trl)
		}
		if other := append(hdr.Get("x-other"), trl.Get("x-other")...); len(other) != 1 {
			t.Fatalf("call %d: x-other %v, want it kept", i, other)
		}
		if got := left("/grpc.health.v1.Health/Check"); got != c.left {
			t.Fatalf("call %d (cost %d): %d left, want %d", i, c.cost, got, c.left)
		}
	}
	// A stream: 50 reported in its trailer, posted under the Watch key.
	ctx := metadata.AppendToOutgoingContext(t.Context(), "want-cost", "50")
	w, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("watch: %v", err)
	}
	if trl := w.Trailer(); len(trl.Get("x-tokens-used")) > 0 || len(trl.Get("x-other")) != 1 {
		t.Fatalf("watch trailer %v", trl)
	}
	if got := left("/grpc.health.v1.Health/Watch"); got != 50 {
		t.Fatalf("watch key: %d left, want 50", got)
	}
}

// TestCostKeyEmpty: a handler that sets the cost key with no value (a
// metadata.MD literal) is no count: the call keeps its cost of 1, and
// the interceptor does not panic.
func TestCostKeyEmpty(t *testing.T) {
	l, left := costLimiter(t, "x-tokens-used")
	client := dial(t, grpc.NewServer(grpc.ChainUnaryInterceptor(l.Unary(), func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		grpc.SetTrailer(ctx, metadata.MD{"x-tokens-used": {}, "x-other": {"kept"}})
		return h(ctx, req)
	})))
	var trl metadata.MD
	if _, err := client.Check(t.Context(), &healthpb.HealthCheckRequest{}, grpc.Trailer(&trl)); err != nil {
		t.Fatal(err)
	}
	if _, seen := trl["x-tokens-used"]; seen || len(trl.Get("x-other")) != 1 {
		t.Fatalf("trailer %v: want x-other only", trl)
	}
	if got := left("/grpc.health.v1.Health/Check"); got != 99 {
		t.Fatalf("%d left, want 99", got)
	}
}
