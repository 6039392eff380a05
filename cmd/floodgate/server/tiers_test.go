package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/pgtest"

	"github.com/jackc/pgx/v5"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/tier"
)

// tiersConfig serves a gateway whose /api/ is guarded by 6 requests per
// minute per client IP, then limited by the tier of the API key. The
// test client is 127.0.0.1, a trusted proxy, so X-Forwarded-For picks the
// client address each case counts under. %s is the tiers section.
const tiersConfig = `
gateway: {listen: "127.0.0.1:0", upstream: %%q}
admin: {listen: "off"}
trusted_proxies: ["127.0.0.1"]
log: {level: error}
policies:
  ip-guard: {quota: 6, window: 1m}
  free-minute: {quota: 2, window: 1m}
  pro-minute: {quota: 5, window: 1m}
%s
rules:
  - match: /api/
    policies: [ip-guard]
    tiers: {partition: tenant}
`

func staticTiers(freeTier string) string {
	return fmt.Sprintf(`tiers:
  source: static
  plans:
    free: [free-minute]
    pro: [pro-minute]
  keys:
    - {key_sha256: %q, tenant: acme, tier: %s}
    - {key_sha256: %q, tenant: acme, tier: %s}
    - {key_sha256: %q, tenant: bigco, tier: pro}
    - {key_sha256: %q, tenant: gone, tier: pro, disabled: true}
`, tier.HashKey("fg_free_1").String(), freeTier, tier.HashKey("fg_free_2").String(), freeTier,
		tier.HashKey("fg_pro").String(), tier.HashKey("fg_revoked").String())
}

// apiCall sends GET /api/items through the gateway as client ip, with key
// in X-API-Key unless it is "".
func apiCall(t *testing.T, f *fixture, ip, key string) (*http.Response, string) {
	t.Helper()
	hdr := []string{"X-Forwarded-For", ip}
	if key != "" {
		hdr = append(hdr, "X-API-Key", key)
	}
	return testkit.Do(t, "GET", f.url(FaceGateway, "/api/items"), "", hdr...)
}

// wantProblem checks the status and problem type suffix of a response.
func wantProblem(t *testing.T, what string, resp *http.Response, body string, status int, typeSuffix string) header.Problem {
	t.Helper()
	var p header.Problem
	if resp.StatusCode != status {
		t.Fatalf("%s: status %d, want %d (body %s)", what, resp.StatusCode, status, body)
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil || !strings.HasSuffix(p.Type, typeSuffix) || p.Status != status {
		t.Fatalf("%s: problem %s (%v), want type …%s", what, body, err, typeSuffix)
	}
	return p
}

// checkTiers runs the requests both sources must answer alike: free keys
// (fg_free_1, fg_free_2 of tenant acme) 2 per minute, the pro key fg_pro
// 5 per minute, and 401 for missing, unknown and revoked keys.
func checkTiers(t *testing.T, f *fixture, free1, free2, pro, revoked string) {
	t.Helper()
	resp, body := apiCall(t, f, "203.0.113.1", "")
	wantProblem(t, "no key", resp, body, 401, ":api_key_required")
	if got := resp.Header.Get("Ratelimit"); !strings.HasPrefix(got, `"ip-guard";r=5;`) {
		t.Errorf("no key: RateLimit = %q, want the IP guard's, 5 left", got)
	}
	resp, body = apiCall(t, f, "203.0.113.1", "fg_unknown")
	wantProblem(t, "unknown key", resp, body, 401, ":invalid_api_key")
	resp, body = apiCall(t, f, "203.0.113.1", revoked)
	wantProblem(t, "revoked key", resp, body, 401, ":invalid_api_key")

	// Both keys of tenant acme spend one quota of 2.
	for i, k := range []string{free1, free2} {
		resp, body := apiCall(t, f, "203.0.113.2", k)
		if resp.StatusCode != 200 || body != "upstream GET /api/items" {
			t.Fatalf("free request %d: %d %s", i+1, resp.StatusCode, body)
		}
		if got := resp.Header.Get("Ratelimit-Policy"); got != `"ip-guard";q=6;w=60, "free-minute";q=2;w=60` {
			t.Errorf("free request %d: RateLimit-Policy = %q", i+1, got)
		}
	}
	resp, body = apiCall(t, f, "203.0.113.2", free1)
	p := wantProblem(t, "3rd free request", resp, body, 429, "quota-exceeded")
	if len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "free-minute" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("3rd free request: violated %v, Retry-After %q", p.ViolatedPolicies, resp.Header.Get("Retry-After"))
	}

	for i := 1; i <= 5; i++ {
		resp, body := apiCall(t, f, "203.0.113.3", pro)
		if resp.StatusCode != 200 || resp.Header.Get("X-Ratelimit-Remaining") != fmt.Sprint(5-i) {
			t.Fatalf("pro request %d: %d %s, remaining %q", i, resp.StatusCode, body, resp.Header.Get("X-Ratelimit-Remaining"))
		}
	}
	resp, body = apiCall(t, f, "203.0.113.3", pro)
	if p := wantProblem(t, "6th pro request", resp, body, 429, "quota-exceeded"); p.ViolatedPolicies[0] != "pro-minute" {
		t.Errorf("6th pro request violated %v", p.ViolatedPolicies)
	}

	// The IP guard runs before the key is even read: once a client has
	// spent it guessing keys, a request without a key gets the guard's
	// 429, not a 401, and a valid key does not get past it either.
	for i := range 6 {
		resp, body := apiCall(t, f, "198.51.100.9", fmt.Sprintf("fg_guess_%d", i))
		wantProblem(t, "guess", resp, body, 401, ":invalid_api_key")
	}
	for _, k := range []string{"", pro} {
		resp, body := apiCall(t, f, "198.51.100.9", k)
		if p := wantProblem(t, "after guessing", resp, body, 429, "quota-exceeded"); p.ViolatedPolicies[0] != "ip-guard" {
			t.Errorf("after guessing, key %q: violated %v, want ip-guard", k, p.ViolatedPolicies)
		}
	}
}

