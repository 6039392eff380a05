// Command mwserve serves one trivial handler four times: bare, behind the
// httplimit middleware with its default fields and with the legacy fields
// only (a memory store each, one GCRA rule keyed by client IP whose quota,
// a hundred million a minute, is never reached), and behind ulule/limiter's
// net/http middleware with the same quota, for scripts/bench-middleware.sh
// to drive with wrk.
//
//	go run ./cmd/mwserve -bare 127.0.0.1:18190 -limited 127.0.0.1:18191 -legacy 127.0.0.1:18192 -ulule 127.0.0.1:18193
package main

import (
	"flag"
	"io"
	"log"
	"net/http"
	"time"

	"github.com/ulule/limiter/v3"
	ulstdlib "github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	ulmemory "github.com/ulule/limiter/v3/drivers/store/memory"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/memorystore"
)

func main() {
	bare := flag.String("bare", "127.0.0.1:18190", "address of the bare handler")
	limited := flag.String("limited", "127.0.0.1:18191", "address of the handler behind the middleware, default fields")
	legacy := flag.String("legacy", "127.0.0.1:18192", "address of the handler behind the middleware, legacy fields only")
	ulule := flag.String("ulule", "127.0.0.1:18193", "address of the handler behind ulule/limiter's middleware")
	flag.Parse()

	trivial := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	wrap := func(style httplimit.HeaderStyle) http.Handler {
		mw, err := httplimit.New(httplimit.Config{Store: memorystore.New(), Headers: style, Rules: []httplimit.Rule{{
			Pattern:  "/",
			Policies: []floodgate.Policy{{Name: "api", Algorithm: floodgate.GCRA, Quota: 1e8, Window: time.Minute}},
		}}})
		if err != nil {
			log.Fatal(err)
		}
		return mw.Wrap(trivial)
	}
	ul := ulstdlib.NewMiddleware(limiter.New(ulmemory.NewStore(), limiter.Rate{Period: time.Minute, Limit: 1e8}))
	go func() { log.Fatal(http.ListenAndServe(*bare, trivial)) }()
	go func() { log.Fatal(http.ListenAndServe(*legacy, wrap(httplimit.Legacy))) }()
	go func() { log.Fatal(http.ListenAndServe(*ulule, ul.Handler(trivial))) }()
	log.Fatal(http.ListenAndServe(*limited, wrap(httplimit.Both)))
}
