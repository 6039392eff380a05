package tierhttp_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/tiertest"
	"github.com/floodgate/floodgate/tier"
	"github.com/floodgate/floodgate/tierhttp"
	"github.com/floodgate/floodgate/tierhttp/internal/pgtest"
)

// testDB creates a database of its own on the PostgreSQL that
// FLOODGATE_TEST_POSTGRES names and drops it when the test ends. The pool
// reaches it through a proxy the test can cut, and counts the key lookups
// it runs.
func testDB(t *testing.T) (*pgxpool.Pool, *proxy, *atomic.Int64) {
	t.Helper()
	u, err := url.Parse(pgtest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	px := startProxy(t, u.Host)
	u.Host = px.addr()
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	lookups := &atomic.Int64{}
	cfg.ConnConfig.Tracer = lookupCounter{lookups}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // runs before the DROP, registered earlier
	return pool, px, lookups
}

// lookupCounter counts the queries that look a key up, as the database
// sees them: every one that reaches PostgreSQL's connection.
type lookupCounter struct{ n *atomic.Int64 }

func (c lookupCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "FROM api_keys k LEFT JOIN tier_policies") {
		c.n.Add(1)
	}
	return ctx
}

func (lookupCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// proxy forwards TCP to PostgreSQL until blocked: then it drops every open
// connection and closes new ones at once, as a database that went away.
type proxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	blocked bool
	conns   map[net.Conn]struct{}
}

func startProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.block(true)
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		blocked := p.blocked
		p.mu.Unlock()
		if blocked {
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

func (p *proxy) block(b bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = b
	if b {
		for c := range p.conns {
			c.Close()
		}
	}
}

func addKey(t *testing.T, db tier.DB, tenant, tierName string) string {
	t.Helper()
	k, err := tier.AddKey(context.Background(), db, tenant, tierName)
	if err != nil {
		t.Fatal(err)
	}
	if tier.HashKey(k.Secret) != k.Hash || !strings.HasPrefix(k.Secret, tier.KeyPrefix) || k.Tenant != tenant || k.Tier != tierName {
		t.Fatalf("AddKey returned %+v", k)
	}
	return k.Secret
}

// TestPostgres: package tier's PostgreSQL source (migrations, tiers, keys,
// revocation, outages) end to end behind the plan. It is tierhttp's test,
// not tier's, because tier's module cannot require tierhttp's, which
// requires it.
func TestPostgres(t *testing.T) {
	pool, px, lookups := testDB(t)
	ctx := context.Background()
	for range 2 { // idempotent
		if err := tier.Migrate(ctx, pool); err != nil {
			t.Fatal(err)
		}
	}
	for name, quota := range map[string]int64{"free": 10, "pro": 1000} {
		if err := tier.TiersSet(ctx, pool, name, tier.Limits{Policies: []floodgate.Policy{tiertest.PerMinute(name, quota)}}); err != nil {
			t.Fatal(err)
		}
	}
	freeKey := addKey(t, pool, "acme", "free")
	proKey := addKey(t, pool, "globex", "pro")
	if _, err := tier.AddKey(ctx, pool, "acme", "gold"); err == nil || !strings.Contains(err.Error(), `no tier "gold"`) {
		t.Fatalf("key on a missing tier: %v", err)
	}
	// Only hashes are stored: no row, rendered as text, holds a key.
	var plain int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM api_keys k WHERE strpos(k::text, $1) > 0 OR strpos(k::text, $2) > 0", freeKey, proKey).Scan(&plain); err != nil || plain != 0 {
		t.Fatalf("rows holding a plaintext key: %d, %v", plain, err)
	}

	clk := tiertest.NewClock()
	logs := &tiertest.Logs{}
	cache := tier.NewCache(tier.NewPostgres(pool), tier.CacheOptions{
		TTL: time.Minute, NegativeTTL: 5 * time.Second, Now: clk.Now, Logger: slog.New(logs),
	})
	plan := tierhttp.Plan(cache, tierhttp.PlanOptions{})
	h := tiertest.API(t, plan, 1e6, floodgate.FailClosed)
	hOpen := tiertest.API(t, plan, 1e6, floodgate.FailOpen)

	t.Run("tiers and query count", func(t *testing.T) {
		before := lookups.Load()
		if c := tiertest.Call(h, "X-API-Key", freeKey).Code; c != 200 {
			t.Fatalf("first free request: %d", c)
		}
		cold := lookups.Load() - before
		got := tiertest.Codes(h, freeKey, 10)
		warm := lookups.Load() - before - cold
		if got[200] != 9 || got[429] != 1 {
			t.Fatalf("free requests 2–11: %v, want 9 × 200 then 429", got)
		}
		if cold != 1 || warm != 0 {
			t.Fatalf("queries: %d for the cold request, %d for 10 warm ones; want 1 and 0", cold, warm)
		}
		t.Logf("queries: cold request %d, 10 warm requests %d", cold, warm)
		if got := tiertest.Codes(h, proKey, 1001); got[200] != 1000 || got[429] != 1 {
			t.Fatalf("pro key, 1001 requests: %v, want 1000 × 200 and 1 × 429", got)
		}
		if n := lookups.Load() - before; n != 2 {
			t.Fatalf("%d queries for 1012 requests with 2 keys, want 2", n)
		}
	})

	t.Run("burst for a new key makes one query", func(t *testing.T) {
		key := addKey(t, pool, "hooli", "pro")
		before := lookups.Load()
		var wg sync.WaitGroup
		var ok atomic.Int64
		for range 100 {
			wg.Go(func() {
				if tiertest.Call(h, "X-API-Key", key).Code == 200 {
					ok.Add(1)
				}
			})
		}
		wg.Wait()
		if n := lookups.Load() - before; n != 1 || ok.Load() != 100 {
			t.Fatalf("100 concurrent requests: %d passed, %d queries; want 100 and 1", ok.Load(), n)
		}
	})

	t.Run("401s", func(t *testing.T) {
		before := lookups.Load()
		tiertest.Want401(t, tiertest.Call(h), "api_key_required")
		for range 5 {
			tiertest.Want401(t, tiertest.Call(h, "X-API-Key", "fg_not-a-key"), "invalid_api_key")
		}
		if n := lookups.Load() - before; n != 1 {
			t.Fatalf("%d queries for no key and 5 × one unknown key, want 1", n)
		}
	})

	t.Run("revoked key refused once its entry expires", func(t *testing.T) {
		key := addKey(t, pool, "umbrella", "free")
		if c := tiertest.Call(h, "Authorization", "Bearer "+key).Code; c != 200 {
			t.Fatalf("before revoke: %d", c)
		}
		// Given the key itself, RevokeKey refuses, names its ID and never
		// repeats the key.
		if _, err := tier.RevokeKey(ctx, pool, key); err == nil || strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), tier.HashKey(key).ID()) {
			t.Fatalf("revoke by the key itself: %v; want a refusal naming its ID, not the key", err)
		}
		if c := tiertest.Call(h, "X-API-Key", key).Code; c != 200 {
			t.Fatalf("after the refused revoke: %d, want 200", c)
		}
		if id, err := tier.RevokeKey(ctx, pool, tier.HashKey(key).ID()); err != nil || id != tier.HashKey(key).ID() {
			t.Fatalf("revoke by ID: %q %v", id, err)
		}
		if id, err := tier.RevokeKey(ctx, pool, tier.HashKey(key).String()); err != nil || id != tier.HashKey(key).ID() {
			t.Fatalf("revoke by hash (again: no error): %q %v", id, err)
		}
		clk.Add(59 * time.Second)
		if c := tiertest.Call(h, "X-API-Key", key).Code; c != 200 {
			t.Fatalf("revoked, entry 59 s old: %d, want 200 from the cache", c)
		}
		clk.Add(time.Second)
		tiertest.Want401(t, tiertest.Call(h, "X-API-Key", key), "invalid_api_key")
		keys, err := tier.ListKeys(ctx, pool, "umbrella")
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(keys, func(k tier.Key) bool { return k.ID == tier.HashKey(key).ID() }); i < 0 || keys[i].Enabled || keys[i].Revoked == nil {
			t.Fatalf("keys list: %+v", keys)
		}
		if _, err := tier.RevokeKey(ctx, pool, "0123456789abcdef"); err == nil {
			t.Fatal("revoking a missing key succeeded")
		}
	})

	t.Run("PostgreSQL down", func(t *testing.T) {
		warmKey := addKey(t, pool, "initech", "pro")
		if c := tiertest.Call(h, "X-API-Key", warmKey).Code; c != 200 {
			t.Fatalf("warming: %d", c)
		}
		clk.Add(30 * time.Second)
		if c := tiertest.Call(h, "X-API-Key", proKey).Code; c != 429 { // refreshed; still out of quota
			t.Fatalf("pro key: %d", c)
		}
		px.block(true)
		before := cache.Stats()

		// Fresh entries answer without a query.
		if c := tiertest.Call(h, "X-API-Key", warmKey).Code; c != 200 {
			t.Fatalf("warm key, database down: %d, want 200", c)
		}
		clk.Add(45 * time.Second) // warmKey's entry expires; proKey's does not
		for i := range 20 {
			if c := tiertest.Call(h, "X-API-Key", warmKey).Code; c != 200 {
				t.Fatalf("expired entry, database down, request %d: %d, want 200", i, c)
			}
			if c := tiertest.Call(h, "X-API-Key", proKey).Code; c != 429 {
				t.Fatalf("pro key, database down: %d, want its tier's 429", c)
			}
			if c := tiertest.Call(h, "X-API-Key", "fg_unknown").Code; c != 503 {
				t.Fatalf("unknown key, fail-closed rule: %d, want 503", c)
			}
			if c := tiertest.Call(hOpen, "X-API-Key", "fg_unknown").Code; c != 200 {
				t.Fatalf("unknown key, fail-open rule: %d, want 200", c)
			}
		}
		st := cache.Stats()
		if !st.Down || st.Outages != 1 || st.Failures-before.Failures != 1 || st.Stale-before.Stale != 20 {
			t.Fatalf("stats %+v (before %+v): want down, 1 outage, 1 failed query, 20 stale answers", st, before)
		}
		if n := logs.Count("unavailable"); n != 1 {
			t.Fatalf("%d outage log records for 80 requests, want 1", n)
		}

		px.block(false)
		clk.Add(time.Second) // the next probe is due
		if c := tiertest.Call(h, "X-API-Key", warmKey).Code; c != 200 {
			t.Fatalf("after recovery: %d", c)
		}
		if st := cache.Stats(); st.Down || logs.Count("recovered") != 1 {
			t.Fatalf("after recovery: %+v", st)
		}
		t.Logf("outage: %d failed queries, %d stale answers, 1 log record", st.Failures-before.Failures, st.Stale-before.Stale)
	})

	t.Run("tiers list", func(t *testing.T) {
		if got, want := tiersList(t, ctx, pool), "free 1 name=free,quota=10,window=1m0s,algorithm=sliding-window-counter\n"+
			"pro 3 name=pro,quota=1000,window=1m0s,algorithm=sliding-window-counter\n"; got != want {
			t.Fatalf("tiers list:\n%s\nwant:\n%s", got, want)
		}
		// A new tier definition reaches keys once their entries expire.
		if err := tier.TiersSet(ctx, pool, "free", tier.Limits{Policies: []floodgate.Policy{tiertest.PerMinute("free-v2", 3)}}); err != nil {
			t.Fatal(err)
		}
		clk.Add(time.Minute)
		rec := tiertest.Call(h, "X-API-Key", freeKey)
		if rec.Code != 200 || rec.Header().Get("RateLimit-Policy") != `"ip-guard";q=1000000;w=60, "free-v2";q=3;w=60` {
			t.Fatalf("after tiers set: %d %q", rec.Code, rec.Header().Get("RateLimit-Policy"))
		}
		if err := tier.TiersSet(ctx, pool, "bad", tier.Limits{Policies: []floodgate.Policy{{Name: "x", Algorithm: floodgate.FixedWindow, Quota: 1, Window: 1500 * time.Microsecond}}}); err == nil {
			t.Fatal("a window of 1.5 ms was stored")
		}
		// An in-flight cap needs no window or algorithm, though every row
		// of tier_policies holds one.
		if err := tier.TiersSet(ctx, pool, "capped", tier.Limits{Concurrency: []floodgate.Concurrency{{Name: "inflight", Max: 4}}}); err != nil {
			t.Fatal(err)
		}
		if got := tiersList(t, ctx, pool); !strings.Contains(got, "capped 0 name=inflight,quota=4,unit=concurrent-requests\n") {
			t.Fatalf("in-flight cap stored and listed:\n%s", got)
		}
	})
}

// tiersList is ListTiers as lines "name keys limits".
func tiersList(t *testing.T, ctx context.Context, db tier.DB) string {
	t.Helper()
	tiers, err := tier.ListTiers(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, ti := range tiers {
		fmt.Fprintf(&b, "%s %d %s\n", ti.Name, ti.Keys, tier.FormatLimits(ti.Limits))
	}
	return b.String()
}
