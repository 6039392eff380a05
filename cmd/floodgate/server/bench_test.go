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
func BenchmarkHandleCheck(b *testing.B) { benchCheck(b) }

// BenchmarkHandleCheckTracing times the same with tracing off, and on
// (the SDK's provider, a discarding exporter batched) sampling 1% and
// 100% of the traces it starts: what a span per decision costs. Its
// sub-benchmarks alternate under -count.
//
//	cd cmd/floodgate && go test -run '^$' -bench 'BenchmarkHandleCheckTracing' -benchmem -count 5 ./server
func BenchmarkHandleCheckTracing(b *testing.B) {
	b.Run("off", func(b *testing.B) { benchCheck(b) })
	for _, c := range []struct {
		name  string
		ratio float64
	}{{"sampled-1pct", 0.01}, {"sampled-all", 1}} {
		b.Run(c.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}),
				sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.ratio))))
			defer tp.Shutdown(context.Background())
			benchCheck(b, WithTracerProvider(tp))
		})
	}
}

// discardExporter drops the spans it is given.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

func benchCheck(b *testing.B, opts ...Option) {
	cfg, err := config.Parse("b.yaml", []byte(`
api: {listen: "127.0.0.1:0"}
admin: {listen: "off"}
policies:
  roomy: {algorithm: gcra, quota: 1000000000, window: 1s}
rules:
  - {name: all, match: "/", policies: [roomy]}
`))
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
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		w.h, w.status = http.Header{}, 0
		s.handleCheck(w, req)
		if w.status != http.StatusOK {
			b.Fatal(w.status)
		}
	}
}

// discardWriter is an http.ResponseWriter that keeps the status only.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }
