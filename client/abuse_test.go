package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// sendTimes runs GETs through a transport on a virtual clock whose base
// answers with answer(n) for the n-th send (from 0), and returns when each
// send happened.
func sendTimes(t *testing.T, gets int, answer func(r *http.Request, n int) (*http.Response, error), opts ...Option) ([]time.Time, *Transport, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	var sends []time.Time
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		sends = append(sends, clk.Now())
		return answer(r, len(sends)-1)
	})
	tr := newTestTransport(t, base, append(virtual(clk), opts...)...)
	hc := &http.Client{Transport: tr}
	for range gets {
		if resp, err := hc.Get("https://api.example/x"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	return sends, tr, clk
}

// TestRetryAfterAlwaysHeld: Retry-After on a refusal served from a cache
// (Age, X-From-Cache) and on a 502 or 504 holds the retry back; such
// answers were retried at the local rate. A zero Retry-After on a 502 is
// no reason to retry faster than after a 502 without one.
func TestRetryAfterAlwaysHeld(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  int
		hdr     []string
		atLeast time.Duration
	}{
		{"429 from a cache (Age)", 429, []string{"Retry-After: 30", "Age: 1"}, 30 * time.Second},
		{"429 from a cache (X-From-Cache)", 429, []string{"Retry-After: 30", "X-From-Cache: 1"}, 30 * time.Second},
		{"503 from a cache", 503, []string{"Retry-After: 30", "Age: 5"}, 30 * time.Second},
		{"502", 502, []string{"Retry-After: 30"}, 30 * time.Second},
		{"504", 504, []string{"Retry-After: 30"}, 30 * time.Second},
		{"502, Retry-After 0", 502, []string{"Retry-After: 0"}, DefaultBackoff},
		{"502, no Retry-After", 502, nil, DefaultBackoff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sends, _, _ := sendTimes(t, 1, func(r *http.Request, n int) (*http.Response, error) {
				if n == 0 {
					return respond(r, tc.status, "", tc.hdr...), nil
				}
				return respond(r, 200, "ok"), nil
			})
			if len(sends) != 2 {
				t.Fatalf("%d sends, want a first attempt and one retry", len(sends))
			}
			if gap := sends[1].Sub(sends[0]); gap < tc.atLeast {
				t.Fatalf("retried after %v, want at least %v", gap, tc.atLeast)
			}
		})
	}
}

// closeRecorder is a request body that records being closed.
type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

// TestBodyClosedWhenNotSent: RoundTrip closes a request body it never
// hands to the base transport (http.RoundTripper's contract), or a
// streaming body's writer is left blocked for good.
func TestBodyClosedWhenNotSent(t *testing.T) {
	clk := newFakeClock()
	sent := false
	tr := newTestTransport(t, rtFunc(func(r *http.Request) (*http.Response, error) {
		sent = true
		return respond(r, 200, "ok"), nil
	}), virtual(clk)...)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	body := &closeRecorder{Reader: strings.NewReader("payload")}
	req, _ := http.NewRequestWithContext(ctx, "PUT", "https://api.example/x", body)
	if _, err := tr.RoundTrip(req); !errors.Is(err, context.Canceled) || sent {
		t.Fatalf("cancelled request: err %v, sent %v", err, sent)
	}
	if !body.closed {
		t.Fatal("the body of a request that was not sent was left open")
	}
}

// stalledBody sends its first bytes, then blocks until closed.
type stalledBody struct {
	first  io.Reader
	closed chan struct{}
	once   sync.Once
}

func (b *stalledBody) Read(p []byte) (int, error) {
	if n, _ := b.first.Read(p); n > 0 {
		return n, nil
	}
	<-b.closed
	return 0, errors.New("closed")
}

func (b *stalledBody) Close() error { b.once.Do(func() { close(b.closed) }); return nil }

