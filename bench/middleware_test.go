package bench

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/internal/testkit"
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

	store := testkit.Memory(b)
	newFloodgate := func(style engine.HeaderStyle) http.Handler {
		h, err := Floodgate(store, style, 1e6, trivial)
		if err != nil {
			b.Fatal(err)
		}
		return h
	}
	fieldsOnly, err := FieldsOnly(newFloodgate(engine.Both), trivial)
	if err != nil {
		b.Fatal(err)
	}

	// ulule: the same quota per minute per client IP, its memory store.
	ul := ulstdlib.NewMiddleware(limiter.New(ulmemory.NewStore(), limiter.Rate{Period: time.Minute, Limit: 1e6}))
	sv, err := Sethvargo(trivial)
	if err != nil {
		b.Fatal(err)
	}

	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"bare", trivial},
		// The default sends five fields (draft-11 and legacy); "legacy" sends
		// the same three X-RateLimit-* fields as ulule, for equal work.
		{"floodgate", newFloodgate(engine.Both)},
		{"floodgate-legacy", newFloodgate(engine.Legacy)},
		// No fields: what the rule, the client key and the decision cost.
		{"floodgate-none", newFloodgate(engine.None)},
		{"fields-only", fieldsOnly},
		{"ulule", ul.Handler(trivial)},
		// The three legacy fields, as ulule.
		{"sethvargo", sv},
		// Six fields of its own.
		{"tollbooth", Tollbooth(1e6, trivial)},
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
