package reduce_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/opstest"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/ops/admin"
	"github.com/floodgate/floodgate/ops/reduce"
	"github.com/floodgate/floodgate/redisstore"
)

// replica is one daemon's worth of the pieces: middleware, reductions and
// the admin API.
type replica struct {
	red   *reduce.Reductions
	srv   *httptest.Server
	admin *httptest.Server
}

func newReplica(t *testing.T, store floodgate.Store, rs reduce.ReductionStore, refresh time.Duration) *replica {
	t.Helper()
	red := reduce.NewReductions(reduce.ReductionsConfig{Store: rs, Refresh: refresh, Logger: opstest.Quiet})
	t.Cleanup(red.Close)
	srv := opstest.ServeMW(t, httplimit.Config{
		Engine: opstest.Engine(t, engine.Config{Store: store, Capacity: red}),
		Rules: []httplimit.Rule{
			{Rule: engine.Rule{Name: "api", Policies: []floodgate.Policy{opstest.LogPol("api", 10)}}, Pattern: "/api/"},
			{Rule: engine.Rule{Name: "other", Policies: []floodgate.Policy{opstest.LogPol("other", 4)}}, Pattern: "/other/"},
		},
	})
	admin := httptest.NewServer(admin.NewAdmin(admin.Config{Reductions: red, Policies: []string{"api", "other"}, Token: "s3cret", Logger: opstest.Quiet}))
	t.Cleanup(admin.Close)
	return &replica{red: red, srv: srv, admin: admin}
}

func (r *replica) client() *admin.AdminClient {
	return &admin.AdminClient{BaseURL: r.admin.URL, Token: "s3cret"}
}

// checkHalved expects quota 10 of "api" halved to 5 with used already
// spent: the rest pass showing q=5, the next gets 503
// temporary-reduced-capacity; "other" keeps its quota.
func checkHalved(t *testing.T, reps []*replica, ip string, used int) {
	t.Helper()
	for i := used; i < 5; i++ {
		r := opstest.Get(t, reps[i%len(reps)].srv.URL, "/api/x", ip)
		if r.Status != 200 || r.Header.Get("RateLimit-Policy") != `"api";q=5;w=3600` {
			t.Fatalf("request %d under the reduction: %d %q", i+1, r.Status, r.Header.Get("RateLimit-Policy"))
		}
	}
	r := opstest.Get(t, reps[len(reps)-1].srv.URL, "/api/x", ip)
	if r.Status != 503 || r.Problem.Type != header.ProblemTemporaryReducedCapacity || r.Problem.Status != 503 ||
		!slices.Equal(r.Problem.ViolatedPolicies, []string{"api"}) {
		t.Fatalf("6th request: %d %+v, want 503 temporary-reduced-capacity", r.Status, r.Problem)
	}
	if r.Header.Get("Retry-After") == "" || r.Header.Get("Retry-After") == "0" || r.Header.Get("RateLimit-Policy") != `"api";q=5;w=3600` ||
		r.Header.Get("Content-Type") != header.ProblemContentType || !strings.HasPrefix(r.Header.Get("RateLimit"), `"api";r=0;`) {
		t.Fatalf("6th request headers: %v", r.Header)
	}
	if r := opstest.Get(t, reps[0].srv.URL, "/other/x", ip); r.Status != 200 || r.Header.Get("RateLimit-Policy") != `"other";q=4;w=3600` {
		t.Fatalf("unreduced rule: %d %q", r.Status, r.Header.Get("RateLimit-Policy"))
	}
}

// checkFull expects the full quota of 10 with 5 used: 5 more pass
// showing q=10, the next is an ordinary 429.
func checkFull(t *testing.T, reps []*replica, ip string) {
	t.Helper()
	for i := range 5 {
		r := opstest.Get(t, reps[i%len(reps)].srv.URL, "/api/x", ip)
		if r.Status != 200 || r.Header.Get("RateLimit-Policy") != `"api";q=10;w=3600` {
			t.Fatalf("request %d after the reduction: %d %q", i+6, r.Status, r.Header.Get("RateLimit-Policy"))
		}
	}
	if r := opstest.Get(t, reps[0].srv.URL, "/api/x", ip); r.Status != 429 || r.Problem.Type != header.ProblemQuotaExceeded {
		t.Fatalf("11th request: %d %q, want 429 quota-exceeded", r.Status, r.Problem.Type)
	}
}

