// Command mwserve serves one trivial handler twice, bare and behind the
// httplimit middleware (memory store, one GCRA rule keyed by client IP
// whose quota is never reached), for scripts/bench-middleware.sh to drive
// with wrk.
//
//	go run ./cmd/mwserve -bare 127.0.0.1:18190 -limited 127.0.0.1:18191
package main

import (
	"flag"
	"io"
	"log"
	"net/http"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/memorystore"
)

func main() {
	bare := flag.String("bare", "127.0.0.1:18190", "address of the bare handler")
	limited := flag.String("limited", "127.0.0.1:18191", "address of the handler behind the middleware")
	flag.Parse()

	trivial := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	store := memorystore.New()
	defer store.Close()
	mw, err := httplimit.New(httplimit.Config{Store: store, Rules: []httplimit.Rule{{
		Pattern:  "/",
		Policies: []floodgate.Policy{{Name: "api", Algorithm: floodgate.GCRA, Quota: 1e6, Window: time.Minute}},
	}}})
	if err != nil {
		log.Fatal(err)
	}
	go func() { log.Fatal(http.ListenAndServe(*bare, trivial)) }()
	log.Fatal(http.ListenAndServe(*limited, mw.Wrap(trivial)))
}
