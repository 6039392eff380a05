package bench

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/memorystore"
	"github.com/ulule/limiter/v3"
	ulstdlib "github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	ulmemory "github.com/ulule/limiter/v3/drivers/store/memory"
)

// BenchmarkMiddleware measures what each middleware adds to a trivial
// handler: limits never hit, memory stores, keys by client IP over 1,000
// clients, httptest.ResponseRecorder. "bare" is the handler alone; the cost
// a middleware adds is its ns/op minus bare's. "fields-only" is no
// middleware at all, only the default fields set as constants: the part of
// Floodgate's added cost that any middleware sending them pays.
func BenchmarkMiddleware(b *testing.B) {
	trivial := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	reqs := make([]*http.Request, 1000)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/api/items", nil)
		reqs[i].RemoteAddr = fmt.Sprintf("10.0.%d.%d:40000", i/256, i%256)
	}

	store := memorystore.New()
	defer store.Close()
	newFloodgate := func(style httplimit.HeaderStyle) http.Handler {
		mw, err := httplimit.New(httplimit.Config{Store: store, Headers: style, Rules: []httplimit.Rule{{
			Pattern:  "/",
			Policies: []floodgate.Policy{{Name: "api", Algorithm: floodgate.GCRA, Quota: 1e6, Window: time.Minute}},
		}}})
		if err != nil {
			b.Fatal(err)
		}
		return mw.Wrap(trivial)
	}
	// The floor under any middleware sending Floodgate's default fields:
	// the bare handler setting, as constants, the five fields a real
	// response of the default style carried. What it adds is what net/http
	// and the recorder charge for the fields themselves.
	sample := httptest.NewRecorder()
	newFloodgate(httplimit.Both).ServeHTTP(sample, reqs[0])
	fields := constantFields(sample.Header())
	if len(fields) != 5 {
		b.Fatalf("a default response carries %d rate-limit fields, want 5: %v", len(fields), sample.Header())
	}
	fieldsOnly := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		for _, f := range fields {
			h[f.name] = f.value
		}
		trivial(w, r)
	})

	// ulule: the same quota per minute per client IP, its memory store.
	ul := ulstdlib.NewMiddleware(limiter.New(ulmemory.NewStore(), limiter.Rate{Period: time.Minute, Limit: 1e6}))

	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"bare", trivial},
		// The default sends five fields (draft-11 and legacy); "legacy" sends
		// the same three X-RateLimit-* fields as ulule, for equal work.
		{"floodgate", newFloodgate(httplimit.Both)},
		{"floodgate-legacy", newFloodgate(httplimit.Legacy)},
		// No fields: what the rule, the client key and the decision cost.
		{"floodgate-none", newFloodgate(httplimit.None)},
		{"fields-only", fieldsOnly},
		{"ulule", ul.Handler(trivial)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				rec := httptest.NewRecorder()
				c.h.ServeHTTP(rec, reqs[i%len(reqs)])
				if rec.Code != 200 {
					b.Fatal(rec.Code)
				}
				i++
			}
		})
	}
}

type field struct {
	name  string
	value []string
}

// constantFields lists the rate-limit fields of h, the names in canonical
// form and the values as they are, for a handler to set without a map
// walk or an allocation.
func constantFields(h http.Header) []field {
	var fs []field
	for name, v := range h {
		if strings.HasPrefix(name, "Ratelimit") || strings.HasPrefix(name, "X-Ratelimit") {
			fs = append(fs, field{name, v[:len(v):len(v)]})
		}
	}
	return fs
}
