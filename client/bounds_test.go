package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestStalledRefusalBodyBoundsCall: a 429 whose problem+json body stops
// after a few bytes and stays open for 20 s costs each attempt at most
// ReadProblem's second and drainWait, not the stall (C5): three attempts
// end well before the stall would, every one of them sent. Sleeps are
// virtual, so the real time measured is the body reading alone.
func TestStalledRefusalBodyBoundsCall(t *testing.T) {
	const stall = 20 * time.Second
	var attempts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",`))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(stall):
		}
	}))
	defer srv.Close()
	clk := newFakeClock()
	tr := newTestTransport(t, nil, append(virtual(clk), WithMaxWait(3*time.Second), WithoutBreaker())...)
	req, _ := http.NewRequest("GET", srv.URL+"/x", nil)
	begin := time.Now()
	resp, err := tr.RoundTrip(req)
	took := time.Since(begin)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || attempts.Load() != DefaultMaxAttempts {
		t.Fatalf("%d after %d attempts, want 429 after %d", resp.StatusCode, attempts.Load(), DefaultMaxAttempts)
	}
	// 3 × (1 s + 0.1 s) without load; the bound is generous, and far
	// below one stall.
	if took > stall/2 {
		t.Fatalf("the call took %v with bodies stalling %v", took, stall)
	}
}

// TestSlotBeforeRateToken: requests queued for the one concurrency slot
// behind a server stalled 2 s do not leave together when it answers:
// each takes its rate token once it holds the slot, so in the second
// after the stall at most burst + rate × 1 s = 5 + 20 reach the server
// (C3). Taking the token first, all 39 would (each had slept for its
// token during the stall). A slow machine sends fewer, never more.
func TestSlotBeforeRateToken(t *testing.T) {
	const n = 40
	var (
		mu       sync.Mutex
		arrivals []time.Time
		released time.Time
		first    atomic.Bool
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if first.CompareAndSwap(false, true) {
			time.Sleep(2 * time.Second)
			mu.Lock()
			released = time.Now()
			mu.Unlock()
			return
		}
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
	}))
	defer srv.Close()
	tr := newTestTransport(t, nil, WithRate(20, 5), WithConcurrency(1), WithMaxWait(10*time.Second), WithoutBreaker(), WithLogger(quiet))
	c := &http.Client{Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i > 0 {
				time.Sleep(50 * time.Millisecond) // after the first holds the slot
			}
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
			if resp, err := c.Do(req); err != nil {
				t.Error(err)
			} else {
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) != n-1 {
		t.Fatalf("%d requests after the stalled one, want %d", len(arrivals), n-1)
	}
	within := 0
	for _, at := range arrivals {
		if at.Sub(released) <= time.Second {
			within++
		}
	}
	if within > 25 {
		t.Errorf("%d requests reached the server within 1 s of the stall's end, want at most 5 + 20", within)
	}
	t.Logf("%d of %d within 1 s of the stall's end", within, n-1)
}
