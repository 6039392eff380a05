// Command chi uses Floodgate as chi middleware: writes are limited more
// tightly than reads, writes per client IP and route, reads per client IP.
//
//	cd examples/chi && go run .
//	curl -i -X POST localhost:8080/articles
package main

import (
	"io"
	"log"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/memorystore"
)

func newRouter(store floodgate.Store) (http.Handler, error) {
	mw, err := httplimit.New(httplimit.Config{
		Store: store,
		Rules: []httplimit.Rule{
			{
				Pattern: "POST /articles",
				Key:     []httplimit.KeyPart{httplimit.ClientIP(), httplimit.Route()},
				Rule: engine.Rule{
					Policies: []floodgate.Policy{{Name: "writes", Algorithm: floodgate.TokenBucket, Quota: 10, Window: time.Minute, Burst: 3}},
				},
			},
			{
				Pattern: "GET /",
				Rule: engine.Rule{
					Policies: []floodgate.Policy{{Name: "reads", Algorithm: floodgate.GCRA, Quota: 1000, Window: time.Minute}},
				},
			},
		},
	})
	if err != nil {
		return nil, err
	}
	r := chi.NewRouter()
	r.Use(mw.Wrap)
	r.Get("/articles", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "[]\n") })
	r.Post("/articles", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	return r, nil
}

func main() {
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	r, err := newRouter(store)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe("localhost:8080", r))
}
