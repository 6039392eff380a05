// Command nethttp limits a plain net/http server: 100 requests per minute
// per client IP on every route, with /healthz never limited.
//
//	go run ./examples/nethttp
//	curl -i localhost:8080/hello
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

func newHandler(store floodgate.Store) (http.Handler, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })

	mw, err := httplimit.New(httplimit.Config{
		Store: store,
		Skip:  []string{"GET /healthz"},
		Rules: []httplimit.Rule{{
			Pattern: "/",
			Rule: engine.Rule{
				Policies: []floodgate.Policy{{
					Name: "per-ip", Algorithm: floodgate.SlidingWindowCounter, Quota: 100, Window: time.Minute,
				}},
			},
		}},
	})
	if err != nil {
		return nil, err
	}
	return mw.Wrap(mux), nil
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
