package httplimit_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/redisstore"
)

// redisStore returns a Redis store on the test instance with a key prefix
// of its own.
func redisStore(t *testing.T) *redisstore.Store {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: testkit.Env(t, "FLOODGATE_TEST_REDIS")})
	t.Cleanup(func() { rdb.Close() })
	// A generous timeout: on a loaded machine the first call, which loads
	// the function library, can take longer than the default 50 ms.
	st, err := redisstore.New(rdb, redisstore.WithTimeout(5*time.Second),
		redisstore.WithPrefix("httplimit-test:"+t.Name()+":"+time.Now().Format("150405.000000")+":"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestRedisLoginAndSlots(t *testing.T) {
	st := redisStore(t)
	srv := serve(t, httplimit.Config{Store: st, Rules: []httplimit.Rule{
		{Pattern: "POST /login",
			Key: []httplimit.KeyPart{httplimit.ClientIP(), httplimit.Route()},
			Rule: engine.Rule{
				Policies: []floodgate.Policy{policy("login", floodgate.SlidingWindowCounter, 5, time.Minute)},
			}},
		{Pattern: "/slow", Rule: engine.Rule{Concurrency: []floodgate.Concurrency{{Name: "inflight", Max: 1}}}},
	}}, slowOrOK())
	for i := range 5 {
		if resp := do(t, "POST", srv.URL+"/login"); resp.StatusCode != 200 {
			t.Fatalf("login %d: %d", i+1, resp.StatusCode)
		}
	}
	if resp := do(t, "POST", srv.URL+"/login"); resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("6th login: %d", resp.StatusCode)
	}
	// One slot: a request in flight makes the next one wait its turn with a 429.
	var wg sync.WaitGroup
	wg.Go(func() { do(t, "GET", srv.URL+"/slow?ms=300") })
	time.Sleep(100 * time.Millisecond)
	if resp := do(t, "GET", srv.URL+"/slow"); resp.StatusCode != 429 {
		t.Fatalf("second in flight: %d", resp.StatusCode)
	}
	wg.Wait()
	if resp := do(t, "GET", srv.URL+"/slow"); resp.StatusCode != 200 {
		t.Fatalf("after the first ended: %d (slot not released)", resp.StatusCode)
	}
}

func slowOrOK() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d, err := time.ParseDuration(r.URL.Query().Get("ms") + "ms"); err == nil {
			time.Sleep(d)
		}
		w.Write([]byte("ok"))
	})
}

// TestDeadRedis: with nothing listening where Redis should be, fail-open
// admits, fail-closed answers 503, never 429 (S3), and fail-to-local
// holds in-flight slots locally, this instance's share of them.
func TestDeadRedis(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // a port that refuses connections: a dead Redis
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	defer rdb.Close()
	st, err := redisstore.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	p := []floodgate.Policy{policy("p", floodgate.GCRA, 5, time.Second)}
	local := testkit.Memory(t)
	inflight := []floodgate.Concurrency{{Name: "inflight", Max: 4}}
	srv := serve(t, httplimit.Config{Engine: newEngine(t, engine.Config{Store: st, Local: local}), Rules: []httplimit.Rule{
		{Pattern: "/open", Rule: engine.Rule{Policies: p, FailureMode: floodgate.FailOpen}},
		{Pattern: "/closed", Rule: engine.Rule{Policies: p, FailureMode: floodgate.FailClosed}},
		{Pattern: "/local", Rule: engine.Rule{Concurrency: inflight, FailureMode: floodgate.FailToLocal, LocalShare: 0.5}},
		{Pattern: "/open-slots", Rule: engine.Rule{Concurrency: inflight, FailureMode: floodgate.FailOpen}},
	}}, slowOrOK())
	if resp := do(t, "GET", srv.URL+"/open-slots"); resp.StatusCode != 200 {
		t.Fatalf("fail-open slots: %d", resp.StatusCode)
	}
	// Three at once against a local share of 4 × 0.5 = 2 slots.
	codes := make(chan int, 3)
	for range 3 {
		go func() {
			resp, err := http.Get(srv.URL + "/local?ms=300")
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	got := map[int]int{}
	for range 3 {
		got[<-codes]++
	}
	if got[200] != 2 || got[429] != 1 {
		t.Fatalf("fail-to-local slots, 3 at once: %v, want two 200 and one 429", got)
	}
	for range 3 {
		if resp := do(t, "GET", srv.URL+"/open"); resp.StatusCode != 200 {
			t.Fatalf("fail-open: %d", resp.StatusCode)
		}
		resp := do(t, "GET", srv.URL+"/closed")
		if resp.StatusCode != 503 || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("fail-closed: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
}

// TestCallerDeadlineOnRedis (REQUIREMENTS S3): a request whose context's
// deadline ends its Redis call (a lone call runs inline with that deadline
// on its socket, and fails a moment before the context's timer fires) is
// answered as a request whose context ended, not as a failing store: no
// Floodgate-Degraded: store-unavailable, which marks the store's own
// failures.
func TestCallerDeadlineOnRedis(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testkit.Env(t, "FLOODGATE_TEST_REDIS"), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	st, err := redisstore.New(rdb, redisstore.WithTimeout(5*time.Second),
		redisstore.WithPrefix("httplimit-test:"+t.Name()+":"+time.Now().Format("150405.000000")+":"))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(httplimit.Config{Store: st, Logger: quiet, Rules: []httplimit.Rule{{Pattern: "/",
		Rule: engine.Rule{Policies: []floodgate.Policy{policy("api", floodgate.FixedWindow, 100, time.Minute)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequestWithContext(testkit.Late{Context: context.Background()}, "GET", "/", nil))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get(engine.FieldDegraded) != "" ||
		!strings.Contains(w.Body.String(), "context ended") {
		t.Fatalf("past the request's deadline: %d %v %s", w.Code, w.Header(), w.Body)
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("the next request: %d %s", w.Code, w.Body)
	}
}
