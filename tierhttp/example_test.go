package tierhttp_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/memorystore"
	"github.com/floodgate/floodgate/tier"
	"github.com/floodgate/floodgate/tierhttp"
)

// Tiers from PostgreSQL behind a cache, with an IP limit guarding the key
// lookup. Compiled, not run: it needs the database and serves forever.
func Example_postgres() {
	ctx := context.Background()
	mux := http.NewServeMux()

	pool, err := pgxpool.New(ctx, os.Getenv("FLOODGATE_DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	if err := tier.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	keys := tier.NewCache(tier.NewPostgres(pool), tier.CacheOptions{TTL: 60 * time.Second})

	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	mw, err := httplimit.New(httplimit.Config{
		Store: store,
		Rules: []httplimit.Rule{{
			Pattern: "/api/",
			Rule: engine.Rule{
				// By client IP, before any key lookup (K7).
				Policies: []floodgate.Policy{{Name: "ip", Algorithm: floodgate.SlidingWindowCounter, Quota: 600, Window: time.Minute}},
				// Unknown keys while PostgreSQL is down: 503. Cached keys still pass.
				FailureMode: floodgate.FailClosed,
			},
			Plan: tierhttp.Plan(keys, tierhttp.PlanOptions{}),
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe("127.0.0.1:8087", mw.Wrap(mux)))
}

// The 401 of a request without a key: problem+json, never cached, and the
// guarding IP limit's fields, which the request met.
func ExamplePlan() {
	keys, err := tier.NewStatic(map[string]tier.Limits{"free": {Policies: []floodgate.Policy{
		{Name: "free-minute", Algorithm: floodgate.SlidingWindowCounter, Quota: 10, Window: time.Minute}}}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	mw, err := httplimit.New(httplimit.Config{Store: store, Rules: []httplimit.Rule{{
		Pattern: "/api/",
		Rule: engine.Rule{
			Policies: []floodgate.Policy{{Name: "ip", Algorithm: floodgate.SlidingWindowCounter, Quota: 600, Window: time.Minute}},
		},
		Plan: tierhttp.Plan(keys, tierhttp.PlanOptions{}),
	}}})
	if err != nil {
		log.Fatal(err)
	}
	rec := httptest.NewRecorder()
	mw.Wrap(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest("GET", "/api/items", nil))
	fmt.Println(rec.Code)
	for _, h := range []string{"Cache-Control", "Content-Type", "RateLimit-Policy", "X-RateLimit-Remaining"} {
		fmt.Printf("%s: %s\n", h, rec.Header().Get(h))
	}
	fmt.Println(rec.Body.String())
	// Output:
	// 401
	// Cache-Control: no-store
	// Content-Type: application/problem+json
	// RateLimit-Policy: "ip";q=600;w=60
	// X-RateLimit-Remaining: 599
	// {"type":"urn:floodgate:problem:api_key_required","title":"API Key Required","status":401,"detail":"This API needs an API key. Send it in the X-API-Key header, or in Authorization with the Bearer scheme."}
}
