// Command seeds is the setup the product's seed documents describe:
//   - POST /login: 5 per minute, keyed by client IP and route;
//   - /api/: 100 per minute per API key, and at the same time at most 5 per
//     second (a burst policy);
//   - a per-IP limit that runs before authentication (REQUIREMENTS K7), so
//     guessing API keys is itself limited before any key lookup happens;
//   - /healthz never limited.
//
// Run it and try the login limit:
//
//	go run ./examples/seeds
//	for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%{http_code}\n' -X POST localhost:8080/login; done
package main

import (
	"io"
	"log"
	"net/http"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/memorystore"
)

// apiKeys stands for the application's own key check.
var apiKeys = map[string]bool{"demo-key-1": true, "demo-key-2": true}

func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.URL.Path) >= 5 && r.URL.Path[:5] == "/api/" && !apiKeys[r.Header.Get("X-API-Key")] {
			http.Error(w, "invalid API key", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func newHandler(store floodgate.Store) (http.Handler, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "welcome\n") })
	mux.HandleFunc("GET /api/items", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "[]\n") })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })

	// Before authentication: by IP only, cheap, and it covers bad keys too.
	byIP, err := httplimit.New(httplimit.Config{
		Store: store,
		Skip:  []string{"GET /healthz"},
		Rules: []httplimit.Rule{
			{
				Rule: engine.Rule{
					Name:     "login",
					Policies: []floodgate.Policy{{Name: "login", Algorithm: floodgate.SlidingWindowCounter, Quota: 5, Window: time.Minute}},
				},
				Pattern: "POST /login",
				Key:     []httplimit.KeyPart{httplimit.ClientIP(), httplimit.Route()},
			},
			{
				Rule: engine.Rule{
					Name:     "ip",
					Policies: []floodgate.Policy{{Name: "ip", Algorithm: floodgate.SlidingWindowCounter, Quota: 600, Window: time.Minute}},
				},
				Pattern: "/",
				// Under /api/ the per-key limit below sets the fields again
				// (and drops this rule's warning), so there clients see and
				// follow the per-key quota.
			},
		},
	})
	if err != nil {
		return nil, err
	}
	// After authentication: per API key, two policies at once (K3).
	byKey, err := httplimit.New(httplimit.Config{
		Store: store,
		Rules: []httplimit.Rule{{
			Rule: engine.Rule{
				Name: "api",
				Policies: []floodgate.Policy{
					{Name: "api-burst", Algorithm: floodgate.TokenBucket, Quota: 5, Window: time.Second},
					{Name: "api", Algorithm: floodgate.SlidingWindowCounter, Quota: 100, Window: time.Minute},
				},
			},
			Pattern: "/api/",
			Key:     []httplimit.KeyPart{httplimit.APIKey("X-API-Key")},
		}},
	})
	if err != nil {
		return nil, err
	}
	return byIP.Wrap(authenticate(byKey.Wrap(mux))), nil
}

func main() {
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	h, err := newHandler(store)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe("localhost:8080", h))
}
