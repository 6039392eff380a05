package ops_test

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
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/ops"
	"github.com/floodgate/floodgate/redisstore"
)

// logPol counts every admitted request within the last window, so a
// quota lowered and raised again sees the same usage, and no window
// boundary can refill it during the test.
func logPol(name string, quota int64) floodgate.Policy {
	return floodgate.Policy{Name: name, Algorithm: floodgate.SlidingWindowLog, Quota: quota, Window: time.Hour}
}

// replica is one daemon's worth of the pieces: middleware, reductions and
// the admin API.
type replica struct {
	red   *ops.Reductions
	srv   *httptest.Server
	admin *httptest.Server
}

func newReplica(t *testing.T, store floodgate.Store, rs ops.ReductionStore, refresh time.Duration) *replica {
	t.Helper()
	red := ops.NewReductions(ops.ReductionsConfig{Store: rs, Refresh: refresh, Logger: quiet})
	t.Cleanup(red.Close)
	srv := serveMW(t, httplimit.Config{
		Store: store, Capacity: red,
		Rules: []httplimit.Rule{
			{Name: "api", Pattern: "/api/", Policies: []floodgate.Policy{logPol("api", 10)}},
			{Name: "other", Pattern: "/other/", Policies: []floodgate.Policy{logPol("other", 4)}},
		},
	})
	admin := httptest.NewServer(ops.NewAdmin(ops.AdminConfig{Reductions: red, Policies: []string{"api", "other"}, Token: "s3cret", Logger: quiet}))
	t.Cleanup(admin.Close)
	return &replica{red: red, srv: srv, admin: admin}
}

func (r *replica) client() *ops.AdminClient {
	return &ops.AdminClient{BaseURL: r.admin.URL, Token: "s3cret"}
}

// checkHalved expects quota 10 of "api" halved to 5 with used already
// spent: the rest pass showing q=5, the next gets 503
// temporary-reduced-capacity; "other" keeps its quota.
func checkHalved(t *testing.T, reps []*replica, ip string, used int) {
	t.Helper()
	for i := used; i < 5; i++ {
		r := get(t, reps[i%len(reps)].srv.URL, "/api/x", ip)
		if r.status != 200 || r.header.Get("RateLimit-Policy") != `"api";q=5;w=3600` {
			t.Fatalf("request %d under the reduction: %d %q", i+1, r.status, r.header.Get("RateLimit-Policy"))
		}
	}
	r := get(t, reps[len(reps)-1].srv.URL, "/api/x", ip)
	if r.status != 503 || r.problem.Type != header.ProblemTemporaryReducedCapacity || r.problem.Status != 503 ||
		!slices.Equal(r.problem.ViolatedPolicies, []string{"api"}) {
		t.Fatalf("6th request: %d %+v, want 503 temporary-reduced-capacity", r.status, r.problem)
	}
	if r.header.Get("Retry-After") == "" || r.header.Get("Retry-After") == "0" || r.header.Get("RateLimit-Policy") != `"api";q=5;w=3600` ||
		r.header.Get("Content-Type") != header.ProblemContentType || !strings.HasPrefix(r.header.Get("RateLimit"), `"api";r=0;`) {
		t.Fatalf("6th request headers: %v", r.header)
	}
	if r := get(t, reps[0].srv.URL, "/other/x", ip); r.status != 200 || r.header.Get("RateLimit-Policy") != `"other";q=4;w=3600` {
		t.Fatalf("unreduced rule: %d %q", r.status, r.header.Get("RateLimit-Policy"))
	}
}

// checkFull expects the full quota of 10 with 5 used: 5 more pass
// showing q=10, the next is an ordinary 429.
func checkFull(t *testing.T, reps []*replica, ip string) {
	t.Helper()
	for i := range 5 {
		r := get(t, reps[i%len(reps)].srv.URL, "/api/x", ip)
		if r.status != 200 || r.header.Get("RateLimit-Policy") != `"api";q=10;w=3600` {
			t.Fatalf("request %d after the reduction: %d %q", i+6, r.status, r.header.Get("RateLimit-Policy"))
		}
	}
	if r := get(t, reps[0].srv.URL, "/api/x", ip); r.status != 429 || r.problem.Type != header.ProblemQuotaExceeded {
		t.Fatalf("11th request: %d %q, want 429 quota-exceeded", r.status, r.problem.Type)
	}
}

