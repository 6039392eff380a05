package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
)

// BenchmarkHandleCheck times the check handler alone, on one goroutine,
// so that ns/op is its CPU per check: what the daemon adds to net/http's
// own cost per request. The request is built once and its body rewound;
// each check gets a fresh header map, as net/http gives every request.
//
//	cd cmd/floodgate && go test -run '^$' -bench 'BenchmarkHandleCheck' -benchmem -count 5 ./server
func BenchmarkHandleCheck(b *testing.B) { benchCheck(b, "") }

// BenchmarkHandleCheckTracing times the same, through the listener's
// trace-context handler, with tracing off, and on (the daemon's own
// provider and sampler, tracing.sample_ratio, exporting to a discarding
// exporter, batched) sampling 1% and 100% of the traces it starts: what a
// span per decision costs. -count repeats each sub-benchmark in a row, so
// alternate them by hand on a shared machine:
//
//	cd cmd/floodgate && go test -c -o /tmp/server.test ./server
//	for i in 1 2 3 4 5; do for s in off sampled-1pct sampled-all; do
//	  /tmp/server.test -test.run '^$' -test.bench "BenchmarkHandleCheckTracing/$s\$" -test.benchmem -test.benchtime 20000x
//	done; done
//
// Under callgrind, instructions per check, which do not depend on the
// machine's load: only serveCheck is counted, and (the count at 40000x −
// the count at 10000x) / 30000 drops what one-off work callgrind's view of
// goroutine switches lets in (callgrind aborts on the runtime's preemption
// signals, hence GODEBUG), e.g. for 1%:
//
//	GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --toggle-collect='*serveCheck' /tmp/server.test \
//	  -test.run '^$' -test.bench 'BenchmarkHandleCheckTracing/sampled-1pct$' -test.benchtime 40000x
func BenchmarkHandleCheckTracing(b *testing.B) {
	b.Run("off", func(b *testing.B) { benchCheck(b, "") })
	for _, c := range []struct{ name, ratio string }{{"sampled-1pct", "0.01"}, {"sampled-all", "1"}} {
		b.Run(c.name, func(b *testing.B) {
			benchCheck(b, "tracing: {enabled: true, sample_ratio: "+c.ratio+"}", WithSpanExporter(discardExporter{}))
		})
	}
}

// discardExporter drops the spans it is given.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// benchCheck checks through the handler the API's listener wraps around
// its routes (trace context), under the configuration's extra lines.
func benchCheck(b *testing.B, extra string, opts ...Option) {
	cfg, err := config.Parse("b.yaml", []byte(`
api: {listen: "127.0.0.1:0"}
admin: {listen: "off"}
policies:
  roomy: {algorithm: gcra, quota: 1000000000, window: 1s}
rules:
  - {name: all, match: "/", policies: [roomy]}
`+extra))
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(cfg, append([]Option{WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"key":"user-42","rule":"all"}`)
	var rd bytes.Reader
	req := httptest.NewRequest("POST", "/v1/check", nil)
	req.Body = io.NopCloser(&rd)
	w := &discardWriter{}
	h := s.traced(http.HandlerFunc(s.handleCheck))
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		w.h, w.status = http.Header{}, 0
		serveCheck(h, w, req)
		if w.status != http.StatusOK {
			b.Fatal(w.status)
		}
	}
}

// serveCheck is one check: its own function, so that callgrind can count
// it alone (--toggle-collect).
//
//go:noinline
func serveCheck(h http.Handler, w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }

// discardWriter is an http.ResponseWriter that keeps the status only.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }
