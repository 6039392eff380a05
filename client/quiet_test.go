package client

import (
	"bytes"
	"log/slog"
	"net/http"
	"sync"
	"testing"
)

// TestNoRecordPerResponseByDefault: at the Info level a logger gets no
// record for a response carrying rate-limit fields; the audit records
// are Debug.
func TestNoRecordPerResponseByDefault(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
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
	mu.Lock()
	defer mu.Unlock()
	if buf.Len() != 0 {
		t.Fatalf("records at Info: %s", buf.String())
	}
}
