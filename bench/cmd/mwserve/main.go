// Command mwserve serves one trivial handler six times, for
// scripts/bench-middleware.sh to drive with wrk: bare, the handler alone;
// limited, legacy and none, behind the httplimit middleware with its
// default fields, the legacy fields only and no fields (a memory store
// each, one GCRA rule keyed by client IP whose quota, a hundred million a
// minute, is never reached); fields, no middleware but the handler setting
// as constants the five fields a default response carries, the floor under
// any middleware that sends them; ulule, behind ulule/limiter's
// net/http middleware with the same quota; sethvargo and tollbooth,
// behind sethvargo/go-limiter's httplimit and didip/tollbooth's
// LimitHandler, the same quota again (bench.Sethvargo, bench.Tollbooth).
//
//	go run ./cmd/mwserve -bare 127.0.0.1:18190 -limited 127.0.0.1:18191 ...
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

	"github.com/floodgate/floodgate/bench"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/memorystore"
)

func main() {
	addrs := map[string]*string{
		"bare":      flag.String("bare", "127.0.0.1:18190", "address of the bare handler"),
		"limited":   flag.String("limited", "127.0.0.1:18191", "address of the handler behind the middleware, default fields"),
		"legacy":    flag.String("legacy", "127.0.0.1:18192", "address of the handler behind the middleware, legacy fields only"),
		"ulule":     flag.String("ulule", "127.0.0.1:18193", "address of the handler behind ulule/limiter's middleware"),
		"none":      flag.String("none", "127.0.0.1:18194", "address of the handler behind the middleware, no fields"),
		"fields":    flag.String("fields", "127.0.0.1:18195", "address of the handler setting the default fields as constants"),
		"sethvargo": flag.String("sethvargo", "127.0.0.1:18196", "address of the handler behind sethvargo/go-limiter's httplimit"),
		"tollbooth": flag.String("tollbooth", "127.0.0.1:18197", "address of the handler behind didip/tollbooth"),
	}
	flag.Parse()

	trivial := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	wrap := func(style engine.HeaderStyle) http.Handler {
		store, err := memorystore.New()
		if err != nil {
			log.Fatal(err)
		}
		h, err := bench.Floodgate(store, style, 1e8, trivial)
		if err != nil {
			log.Fatal(err)
		}
		return h
	}
	fields, err := bench.FieldsOnly(wrap(engine.Both), trivial)
	if err != nil {
		log.Fatal(err)
	}
	ul := ulstdlib.NewMiddleware(limiter.New(ulmemory.NewStore(), limiter.Rate{Period: time.Minute, Limit: 1e8}))
	sv, err := bench.Sethvargo(trivial)
	if err != nil {
		log.Fatal(err)
	}
	handlers := map[string]http.Handler{
		"bare":      trivial,
		"limited":   wrap(engine.Both),
		"legacy":    wrap(engine.Legacy),
		"none":      wrap(engine.None),
		"fields":    fields,
		"ulule":     ul.Handler(trivial),
		"sethvargo": sv,
		"tollbooth": bench.Tollbooth(1e8, trivial),
	}
	errs := make(chan error)
	for name, h := range handlers {
		go func() { errs <- http.ListenAndServe(*addrs[name], h) }()
	}
	log.Fatal(<-errs)
}