// TestReductionMemory: a 50% reduction for 2 s through the admin API
// halves the quota, refuses with 503 and the right headers, then ends by
// itself.
func TestReductionMemory(t *testing.T) {
	rep := newReplica(t, nil, nil, 0)
	start := time.Now()
	got, err := rep.client().Reduce(context.Background(), admin.ReduceRequest{Policies: []string{"api"}, Factor: 0.5, Duration: "5s", Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Policy != "api" || got[0].Factor != 0.5 || got[0].Reason != "test" ||
		got[0].Until.Before(start.Add(5*time.Second)) || got[0].Until.After(time.Now().Add(5*time.Second)) {
		t.Fatalf("Reduce returned %+v", got)
	}
	if f, until := rep.red.Factor("api"); f != 0.5 || !until.Equal(got[0].Until) {
		t.Fatalf("Factor(api) = %v %v", f, until)
	}
	if f, _ := rep.red.Factor("other"); f != 1 {
		t.Fatalf("Factor(other) = %v", f)
	}
	checkHalved(t, []*replica{rep}, "192.0.2.10", 0)
	if time.Since(start) > 4500*time.Millisecond { // ~0.1 s unloaded
		t.Fatalf("too slow to test within the reduction: %v", time.Since(start))
	}
	time.Sleep(time.Until(got[0].Until))
	if f, _ := rep.red.Factor("api"); f != 1 {
		t.Fatalf("Factor(api) after the end = %v", f)
	}
	checkFull(t, []*replica{rep}, "192.0.2.10")
	if list, _ := rep.client().Reductions(context.Background()); len(list) != 0 {
		t.Fatalf("reductions after the end: %+v", list)
	}
}

// TestReductionRedis: the reduction set through one daemon holds on a
// second one sharing the Redis store, on both sides of the quota, and
// ends on both; the hash expires by itself in Redis.
func TestReductionRedis(t *testing.T) {
	addr := testkit.Env(t, "FLOODGATE_TEST_REDIS")
	prefix := fmt.Sprintf("fgtest:ops:%d-%d:", os.Getpid(), time.Now().UnixNano())
	var reps []*replica
	var rdb0 *redis.Client
	for range 2 {
		// Each replica has its own connections, as two processes would.
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { rdb.Close() })
		if err := rdb.Ping(context.Background()).Err(); err != nil {
			t.Fatalf("redis %s not reachable (%v): run scripts/services-up.sh or `make test`", addr, err)
		}
		st, err := redisstore.New(rdb, redisstore.WithPrefix(prefix), redisstore.WithTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, newReplica(t, st, reduce.NewRedisReductions(rdb, prefix), 200*time.Millisecond))
		if rdb0 == nil {
			rdb0 = rdb
		}
	}
	a, b := reps[0], reps[1]
	hash := prefix + "reductions"
	t.Cleanup(func() { rdb0.Del(context.Background(), hash) })

	got, err := a.client().Reduce(context.Background(), admin.ReduceRequest{Policies: []string{"api"}, Factor: 0.5, Duration: "2s"})
	if err != nil {
		t.Fatal(err)
	}
	until := got[0].Until
	if pttl := rdb0.PTTL(context.Background(), hash).Val(); pttl <= 1500*time.Millisecond || pttl > 2*time.Second {
		t.Fatalf("hash PTTL %v, want about 2s", pttl)
	}
	if !opstest.Eventually(time.Second, func() bool { f, _ := b.red.Factor("api"); return f == 0.5 }) {
		t.Fatal("the second replica did not see the reduction within 1 s")
	}
	if _, u := b.red.Factor("api"); u.Sub(until).Abs() > 100*time.Millisecond {
		t.Fatalf("second replica's end %v, first's %v", u, until)
	}
	// Both replicas count in the same Redis: requests alternate between them.
	checkHalved(t, reps, "192.0.2.20", 0)
	// Each replica converts the end from the Redis clock to its own, which
	// may put it a few milliseconds later than the first replica's.
	time.Sleep(time.Until(until) + 50*time.Millisecond)
	for i, r := range reps {
		if f, _ := r.red.Factor("api"); f != 1 {
			t.Fatalf("replica %d: Factor(api) after the end = %v", i, f)
		}
	}
	checkFull(t, reps, "192.0.2.20")
	if n := rdb0.Exists(context.Background(), hash).Val(); n != 0 {
		t.Fatalf("hash %s still exists after its last reduction ended", hash)
	}

	// Ending early through one replica reaches the other too.
	if _, err := b.client().Reduce(context.Background(), admin.ReduceRequest{Policies: []string{"*"}, Factor: 0.25, Duration: "1h"}); err != nil {
		t.Fatal(err)
	}
	if !opstest.Eventually(time.Second, func() bool { f, _ := a.red.Factor("other"); return f == 0.25 }) {
		t.Fatal(`replica a did not see the "*" reduction`)
	}
	if r := opstest.Get(t, a.srv.URL, "/other/x", "192.0.2.21"); r.Header.Get("RateLimit-Policy") != `"other";q=1;w=3600` {
		t.Fatalf(`under "*" at 25%%: RateLimit-Policy %q`, r.Header.Get("RateLimit-Policy"))
	}
	if left, err := a.client().EndReduce(context.Background(), nil); err != nil || len(left) != 0 {
		t.Fatalf("EndReduce: %v %v", left, err)
	}
	if !opstest.Eventually(time.Second, func() bool { f, _ := b.red.Factor("other"); return f == 1 }) {
		t.Fatal("replica b still reduced after the end")
	}
}

// TestReductionRefreshFailure: while the shared store cannot be read, the
// last known reductions hold and still end on time.
func TestReductionRefreshFailure(t *testing.T) {
	clk := opstest.NewClock()
	fs := &failingStore{MemoryReductions: reduce.NewMemoryReductions(clk.Now)}
	red := reduce.NewReductions(reduce.ReductionsConfig{Store: fs, Refresh: time.Hour, Logger: opstest.Quiet, Now: clk.Now})
	defer red.Close()
	if _, err := red.Set(context.Background(), []string{"api"}, 0.5, time.Minute, ""); err != nil {
		t.Fatal(err)
	}
	fs.fail = true
	if err := red.Refresh(context.Background()); err == nil {
		t.Fatal("Refresh on a failing store returned nil")
	}
	if f, _ := red.Factor("api"); f != 0.5 {
		t.Fatalf("Factor during the failure = %v, want the last known 0.5", f)
	}
	clk.Advance(time.Minute)
	if f, _ := red.Factor("api"); f != 1 {
		t.Fatalf("Factor after the end = %v, want 1", f)
	}
}

type failingStore struct {
	*reduce.MemoryReductions
	fail bool
}

func (f *failingStore) List(ctx context.Context) ([]reduce.Reduction, error) {
	if f.fail {
		return nil, fmt.Errorf("store down")
	}
	return f.MemoryReductions.List(ctx)
}

// TestReduceAPIErrors: the admin API refuses bad reductions with 400 and a
// problem detail, and changes without the token with 401.
func TestReduceAPIErrors(t *testing.T) {
	rep := newReplica(t, nil, nil, 0)
	for _, tc := range []struct {
		req  admin.ReduceRequest
		want string
	}{
		{admin.ReduceRequest{Policies: []string{"api"}, Factor: 0, Duration: "1m"}, "factor"},
		{admin.ReduceRequest{Policies: []string{"api"}, Factor: 1.5, Duration: "1m"}, "factor"},
		{admin.ReduceRequest{Policies: []string{"api"}, Factor: 0.5, Duration: "soon"}, "duration"},
		{admin.ReduceRequest{Policies: []string{"api"}, Factor: 0.5, Duration: "-1m"}, "duration"},
		{admin.ReduceRequest{Policies: []string{"api"}, Factor: 0.5, Duration: "48h"}, "duration"},
		{admin.ReduceRequest{Policies: []string{"nope"}, Factor: 0.5, Duration: "1m"}, `unknown policy "nope" (defined: api, other)`},
		{admin.ReduceRequest{Factor: 0.5, Duration: "1m"}, `no policy to reduce (use "*" for all)`},
	} {
		_, err := rep.client().Reduce(context.Background(), tc.req)
		if err == nil || !strings.Contains(err.Error(), ": 400: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want 400 mentioning %q", tc.req, err, tc.want)
		}
	}
	anon := &admin.AdminClient{BaseURL: rep.admin.URL}
	if _, err := anon.Reduce(context.Background(), admin.ReduceRequest{Policies: []string{"api"}, Factor: 0.5, Duration: "1m"}); err == nil || !strings.Contains(err.Error(), ": 401: ") {
		t.Fatalf("without token: %v, want 401", err)
	}
	if list := rep.red.Active(); len(list) != 0 {
		t.Fatalf("a refused request reduced something: %+v", list)
	}
}
