package server

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
)

// BenchmarkHandleCheck times the check handler alone, without the
// network, to show what the daemon adds to net/http's own cost.
func BenchmarkHandleCheck(b *testing.B) {
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
	s, err := New(cfg, WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	const body = `{"key":"user-42","rule":"all"}`
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest("POST", "/v1/check", strings.NewReader(body))
			rec := httptest.NewRecorder()
			s.handleCheck(rec, req)
			if rec.Code != http.StatusOK {
				b.Fatal(rec.Code)
			}
		}
	})
}
