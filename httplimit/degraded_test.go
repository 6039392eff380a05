package httplimit_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/redisstore"
)

// TestDegradedHeaders: with Redis at a closed port, fail-open admits with
// no invented quota (no RateLimit, no X-RateLimit-Remaining) and the
// Floodgate-Degraded marker; fail-closed answers 503 with Retry-After and
// the policies it would have applied.
func TestDegradedHeaders(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	st, err := redisstore.New(rdb, redisstore.WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	p := policy("p", floodgate.SlidingWindowCounter, 5, time.Minute)
	srv := serve(t, httplimit.Config{Store: st, Rules: []httplimit.Rule{
		{Pattern: "/open", Rule: engine.Rule{Policies: []floodgate.Policy{p}, FailureMode: floodgate.FailOpen}},
		{Pattern: "/closed", Rule: engine.Rule{Policies: []floodgate.Policy{p}}},
	}}, ok)
	resp := do(t, "GET", srv.URL+"/open")
	h := resp.Header
	if resp.StatusCode != 200 || h.Get(engine.FieldDegraded) != "store-unavailable" || h.Get("RateLimit") != "" ||
		h.Get("X-RateLimit-Remaining") != "" || h.Get("X-RateLimit-Reset") != "" || h.Get("RateLimit-Policy") != `"p";q=5;w=60` {
		t.Fatalf("fail-open: %d %v", resp.StatusCode, h)
	}
	resp = do(t, "GET", srv.URL+"/closed")
	h = resp.Header
	if resp.StatusCode != 503 || h.Get("Retry-After") == "" || h.Get("RateLimit-Policy") != `"p";q=5;w=60` || h.Get("RateLimit") != "" {
		t.Fatalf("fail-closed: %d %v", resp.StatusCode, h)
	}
}
