package tierhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/tiertest"
	"github.com/floodgate/floodgate/tier"
	"github.com/floodgate/floodgate/tierhttp"
)

// countingSource counts lookups of another source.
type countingSource struct {
	tier.Source
	n int
}

func (c *countingSource) Lookup(ctx context.Context, h tier.Hash) (tier.Entry, error) {
	c.n++
	return c.Source.Lookup(ctx, h)
}

func staticTiers(t *testing.T) *tier.Static {
	t.Helper()
	s, err := tier.NewStatic(map[string]tier.Limits{
		"free": {Policies: []floodgate.Policy{tiertest.PerMinute("free", 10)}},
		"pro":  {Policies: []floodgate.Policy{tiertest.PerMinute("pro", 1000)}},
	}, []tier.StaticKey{
		{Hash: tier.HashKey("free-1"), Tenant: "acme", Tier: "free"},
		{Hash: tier.HashKey("free-2"), Tenant: "acme", Tier: "free"},
		{Hash: tier.HashKey("free-3"), Tenant: "initech", Tier: "free"},
		{Hash: tier.HashKey("pro-1"), Tenant: "globex", Tier: "pro"},
		{Hash: tier.HashKey("off"), Tenant: "acme", Tier: "pro", Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPlanLimitsByTier(t *testing.T) {
	h := tiertest.API(t, tierhttp.Plan(staticTiers(t), tierhttp.PlanOptions{}), 1e6, floodgate.FailClosed)
	if got := tiertest.Codes(h, "free-1", 11); got[200] != 10 || got[429] != 1 {
		t.Fatalf("free key, 11 requests: %v, want 10 × 200 and 1 × 429", got)
	}
	rec := tiertest.Call(h, "X-API-Key", "free-1")
	if p := tiertest.ProblemOf(t, rec); rec.Code != 429 || rec.Header().Get("Retry-After") == "" || len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "free" {
		t.Fatalf("free 429: %d %q %+v", rec.Code, rec.Header().Get("Retry-After"), p)
	}
	// The quota is the tenant's: another acme key is refused too, another
	// tenant's free key is not.
	if c := tiertest.Call(h, "X-API-Key", "free-2").Code; c != 429 {
		t.Fatalf("second acme key: %d, want 429", c)
	}
	if c := tiertest.Call(h, "X-API-Key", "free-3").Code; c != 200 {
		t.Fatalf("initech key: %d, want 200", c)
	}
	if got := tiertest.Codes(h, "pro-1", 1001); got[200] != 1000 || got[429] != 1 {
		t.Fatalf("pro key, 1001 requests: %v, want 1000 × 200 and 1 × 429", got)
	}
	// The fields speak of every limit the request met: the IP guard's and
	// the tier's.
	rec = tiertest.Call(h, "Authorization", "Bearer pro-1")
	if rec.Code != 429 || rec.Header().Get("RateLimit-Policy") != `"ip-guard";q=1000000;w=60, "pro";q=1000;w=60` {
		t.Fatalf("pro key as bearer: %d, RateLimit-Policy %q", rec.Code, rec.Header().Get("RateLimit-Policy"))
	}
	if got := tiertest.Call(h, "X-API-Key", "free-3").Header().Get("RateLimit-Policy"); got != `"ip-guard";q=1000000;w=60, "free";q=10;w=60` {
		t.Fatalf("free RateLimit-Policy %q", got)
	}
}

func TestPlanRejects(t *testing.T) {
	src := &countingSource{Source: staticTiers(t)}
	h := tiertest.API(t, tierhttp.Plan(src, tierhttp.PlanOptions{}), 1e6, floodgate.FailClosed)
	tiertest.Want401(t, tiertest.Call(h), "api_key_required")
	tiertest.Want401(t, tiertest.Call(h, "X-API-Key", ""), "api_key_required")
	tiertest.Want401(t, tiertest.Call(h, "Authorization", "Basic dXNlcjpwYXNz"), "api_key_required")
	tiertest.Want401(t, tiertest.Call(h, "Authorization", "Bearer"), "api_key_required")
	if src.n != 0 {
		t.Fatalf("%d lookups for requests without a key", src.n)
	}
	tiertest.Want401(t, tiertest.Call(h, "X-API-Key", "nope"), "invalid_api_key")
	tiertest.Want401(t, tiertest.Call(h, "Authorization", "bearer nope"), "invalid_api_key")
	tiertest.Want401(t, tiertest.Call(h, "X-API-Key", "off"), "invalid_api_key")
	tiertest.Want401(t, tiertest.Call(h, "X-API-Key", strings.Repeat("k", 257)), "invalid_api_key")
	if src.n != 3 {
		t.Fatalf("%d lookups, want 3 (an over-long key is refused unread)", src.n)
	}
	if p := tiertest.ProblemOf(t, tiertest.Call(h)); p.Type != tierhttp.ProblemAPIKeyRequired || !strings.Contains(p.Detail, "X-API-Key") {
		t.Fatalf("default problem %+v", p)
	}

	custom := tiertest.API(t, tierhttp.Plan(src, tierhttp.PlanOptions{Header: "Authorization", ProblemTypeBase: "https://api.example/problems/"}), 1e6, floodgate.FailClosed)
	rec := tiertest.Call(custom, "X-API-Key", "pro-1") // that header is not read now
	if p := tiertest.ProblemOf(t, rec); rec.Code != 401 || p.Type != "https://api.example/problems/api_key_required" || strings.Contains(p.Detail, "X-API-Key") {
		t.Fatalf("Authorization only: %d %+v", rec.Code, p)
	}
	if c := tiertest.Call(custom, "Authorization", "Bearer pro-1").Code; c != 200 {
		t.Fatalf("bearer: %d", c)
	}
}

func TestPlanIPGuardFirst(t *testing.T) {
	src := &countingSource{Source: staticTiers(t)}
	h := tiertest.API(t, tierhttp.Plan(src, tierhttp.PlanOptions{}), 5, floodgate.FailClosed)
	for i := range 5 {
		tiertest.Want401(t, tiertest.Call(h, "X-API-Key", "guess-"+string(rune('a'+i))), "invalid_api_key")
	}
	for i := range 20 {
		if c := tiertest.Call(h, "X-API-Key", "guess-"+string(rune('f'+i))).Code; c != 429 {
			t.Fatalf("guess %d past the IP guard: %d, want 429", i, c)
		}
	}
	if src.n != 5 {
		t.Fatalf("%d lookups, want 5: the guard must stop key guessing before any lookup", src.n)
	}
}

func TestPlanPartition(t *testing.T) {
	src := staticTiers(t)
	byKey := tiertest.API(t, tierhttp.Plan(src, tierhttp.PlanOptions{Partition: tierhttp.ByKey}), 1e6, floodgate.FailClosed)
	if a, b := tiertest.Codes(byKey, "free-1", 11), tiertest.Codes(byKey, "free-2", 11); a[200] != 10 || b[200] != 10 {
		t.Fatalf("per key: %v %v, want 10 passes each", a, b)
	}

	p, err := tierhttp.Plan(src, tierhttp.PlanOptions{Route: "POST /upload"})(requestWith("X-API-Key", "free-1"))
	if err != nil || p.Key != "acme|POST /upload" {
		t.Fatalf("partition key %q, %v", p.Key, err)
	}
	p, err = tierhttp.Plan(src, tierhttp.PlanOptions{Partition: tierhttp.ByKey})(requestWith("X-API-Key", "pro-1"))
	if err != nil || p.Key != tier.HashKey("pro-1").ID() || p.Name != "pro" || len(p.Policies) != 1 || p.Policies[0].Quota != 1000 {
		t.Fatalf("by key: %+v %v", p, err)
	}
}

func requestWith(k, v string) *http.Request {
	r, _ := http.NewRequest("GET", "http://api.example/api/items", nil)
	r.Header.Set(k, v)
	return r
}

// downSource is a source whose database is down.
type downSource struct{}

func (downSource) Lookup(context.Context, tier.Hash) (tier.Entry, error) {
	return tier.Entry{}, fmt.Errorf("%w: connection refused", tier.ErrUnavailable)
}

func TestPlanSourceFailure(t *testing.T) {
	var src downSource
	closed := tiertest.API(t, tierhttp.Plan(src, tierhttp.PlanOptions{}), 1e6, floodgate.FailClosed)
	if rec := tiertest.Call(closed, "X-API-Key", "k"); rec.Code != 503 || !strings.Contains(rec.Body.String(), `API key database unavailable for rule`) {
		t.Fatalf("fail-closed: %d %s, want 503 naming the API key database", rec.Code, rec.Body)
	}
	open := tiertest.API(t, tierhttp.Plan(src, tierhttp.PlanOptions{}), 1e6, floodgate.FailOpen)
	if rec := tiertest.Call(open, "X-API-Key", "k"); rec.Code != 200 {
		t.Fatalf("fail-open: %d, want 200", rec.Code)
	}
	// A missing key is refused whatever the source's state.
	tiertest.Want401(t, tiertest.Call(open), "api_key_required")
}
