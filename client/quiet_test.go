package client

import (
	"log/slog"
	"net/http"
	"testing"

	"github.com/floodgate/floodgate/internal/testkit"
)

// TestNoRecordPerResponseByDefault: at the Info level a logger gets no
// record for a response carrying rate-limit fields; the audit records
// are Debug.
func TestNoRecordPerResponseByDefault(t *testing.T) {
	var buf testkit.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	clk := newFakeClock()
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		return respond(r, 200, "", `RateLimit-Policy: "p";q=100;w=60`, `RateLimit: "p";r=99;t=60`), nil
	})
	hc := &http.Client{Transport: newTestTransport(t, base, WithClock(clk.Now), WithSleep(clk.Sleep), WithLogger(logger))}
	for range 10 {
		resp, err := hc.Get("https://a.example/x")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got := buf.String(); got != "" {
		t.Fatalf("records at Info: %s", got)
	}
}
