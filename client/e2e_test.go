package client

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/memorystore"
)

type e2eResult struct {
	n, refused, attempts  int
	elapsed, ideal, paced time.Duration
}

func (r e2eResult) ratio() float64      { return r.elapsed.Seconds() / r.ideal.Seconds() }
func (r e2eResult) pacedRatio() float64 { return r.elapsed.Seconds() / r.paced.Seconds() }

func (r e2eResult) String() string {
	return fmt.Sprintf("%d GETs: %d attempts, %d answered 429, finished in %.1fs; ideal %.1fs (ratio %.3f), evenly paced ideal %.1fs (ratio %.3f)",
		r.n, r.attempts, r.refused, r.elapsed.Seconds(), r.ideal.Seconds(), r.ratio(), r.paced.Seconds(), r.pacedRatio())
}

// runE2E sends n sequential GETs through the client to a Floodgate-protected
// httptest server (memory store, quota per window). With clk set, server
// and client share that virtual clock; otherwise both use the wall clock.
// Ideal is the least time any client can take: the first quota at once,
// then one window per quota, i.e. (n − quota) × window / quota. The evenly
// paced ideal, (n − 1) × window / quota, is that of a client that never
// bursts, as this one does (it slows down early, draft-11 §7).
func runE2E(t testing.TB, n int, quota int64, window time.Duration, alg floodgate.Algorithm, clk *fakeClock, opts ...Option) e2eResult {
	t.Helper()
	storeOpts := []memorystore.Option{}
	now := time.Now
	if clk != nil {
		storeOpts = append(storeOpts, memorystore.WithClock(clk.Now))
		now = clk.Now
		opts = append(virtual(clk), opts...)
	} else {
		opts = append([]Option{WithLogger(quiet)}, opts...)
	}
	store := testkit.Memory(t, storeOpts...)
	mw, err := httplimit.New(httplimit.Config{
		Store:  store,
		Rules:  []httplimit.Rule{{Pattern: "/", Rule: engine.Rule{Policies: []floodgate.Policy{{Name: "api", Algorithm: alg, Quota: quota, Window: window}}}}},
		Logger: quiet,
		Now:    now,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })))
	defer srv.Close()

	var refused, attempts atomic.Int64
	counting := rtFunc(func(r *http.Request) (*http.Response, error) {
		attempts.Add(1)
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err == nil && resp.StatusCode == 429 {
			refused.Add(1)
		}
		return resp, err
	})
	hc := &http.Client{Transport: newTestTransport(t, counting, opts...)}
	begin := now()
	for i := range n {
		if resp := get(t, hc, srv.URL+"/items"); resp.StatusCode != 200 {
			t.Fatalf("GET %d ended with %d", i, resp.StatusCode)
		}
	}
	return e2eResult{
		n: n, refused: int(refused.Load()), attempts: int(attempts.Load()),
		elapsed: now().Sub(begin),
		ideal:   time.Duration(int64(n)-quota) * window / time.Duration(quota),
		paced:   time.Duration(n-1) * window / time.Duration(quota),
	}
}

// TestAgainstFloodgate is the end-to-end test at its real scale:
// 200 GETs against 10 requests per 10 s, in virtual time shared by server
// and client, for each server algorithm.
func TestAgainstFloodgate(t *testing.T) {
	for _, alg := range floodgate.Algorithms() {
		t.Run(alg.String(), func(t *testing.T) {
			r := runE2E(t, 200, 10, 10*time.Second, alg, newFakeClock())
			t.Log(r)
			if r.refused > 5 {
				t.Errorf("%d responses were 429, want at most a few", r.refused)
			}
			limit := 1.2
			if alg == floodgate.SlidingWindowCounter {
				// The ideal (a burst of 10, then 1 per second) is not what
				// this algorithm admits: the burst still weighs on the
				// next window's estimate, so even a perfect client needs
				// longer. Measured: 1.31×.
				limit = 1.35
			}
			if r.ratio() > limit {
				t.Errorf("took %.2f× the ideal time, limit %.1f", r.ratio(), limit)
			}
		})
	}
}

// BenchmarkAgainstFloodgateWallClock runs a scaled version in real time
// (40 GETs, 10 per second, about 4 s per iteration) so the wall-clock
// path (timers, real latency) is measured too; how close it comes to the
// evenly paced ideal depends on the machine's load, so it is a figure
// (paced-ratio), not a test bound: TestAgainstFloodgate holds the bounds
// in virtual time. At 40 requests the first quota's burst weighs a
// quarter of the ideal, which a pacing client forgoes, hence the evenly
// paced ideal. FLOODGATE_CLIENT_LONG=1 runs the full 200 GETs at
// 10 per 10 s instead (about 200 s), reported against the ideal itself:
//
//	go test -run '^$' -bench AgainstFloodgateWallClock -benchtime 1x ./client
func BenchmarkAgainstFloodgateWallClock(b *testing.B) {
	n, window := 40, time.Second
	if os.Getenv("FLOODGATE_CLIENT_LONG") != "" {
		n, window = 200, 10*time.Second
	}
	for b.Loop() {
		r := runE2E(b, n, 10, window, floodgate.GCRA, nil)
		b.Log(r)
		b.ReportMetric(r.pacedRatio(), "paced-ratio")
		b.ReportMetric(r.ratio(), "ideal-ratio")
		b.ReportMetric(float64(r.refused), "429s")
	}
}