func TestStaticTiers(t *testing.T) {
	f := start(t, fmt.Sprintf(tiersConfig, staticTiers("free")))
	checkTiers(t, f, "fg_free_1", "fg_free_2", "fg_pro", "fg_revoked")

	// A reload rebuilds the static source: acme's keys move to pro.
	if err := os.WriteFile(f.file, fmt.Appendf(nil, strings.Replace(tiersConfig, "%%q", "%q", 1), f.upstream.URL, staticTiers("pro")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	resp, body := apiCall(t, f, "203.0.113.4", "fg_free_1")
	if resp.StatusCode != 200 || resp.Header.Get("Ratelimit-Policy") != `"ip-guard";q=6;w=60, "pro-minute";q=5;w=60` {
		t.Errorf("after reload: %d %s, RateLimit-Policy %q", resp.StatusCode, body, resp.Header.Get("Ratelimit-Policy"))
	}
}

func TestTiersPerKeyAndRoute(t *testing.T) {
	yaml := strings.Replace(fmt.Sprintf(tiersConfig, staticTiers("free")), "tiers: {partition: tenant}", "tiers: {partition: key, per_route: true, header: X-Key}", 1) +
		"  - {match: /v2/, policies: [ip-guard], tiers: {partition: key, per_route: true, header: X-Key}}\n"
	f := start(t, yaml)
	call := func(path, key string) int {
		resp, _ := testkit.Do(t, "GET", f.url(FaceGateway, path), "", "X-Forwarded-For", "203.0.113.5", "X-Key", key)
		return resp.StatusCode
	}
	// Per key, the tenant's second key has a quota of its own; per route,
	// /v2/ counts apart from /api/.
	got := []int{call("/api/a", "fg_free_1"), call("/api/a", "fg_free_1"), call("/api/a", "fg_free_1"),
		call("/api/a", "fg_free_2"), call("/v2/a", "fg_free_1")}
	if want := []int{200, 200, 429, 200, 200}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
}

func TestPostgresTiers(t *testing.T) {
	dbURL := pgtest.Database(t)
	t.Setenv("FG_TEST_DATABASE_URL", dbURL)
	section := `database: {url: "${FG_TEST_DATABASE_URL}"}
tiers:
  source: postgres
  cache: {ttl: 60s, negative_ttl: 5s, query_timeout: 2s}`
	// Registered before start's cleanup, so it runs after the server's
	// shutdown has closed the pool.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })

	f := start(t, fmt.Sprintf(tiersConfig, section))
	pool := f.srv.pg.pool
	var applied string
	if err := conn.QueryRow(ctx, "SELECT string_agg(version, ',') FROM floodgate_schema_migrations").Scan(&applied); err != nil || applied != "001_init" {
		t.Fatalf("migrations applied at start: %q, %v", applied, err)
	}
	for name, quota := range map[string]int64{"free": 2, "pro": 5} {
		p := floodgate.Policy{Name: name + "-minute", Algorithm: floodgate.SlidingWindowCounter, Quota: quota, Window: time.Minute}
		if err := tier.TiersSet(ctx, conn, name, tier.Limits{Policies: []floodgate.Policy{p}}); err != nil {
			t.Fatal(err)
		}
	}
	newKey := func(tenant, tr string) string {
		k, err := tier.AddKey(ctx, conn, tenant, tr)
		if err != nil {
			t.Fatal(err)
		}
		return k.Secret
	}
	free1, free2, pro, revoked := newKey("acme", "free"), newKey("acme", "free"), newKey("bigco", "pro"), newKey("gone", "pro")
	if _, err := tier.RevokeKey(ctx, conn, tier.HashKey(revoked).ID()); err != nil {
		t.Fatal(err)
	}
	checkTiers(t, f, free1, free2, pro, revoked)

	// A reload keeps the pool and the cache.
	if err := f.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if f.srv.pg.pool != pool {
		t.Error("reload opened a new pool")
	}
	if resp, _ := apiCall(t, f, "203.0.113.3", pro); resp.StatusCode != 429 {
		t.Errorf("pro after reload: %d, want 429 (counters and keys survive)", resp.StatusCode)
	}
}

// TestPostgresDownAtStart starts with a database nobody listens for: the
// daemon serves, keys it cannot look up follow the rule's failure mode.
func TestPostgresDownAtStart(t *testing.T) {
	old := migrateRetry
	migrateRetry = 50 * time.Millisecond
	t.Cleanup(func() { migrateRetry = old })
	section := `database: {url: "postgres://u@127.0.0.1:1/none?connect_timeout=1"}
tiers:
  source: postgres
  cache: {retry_interval: 10ms}`
	f := start(t, strings.Replace(fmt.Sprintf(tiersConfig, section), "tiers: {partition: tenant}", "tiers: {}\n    failure_mode: fail-closed", 1))
	resp, body := apiCall(t, f, "203.0.113.1", "fg_any")
	if resp.StatusCode != 503 {
		t.Errorf("lookup with the database down: %d %s, want 503 (fail-closed)", resp.StatusCode, body)
	}
	resp, body = apiCall(t, f, "203.0.113.1", "")
	wantProblem(t, "no key, database down", resp, body, 401, ":api_key_required")
}

// TestRedisConcurrentRequests holds an in-flight slot in Redis: the
// daemon used to refuse concurrent-requests policies with the Redis store.
func TestRedisConcurrentRequests(t *testing.T) {
	addr := testkit.Env(t, "FLOODGATE_TEST_REDIS")
	started, release := make(chan struct{}, 4), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		w.Write([]byte("done"))
	}))
	t.Cleanup(up.Close)
	f := start(t, fmt.Sprintf(`
gateway: {listen: "127.0.0.1:0", upstream: %q}
admin: {listen: "off"}
log: {level: error}
store:
  type: redis
  redis: {url: "redis://%s/0", timeout: 500ms, prefix: "fgtest:%d:"}
policies:
  inflight: {quota: 1, unit: concurrent-requests}
rules:
  - {match: /slow, policies: [inflight]}
`, up.URL, addr, time.Now().UnixNano()))
	first := make(chan int, 1)
	go func() {
		resp, err := http.Get(f.url(FaceGateway, "/slow"))
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the first request never reached the upstream")
	}
	resp, body := testkit.Do(t, "GET", f.url(FaceGateway, "/slow"), "")
	if p := wantProblem(t, "second in flight", resp, body, 429, "quota-exceeded"); p.ViolatedPolicies[0] != "inflight" {
		t.Errorf("second in flight violated %v", p.ViolatedPolicies)
	}
	close(release)
	if code := <-first; code != 200 {
		t.Fatalf("first request: %d", code)
	}
	// The slot is given back when the first response ends.
	if resp, body := testkit.Do(t, "GET", f.url(FaceGateway, "/slow"), ""); resp.StatusCode != 200 || body != "done" {
		t.Errorf("after release: %d %s", resp.StatusCode, body)
	}
}