// TestStalledProblemBody: a problem+json body that stops halfway holds up
// its own reader only; RoundTrip returns once reading it has taken a
// second, with the body whole for the caller.
func TestStalledProblemBody(t *testing.T) {
	body := &stalledBody{first: strings.NewReader(`{"type":"about:bl`), closed: make(chan struct{})}
	tr := newTestTransport(t, rtFunc(func(r *http.Request) (*http.Response, error) {
		resp := respond(r, 404, "", "Content-Type: application/problem+json")
		resp.Body, resp.ContentLength = body, -1
		return resp, nil
	}), WithLogger(quiet))
	start := time.Now()
	req, _ := http.NewRequest("GET", "https://api.example/x", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("RoundTrip waited %v for a stalled problem body", el)
	}
	go func() { time.Sleep(50 * time.Millisecond); resp.Body.Close() }()
	got, _ := io.ReadAll(resp.Body)
	if string(got) != `{"type":"about:bl` {
		t.Fatalf("the caller read %q, want the bytes the server sent", got)
	}
}

// TestPolicyStateBounded: policies sent without a RateLimit item pace
// only until w (or the maximum window) has passed, a w too large for a
// time.Duration does not pace at all, and an origin naming new policies
// on every response keeps at most maxTracked of them.
func TestPolicyStateBounded(t *testing.T) {
	t.Run("expires after w", func(t *testing.T) {
		sends, tr, clk := sendTimes(t, 2, func(r *http.Request, n int) (*http.Response, error) {
			if n == 0 {
				return respond(r, 200, "", `RateLimit-Policy: "x";q=1;w=600`), nil
			}
			return respond(r, 200, ""), nil
		})
		if gap := sends[1].Sub(sends[0]); gap < DefaultMaxWait {
			t.Fatalf("1 per 600 s: the second GET went after %v", gap)
		}
		clk.Advance(601 * time.Second)
		hc := &http.Client{Transport: tr}
		get(t, hc, "https://api.example/x")
		if st, _ := tr.State("https://api.example"); len(st.Policies) != 0 {
			t.Fatalf("after w, still known: %+v", st.Policies)
		}
	})
	t.Run("w beyond a Duration", func(t *testing.T) {
		sends, _, _ := sendTimes(t, 2, func(r *http.Request, n int) (*http.Response, error) {
			return respond(r, 200, "", `RateLimit-Policy: "x";q=1;w=18446744074`), nil
		})
		if gap := sends[1].Sub(sends[0]); gap >= time.Second {
			t.Fatalf("a window longer than the maximum paced the GETs %v apart", gap)
		}
	})
	t.Run("at most maxTracked", func(t *testing.T) {
		_, tr, _ := sendTimes(t, 5, func(r *http.Request, n int) (*http.Response, error) {
			var items []string
			for i := range 50 {
				items = append(items, fmt.Sprintf(`"p%d-%d";q=1000;w=1`, n, i))
			}
			return respond(r, 200, "", "RateLimit-Policy: "+strings.Join(items, ", ")), nil
		})
		st, _ := tr.State("https://api.example")
		if len(st.Policies) != maxTracked || tr.Stats().Ignored != 5*50-maxTracked {
			t.Fatalf("%d policies kept, %d ignored; want %d and %d", len(st.Policies), tr.Stats().Ignored, maxTracked, 5*50-maxTracked)
		}
	})
}

// TestTransportErrorWaitClamped: the backoff after a transport error,
// jitter included, never sleeps longer than the maximum wait.
func TestTransportErrorWaitClamped(t *testing.T) {
	clk := newFakeClock()
	tr := newTestTransport(t, rtFunc(func(r *http.Request) (*http.Response, error) {
		return nil, errors.New("connection reset")
	}), append(virtual(clk), WithMaxWait(time.Second), WithBackoff(time.Second), WithRandom(func() float64 { return 0.99 }))...)
	req, _ := http.NewRequest("GET", "https://api.example/x", nil)
	if _, err := tr.RoundTrip(req); err == nil {
		t.Fatal("no error")
	}
	if m := clk.MaxSleep(); m > time.Second {
		t.Fatalf("slept %v at once, max wait 1s", m)
	}
}
