package httplimit_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/httplimit"
)

// BenchmarkHeadersSet is the cost of the default fields on one response of
// a one-policy rule: formatting, the clock read and the map inserts
// (docs/BENCHMARKS.md weighs it against the middleware's added cost).
func BenchmarkHeadersSet(b *testing.B) {
	p := floodgate.Policy{Name: "api", Algorithm: floodgate.GCRA, Quota: 1e6, Window: time.Minute}
	field, err := httplimit.PolicyField([]floodgate.Policy{p})
	if err != nil {
		b.Fatal(err)
	}
	value := []string{field}
	results := []floodgate.Result{{Policy: p, Allowed: true, Remaining: 999_998, ResetAfter: 60 * time.Microsecond}}
	hw := &httplimit.Headers{Style: httplimit.Both}
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		clear(h)
		hw.Set(h, value, results, nil)
	}
	if len(h) != 5 {
		b.Fatalf("%d fields set, want 5: %v", len(h), h)
	}
}
