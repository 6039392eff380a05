package grpclimit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/grpclimit"
	"github.com/floodgate/floodgate/internal/testkit"
)

// TestClientRetryNeverEarly: on a real server pacing calls 100 ms apart
// (GCRA, burst 1, on the real clock), the retry interceptor's jitter only
// lengthens RetryInfo's delay: a refused call is tried again once, no
// sooner than 100 ms after the admission before it, and then admitted. A
// jitter that shortened the wait would arrive early and be refused again.
// Only lower bounds on time are asserted: a slow machine can only make
// calls later.
func TestClientRetryNeverEarly(t *testing.T) {
	var mu sync.Mutex
	var arrivals []time.Time
	count := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		return h(ctx, req)
	}
	l, err := grpclimit.New(grpclimit.Config{Store: testkit.Memory(t), Key: grpclimit.ByMethod(), Rules: []grpclimit.Rule{{Method: "/",
		Rule: engine.Rule{Name: "pace", Policies: []floodgate.Policy{{Name: "pace", Algorithm: floodgate.GCRA, Quota: 10, Window: time.Second, Burst: 1}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, grpc.NewServer(grpc.ChainUnaryInterceptor(count, l.Unary())), grpc.WithUnaryInterceptor(grpclimit.UnaryClientRetry(5, time.Second)))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var firsts []int // the index in arrivals of each call's first attempt
	retried := 0
	for i := range 4 {
		mu.Lock()
		firsts = append(firsts, len(arrivals))
		mu.Unlock()
		if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		mu.Lock()
		attempts := len(arrivals) - firsts[i]
		mu.Unlock()
		switch attempts {
		case 1:
		case 2: // refused, then admitted: after the admission before it, 100 ms at least
			retried++
			if gap := arrivals[firsts[i]+1].Sub(arrivals[max(firsts[i]-1, 0)]); gap < 100*time.Millisecond {
				t.Errorf("call %d: its retry came %v after the last admission, before GCRA's 100 ms", i, gap)
			}
		default:
			t.Errorf("call %d took %d attempts: a retry came before RetryInfo's delay", i, attempts)
		}
	}
	if retried == 0 {
		t.Error("no call was refused and admitted on its retry: four back-to-back calls at 10 per second, burst 1")
	}
}
