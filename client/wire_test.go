package client

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/memorystore"
)

// wireClock is the time of TestFollowersOverTheWire: a virtual clock, to
// which each request adds a millisecond of round trip, or, with
// FLOODGATE_WIRE_REAL set, the system clock (a measurement that takes as
// long as it says).
type wireClock interface {
	Now() time.Time
	wait(d time.Duration)
}

type virtualWire struct{ *fakeClock }

func (v virtualWire) wait(d time.Duration) { v.Advance(d + time.Millisecond) }

type realWire struct{}

func (realWire) Now() time.Time       { return time.Now() }
func (realWire) wait(d time.Duration) { time.Sleep(d) }

// TestFollowersOverTheWire: a greedy client (send while r > 0) and a
// pacer (wait t/r) of the fields alone, each against a real HTTP server on
// loopback behind the middleware (60 per 10 s, memory store), get at least
// 0.9 of what the policy allows and no 429, for every algorithm. By
// default the clock is virtual (ten windows, starting 0.37 s into a
// second, so windows and the fields' whole seconds do not line up, and a
// millisecond of round trip per request); FLOODGATE_WIRE_REAL=40s runs in
// real time for that long instead (docs/ratelimit-headers.md §4 gives its
// figures).
func TestFollowersOverTheWire(t *testing.T) {
	d, real := 100*time.Second, os.Getenv("FLOODGATE_WIRE_REAL")
	if real != "" {
		var err error
		if d, err = time.ParseDuration(real); err != nil {
			t.Fatalf("FLOODGATE_WIRE_REAL: %v", err)
		}
	}
	var wg sync.WaitGroup
	for _, p := range efficiencyPolicies(10*time.Second, 60) {
		for _, who := range []string{"greedy", "pacer"} {
			var clock wireClock = realWire{}
			if real == "" {
				fc := newFakeClock()
				fc.Advance(370 * time.Millisecond)
				clock = virtualWire{fc}
			}
			srv := wireServer(t, p, clock.Now)
			wg.Add(1)
			go func() { // in parallel, so that real time passes once
				defer wg.Done()
				admitted, refused := followOverTheWire(t, srv.URL, clock, d, who == "pacer")
				eff := float64(admitted) / allowed(p, d)
				t.Logf("%s %s: %d admitted (%.3f of %.0f allowed), %d refused", p.Algorithm, who, admitted, eff, allowed(p, d), refused)
				if refused > 0 || eff < 0.9 {
					t.Errorf("%s %s: %.3f of the quota, %d refused; want ≥ 0.9 and none", p.Algorithm, who, eff, refused)
				}
			}()
		}
	}
	wg.Wait()
}

// wireServer is the middleware with p on the memory store, on loopback.
func wireServer(t *testing.T, p floodgate.Policy, now func() time.Time) *httptest.Server {
	st := testkit.Memory(t, memorystore.WithClock(now))
	mw, err := httplimit.New(httplimit.Config{Store: st, Now: now, Logger: quiet,
		Rules: []httplimit.Rule{{Pattern: "/", Rule: engine.Rule{Policies: []floodgate.Policy{p}}, Key: []httplimit.KeyPart{httplimit.Literal("k")}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })))
	t.Cleanup(srv.Close)
	return srv
}

// followOverTheWire sends requests for d, waiting as fieldsWait says.
func followOverTheWire(t *testing.T, url string, clock wireClock, d time.Duration, pace bool) (admitted, refused int) {
	end := clock.Now().Add(d)
	for clock.Now().Before(end) {
		resp, err := http.Get(url)
		if err != nil {
			t.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 429 {
			refused++
		} else {
			admitted++
		}
		clock.wait(fieldsWait(resp, pace))
	}
	return admitted, refused
}