// TestReductionMemory: a 50% reduction for 2 s through the admin API
// halves the quota, refuses with 503 and the right headers, then ends by
// itself.
func TestReductionMemory(t *testing.T) {
	rep := newReplica(t, nil, nil, 0)
	start := time.Now()
	got, err := rep.client().Reduce(context.Background(), ops.ReduceRequest{Policies: []string{"api"}, Factor: 0.5, Duration: "2s", Reason: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Policy != "api" || got[0].Factor != 0.5 || got[0].Reason != "test" ||
		got[0].Until.Before(start.Add(2*time.Second)) || got[0].Until.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("Reduce returned %+v", got)
	}
	if f, until := rep.red.Factor("api"); f != 0.5 || !until.Equal(got[0].Until) {
		t.Fatalf("Factor(api) = %v %v", f, until)
	}
	if f, _ := rep.red.Factor("other"); f != 1 {
		t.Fatalf("Factor(other) = %v", f)
	}
	checkHalved(t, []*replica{rep}, "192.0.2.10", 0)
	if time.Since(start) > 1500*time.Millisecond {
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
		reps = append(reps, newReplica(t, st, ops.NewRedisReductions(rdb, prefix), 200*time.Millisecond))
		if rdb0 == nil {
			rdb0 = rdb
		}
	}
	a, b := reps[0], reps[1]
	hash := prefix + "reductions"
	t.Cleanup(func() { rdb0.Del(context.Background(), hash) })

	got, err := a.client().Reduce(context.Background(), ops.ReduceRequest{Policies: []string{"api"}, Factor: 0.5, Duration: "2s"})
	if err != nil {
		t.Fatal(err)
	}
	until := got[0].Until
	if pttl := rdb0.PTTL(context.Background(), hash).Val(); pttl <= 1500*time.Millisecond || pttl > 2*time.Second {
		t.Fatalf("hash PTTL %v, want about 2s", pttl)
	}
	if !eventually(time.Second, func() bool { f, _ := b.red.Factor("api"); return f == 0.5 }) {
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
	if _, err := b.client().Reduce(context.Background(), ops.ReduceRequest{Policies: []string{"*"}, Factor: 0.25, Duration: "1h"}); err != nil {
		t.Fatal(err)
	}
	if !eventually(time.Second, func() bool { f, _ := a.red.Factor("other"); return f == 0.25 }) {
		t.Fatal(`replica a did not see the "*" reduction`)
	}
	if r := get(t, a.srv.URL, "/other/x", "192.0.2.21"); r.header.Get("RateLimit-Policy") != `"other";q=1;w=3600` {
		t.Fatalf(`under "*" at 25%%: RateLimit-Policy %q`, r.header.Get("RateLimit-Policy"))
	}
	if left, err := a.client().EndReduce(context.Background(), nil); err != nil || len(left) != 0 {
		t.Fatalf("EndReduce: %v %v", left, err)
	}
	if !eventually(time.Second, func() bool { f, _ := b.red.Factor("other"); return f == 1 }) {
		t.Fatal("replica b still reduced after the end")
	}
}

// TestReductionRefreshFailure: while the shared store cannot be read, the
// last known reductions hold and still end on time.
func TestReductionRefreshFailure(t *testing.T) {
	clk := newClock()
	fs := &failingStore{MemoryReductions: ops.NewMemoryReductions(clk.Now)}
	red := ops.NewReductions(ops.ReductionsConfig{Store: fs, Refresh: time.Hour, Logger: quiet, Now: clk.Now})
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
	*ops.MemoryReductions
	fail bool
}

func (f *failingStore) List(ctx context.Context) ([]ops.Reduction, error) {
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
		req  ops.ReduceRequest
		want string
	}{
		{ops.ReduceRequest{Policies: []string{"api"}, Factor: 0, Duration: "1m"}, "factor"},
		{ops.ReduceRequest{Policies: []string{"api"}, Factor: 1.5, Duration: "1m"}, "factor"},
		{ops.ReduceRequest{Policies: []string{"api"}, Factor: 0.5, Duration: "soon"}, "duration"},
		{ops.ReduceRequest{Policies: []string{"api"}, Factor: 0.5, Duration: "-1m"}, "duration"},
		{ops.ReduceRequest{Policies: []string{"api"}, Factor: 0.5, Duration: "48h"}, "duration"},
		{ops.ReduceRequest{Policies: []string{"nope"}, Factor: 0.5, Duration: "1m"}, `unknown policy "nope" (defined: api, other)`},
		{ops.ReduceRequest{Factor: 0.5, Duration: "1m"}, `no policy to reduce (use "*" for all)`},
	} {
		_, err := rep.client().Reduce(context.Background(), tc.req)
		if err == nil || !strings.Contains(err.Error(), ": 400: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want 400 mentioning %q", tc.req, err, tc.want)
		}
	}
	anon := &ops.AdminClient{BaseURL: rep.admin.URL}
	if _, err := anon.Reduce(context.Background(), ops.ReduceRequest{Policies: []string{"api"}, Factor: 0.5, Duration: "1m"}); err == nil || !strings.Contains(err.Error(), ": 401: ") {
		t.Fatalf("without token: %v, want 401", err)
	}
	if list := rep.red.Active(); len(list) != 0 {
		t.Fatalf("a refused request reduced something: %+v", list)
	}
}
