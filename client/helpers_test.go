package client

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a virtual clock: sleeping advances it at once. With one
// goroutine per clock, time is exact.
type fakeClock struct {
	mu       sync.Mutex
	now      time.Time
	sleeps   int
	maxSleep time.Duration
	total    time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 3, 13, 9, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.sleeps++
	c.total += d
	c.maxSleep = max(c.maxSleep, d)
	c.mu.Unlock()
	return ctx.Err()
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) MaxSleep() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.maxSleep
}

// rtFunc adapts a function to http.RoundTripper.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// respond builds a response with header lines given as "Name: value".
func respond(r *http.Request, status int, body string, hdr ...string) *http.Response {
	h := http.Header{}
	for _, line := range hdr {
		k, v, _ := strings.Cut(line, ": ")
		h.Add(k, v)
	}
	return &http.Response{
		StatusCode: status, Status: http.StatusText(status), Header: h, Request: r,
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)),
	}
}

// quiet is a logger that drops everything.
var quiet = slog.New(slog.DiscardHandler)

// virtual returns the options that run a transport on c with
// deterministic jitter (half the maximum).
func virtual(c *fakeClock) []Option {
	return []Option{WithClock(c.Now), WithSleep(c.Sleep), WithRandom(func() float64 { return 0.5 }), WithLogger(quiet)}
}

func get(t interface{ Fatal(...any) }, c *http.Client, url string) *http.Response {
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// newTestTransport is NewTransport for tests: a refused option fails the
// test.
func newTestTransport(t testing.TB, base http.RoundTripper, opts ...Option) *Transport {
	t.Helper()
	tr, err := NewTransport(base, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}
