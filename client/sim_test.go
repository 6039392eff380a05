package client

import (
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"
)

// TestWarningStory replays the draft's §8 warning (and seed 004): a server
// announces q=10000;w=1000 (10/s on average) and r=10000;t=10 (which
// naive division turns into 1000/s) on every response; 20 client
// instances run for a virtual minute. The aggregate rate must stay within
// the sum of the local caps and follow q/w, never r/t.
func TestWarningStory(t *testing.T) {
	const instances = 20
	const run = 60 * time.Second
	for _, tc := range []struct {
		name      string
		localRPS  float64
		wantPerS  float64 // expected steady aggregate rate
		wantBound float64 // the aggregate may not exceed this in any second
	}{
		// Local cap above q/w: q/w binds, 20 × 10/s.
		{"cap-50", 50, 200, 200},
		// Local cap below q/w: the cap binds, 20 × 5/s.
		{"cap-5", 5, 100, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var sends []time.Time
			start := newFakeClock().Now()
			var wg sync.WaitGroup
			for range instances {
				c := newFakeClock() // one clock per instance: each runs alone
				base := rtFunc(func(r *http.Request) (*http.Response, error) {
					mu.Lock()
					sends = append(sends, c.Now())
					mu.Unlock()
					return respond(r, 200, "ok",
						`RateLimit-Policy: "burst";q=10000;w=1000`,
						`RateLimit: "burst";r=10000;t=10`), nil
				})
				hc := &http.Client{Transport: newTestTransport(t, base, append(virtual(c), WithRate(tc.localRPS, 1))...)}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for c.Now().Sub(start) < run {
						get(t, hc, "https://api.example/items")
					}
				}()
			}
			wg.Wait()

			sort.Slice(sends, func(i, j int) bool { return sends[i].Before(sends[j]) })
			perSecond := map[int64]int{}
			peak := 0
			for _, s := range sends {
				if s.Sub(start) >= run {
					continue
				}
				b := int64(s.Sub(start) / time.Second)
				perSecond[b]++
				peak = max(peak, perSecond[b])
			}
			inRun := 0
			for _, n := range perSecond {
				inRun += n
			}
			mean := float64(inRun) / run.Seconds()
			capSum := instances * tc.localRPS
			naive := instances * 10000.0 / 10
			t.Logf("%d instances, local cap %g/s each (sum %g/s): aggregate mean %.1f/s, peak %d in one second; r/t would give %g/s",
				instances, tc.localRPS, capSum, mean, peak, naive)
			if float64(peak) > tc.wantBound+instances || float64(peak) > capSum {
				t.Errorf("peak %d/s above the bound %g/s (sum of caps %g/s)", peak, tc.wantBound, capSum)
			}
			if mean < 0.95*tc.wantPerS || mean > 1.01*tc.wantPerS {
				t.Errorf("mean %.1f/s, want about %g/s", mean, tc.wantPerS)
			}
		})
	}
}
