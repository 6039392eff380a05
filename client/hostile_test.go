package client

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestHostileValues sends 60 GETs against servers that answer with wrong
// or hostile values. Whatever they say, the client must stay within its
// local rate (10/s, burst 1) and never sleep longer than its maximum wait
// (5 s), and every GET must come back.
func TestHostileValues(t *testing.T) {
	const maxWait = 5 * time.Second
	const rps = 10.0
	for _, tc := range []struct {
		name   string
		status int
		hdr    func(now time.Time) []string
	}{
		{"huge r", 200, func(time.Time) []string { return []string{`RateLimit: "a";r=1000000000;t=1`} }},
		{"huge r and q", 200, func(time.Time) []string {
			return []string{`RateLimit-Policy: "a";q=999999999999999;w=1`, `RateLimit: "a";r=999999999999999;t=1`}
		}},
		{"t=0", 200, func(time.Time) []string { return []string{`RateLimit: "a";r=50;t=0`} }},
		{"r=0 t=0", 200, func(time.Time) []string { return []string{`RateLimit: "a";r=0;t=0`} }},
		{"t=999999999", 200, func(time.Time) []string { return []string{`RateLimit: "a";r=0;t=999999999`} }},
		{"t at the maximum window", 200, func(time.Time) []string { return []string{`RateLimit: "a";r=0;t=600`} }},
		{"negative r", 200, func(time.Time) []string { return []string{`RateLimit: "a";r=-5;t=10`} }},
		{"negative t", 200, func(time.Time) []string { return []string{`RateLimit: "a";r=5;t=-10`} }},
		{"negative legacy", 200, func(time.Time) []string { return []string{"X-RateLimit-Remaining: -1", "X-RateLimit-Reset: -30"} }},
		{"legacy reset years ahead", 200, func(now time.Time) []string {
			return []string{"X-RateLimit-Limit: 10", "X-RateLimit-Remaining: 0", "X-RateLimit-Reset: " + strconv.FormatInt(now.AddDate(5, 0, 0).Unix(), 10)}
		}},
		{"Retry-After in the past", 429, func(now time.Time) []string {
			return []string{"Retry-After: " + now.AddDate(-1, 0, 0).UTC().Format(http.TimeFormat)}
		}},
		{"Retry-After years ahead", 429, func(now time.Time) []string {
			return []string{"Retry-After: " + now.AddDate(3, 0, 0).UTC().Format(http.TimeFormat)}
		}},
		{"Retry-After overflow", 429, func(time.Time) []string { return []string{"Retry-After: 99999999999999999999999"} }},
		{"Retry-After negative", 429, func(time.Time) []string { return []string{"Retry-After: -5"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			var mu sync.Mutex
			var sends []time.Time
			base := rtFunc(func(r *http.Request) (*http.Response, error) {
				mu.Lock()
				sends = append(sends, clk.Now())
				mu.Unlock()
				return respond(r, tc.status, "", tc.hdr(clk.Now())...), nil
			})
			tr := newTestTransport(t, base, append(virtual(clk), WithMaxWait(maxWait), WithRate(rps, 1))...)
			hc := &http.Client{Transport: tr}
			start := clk.Now()
			for range 60 {
				get(t, hc, "https://hostile.example/x")
			}
			if m := clk.MaxSleep(); m > maxWait {
				t.Errorf("slept %v at once, max wait %v", m, maxWait)
			}
			// Local cap: at most rps×1s + burst sends in any one second.
			peak := 0
			for i := range sends {
				j := i
				for j < len(sends) && sends[j].Sub(sends[i]) < time.Second {
					j++
				}
				peak = max(peak, j-i)
			}
			if peak > int(rps)+1 {
				t.Errorf("%d sends within one second, local cap %g/s", peak, rps)
			}
			// These servers ask for a wait at or beyond the maximum: each GET
			// after the first waits exactly that, then goes as a probe.
			stall := map[string]bool{"t at the maximum window": true, "t=999999999": true, "legacy reset years ahead": true,
				"Retry-After years ahead": true, "Retry-After overflow": true}
			if stall[tc.name] {
				if got, want := clk.Now().Sub(start), 59*maxWait; got < want {
					t.Errorf("60 GETs took %v; a server asking for more than the max wait must still get one probe per %v", got, maxWait)
				}
			}
			st := tr.Stats()
			t.Logf("%d attempts in %v virtual, peak %d/s, longest sleep %v; outliers %d, ignored fields %d, refusals %d, probes %d",
				st.Attempts, clk.Now().Sub(start).Round(time.Millisecond), peak, clk.MaxSleep(), st.Outliers, st.Ignored, st.Refusals, st.Probes)
		})
	}
}
