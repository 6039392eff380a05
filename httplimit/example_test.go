package httplimit_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clientip"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/memorystore"
)

// send serves one request through h and prints its status and the named
// response field.
func send(h http.Handler, r *http.Request, field string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if v := rec.Header().Get(field); v != "" {
		fmt.Println(r.Method, r.URL.Path, rec.Code, v)
		return
	}
	fmt.Println(r.Method, r.URL.Path, rec.Code)
}

func request(method, path string, hdr ...string) *http.Request {
	r := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	return r
}

func newMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	return mux
}

// Five logins a minute per client address: the sixth is refused.
func Example() {
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	mux := newMux()

	mw, err := httplimit.New(httplimit.Config{
		Store: store,
		Rules: []httplimit.Rule{{
			Pattern: "POST /login",
			Key:     []httplimit.KeyPart{httplimit.ClientIP(), httplimit.Route()},
			Rule: engine.Rule{
				Policies: []floodgate.Policy{{Name: "login", Algorithm: floodgate.SlidingWindowCounter, Quota: 5, Window: time.Minute}},
			},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	handler := mw.Wrap(mux) // then http.ListenAndServe(":8080", handler)

	for range 6 {
		send(handler, request("POST", "/login"), "X-RateLimit-Remaining")
	}
	// Output:
	// POST /login 200 4
	// POST /login 200 3
	// POST /login 200 2
	// POST /login 200 1
	// POST /login 200 0
	// POST /login 429 0
}

// Skipped health checks, a login limit by address, and an API limited per
// API key, sent in X-API-Key or as a Bearer token; a request without a key
// is refused with 401.
func Example_rules() {
	mux := newMux()
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	mw, err := httplimit.New(httplimit.Config{
		Store: store,
		Skip:  []string{"GET /healthz", "GET /readyz"},
		Rules: []httplimit.Rule{
			{
				Pattern: "POST /login",
				Key:     []httplimit.KeyPart{httplimit.ClientIP(), httplimit.Route()},
				Rule: engine.Rule{
					Policies: []floodgate.Policy{{Name: "login", Algorithm: floodgate.SlidingWindowCounter, Quota: 5, Window: time.Minute}},
				},
			},
			{
				Pattern: "/api/",
				Key:     []httplimit.KeyPart{httplimit.APIKey("X-API-Key", "Authorization")},
				Missing: httplimit.RefuseMissing, // 401 without a key
				Rule: engine.Rule{
					Policies: []floodgate.Policy{
						{Name: "api-burst", Algorithm: floodgate.TokenBucket, Quota: 5, Window: time.Second},
						{Name: "api", Algorithm: floodgate.SlidingWindowCounter, Quota: 100, Window: time.Minute},
					},
				},
			},
		},
	})
	if err != nil {
		log.Fatal(err) // names the rule and what is wrong
	}
	handler := mw.Wrap(mux) // then http.ListenAndServe(":8080", handler)

	send(handler, request("GET", "/healthz"), "RateLimit-Policy")
	send(handler, request("GET", "/api/items"), "Content-Type")
	send(handler, request("GET", "/api/items", "X-API-Key", "k1"), "RateLimit-Policy")
	send(handler, request("GET", "/api/items", "Authorization", "Bearer k1"), "X-RateLimit-Remaining")
	// Output:
	// GET /healthz 200
	// GET /api/items 401 application/problem+json
	// GET /api/items 200 "api-burst";q=5;w=1, "api";q=100;w=60
	// GET /api/items 200 3
}

// Behind load balancers in 10.0.0.0/8, the client is the address they
// write in X-Forwarded-For: two clients behind one balancer get a limit
// each.
func Example_behindProxy() {
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	rules := []httplimit.Rule{{Pattern: "POST /login",
		Rule: engine.Rule{
			Policies: []floodgate.Policy{{Name: "login", Algorithm: floodgate.FixedWindow, Quota: 1, Window: time.Minute}},
		}}}

	res, err := clientip.New(clientip.Config{
		TrustedProxies: []string{"10.0.0.0/8"}, // your load balancers
		Sources:        []clientip.Source{clientip.XForwardedFor},
		GroupIPv6:      true, // one partition per /64
	})
	if err != nil {
		log.Fatal(err)
	}
	mw, err := httplimit.New(httplimit.Config{Store: store, ClientIP: res, Rules: rules})
	if err != nil {
		log.Fatal(err)
	}
	handler := mw.Wrap(newMux())
	for _, client := range []string{"203.0.113.7", "203.0.113.7", "203.0.113.8"} {
		r := request("POST", "/login", "X-Forwarded-For", client)
		r.RemoteAddr = "10.0.0.5:40000"
		send(handler, r, "X-RateLimit-Remaining")
	}
	// Output:
	// POST /login 200 0
	// POST /login 429 0
	// POST /login 200 0
}

type userKey struct{}

func userID(ctx context.Context) string { s, _ := ctx.Value(userKey{}).(string); return s }

// An IP limit before authentication, a per-user one after it: guessing
// credentials is limited before any lookup (K7).
func Example_beforeAndAfterAuth() {
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	mux := newMux()
	byIP, err := httplimit.New(httplimit.Config{Store: store, Rules: []httplimit.Rule{{Pattern: "/",
		Rule: engine.Rule{
			Policies: []floodgate.Policy{{Name: "ip", Algorithm: floodgate.GCRA, Quota: 100, Window: time.Minute}},
		}}}})
	if err != nil {
		log.Fatal(err)
	}
	byUser, err := httplimit.New(httplimit.Config{Store: store, Rules: []httplimit.Rule{{Pattern: "/",
		Key: []httplimit.KeyPart{httplimit.FromContext(userID)},
		Rule: engine.Rule{
			Policies: []floodgate.Policy{{Name: "user", Algorithm: floodgate.GCRA, Quota: 2, Window: time.Minute}},
		}}}})
	if err != nil {
		log.Fatal(err)
	}
	authenticate := func(next http.Handler) http.Handler { // stands in for real authentication
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, r.Header.Get("X-User"))))
		})
	}

	handler := byIP.Wrap(authenticate(byUser.Wrap(mux)))

	for _, user := range []string{"alice", "alice", "alice", "bob"} {
		send(handler, request("GET", "/", "X-User", user), "RateLimit-Policy")
	}
	// Output:
	// GET / 200 "user";q=2;w=60
	// GET / 200 "user";q=2;w=60
	// GET / 429 "user";q=2;w=60
	// GET / 200 "user";q=2;w=60
}
