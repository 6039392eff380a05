package client

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/memorystore"
)

// efficiencyPolicies are the policies the efficiency test runs: one per
// algorithm, 60 per 10 s, the buckets with a burst of 10.
func efficiencyPolicies(window time.Duration, quota int64) []floodgate.Policy {
	var ps []floodgate.Policy
	for _, a := range floodgate.Algorithms() {
		p := floodgate.Policy{Name: "api", Algorithm: a, Quota: quota, Window: window}
		if a == floodgate.TokenBucket || a == floodgate.GCRA {
			p.Burst = quota / 6
		}
		ps = append(ps, p)
	}
	return ps
}

// limited is a Floodgate middleware on the memory store, called in
// process on a virtual clock: the server side of the efficiency test. It
// counts what it admitted and refused among the requests that arrived
// before end, and checks every response's fields on the way.
type limited struct {
	t        *testing.T
	clock    *fakeClock
	handler  http.Handler
	end      time.Time
	admitted int
	refused  int
}

func newLimited(t *testing.T, clock *fakeClock, p floodgate.Policy, end time.Time) *limited {
	st := testkit.Memory(t, memorystore.WithClock(clock.Now))
	mw, err := httplimit.New(httplimit.Config{
		Store: st, Now: clock.Now, Logger: quiet,
		Rules: []httplimit.Rule{{Pattern: "/", Rule: engine.Rule{Policies: []floodgate.Policy{p}}, Key: []httplimit.KeyPart{httplimit.Literal("k")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	return &limited{t: t, clock: clock, handler: mw.Wrap(ok), end: end}
}

// RoundTrip serves r as a real server would, with a Date field.
func (l *limited) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	now := l.clock.Now()
	rec.Header().Set("Date", now.UTC().Format(http.TimeFormat))
	l.handler.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	if now.Before(l.end) {
		if resp.StatusCode == 429 {
			l.refused++
		} else {
			l.admitted++
		}
	}
	l.check(resp)
	return resp, nil
}

// check requires every field to parse strictly and, on a refusal,
// Retry-After at or after the end of every exhausted policy's t
// (draft-11 §6).
func (l *limited) check(resp *http.Response) {
	l.t.Helper()
	if _, err := header.ParsePolicy(resp.Header.Values("RateLimit-Policy")...); err != nil {
		l.t.Fatalf("RateLimit-Policy %q: %v", resp.Header.Values("RateLimit-Policy"), err)
	}
	lims, err := header.ParseLimit(resp.Header.Values("RateLimit")...)
	if err != nil || len(lims) != 1 {
		l.t.Fatalf("RateLimit %q: %v", resp.Header.Values("RateLimit"), err)
	}
	if resp.StatusCode != 429 {
		return
	}
	ra, err := header.ParseRetryAfter(resp.Header.Get("Retry-After"), l.clock.Now())
	if err != nil {
		l.t.Fatalf("Retry-After %q: %v", resp.Header.Get("Retry-After"), err)
	}
	if ra < time.Duration(lims[0].Window)*time.Second {
		l.t.Fatalf("Retry-After %v before the end of t=%d", ra, lims[0].Window)
	}
}

// follow sends requests until the clock reaches end, waiting after each
// response as wait says: greedy (send while r > 0, else wait t) or pacer
// (wait t/r after a 200, t when r = 0); Retry-After after a refusal.
func (l *limited) follow(pace bool) {
	for l.clock.Now().Before(l.end) {
		req := httptest.NewRequest("GET", "http://api.example/items", nil)
		resp, _ := l.RoundTrip(req)
		l.clock.Sleep(req.Context(), fieldsWait(resp, pace))
	}
}

// fieldsWait is how long a client of the fields alone waits after resp:
// Retry-After after a refusal, t when r = 0, else nothing (greedy) or
// t/r (pacer); at least a microsecond.
func fieldsWait(resp *http.Response, pace bool) time.Duration {
	lims, _ := header.ParseLimit(resp.Header.Values("RateLimit")...)
	if len(lims) == 0 {
		return time.Second
	}
	r, t := lims[0].Remaining, time.Duration(lims[0].Window)*time.Second
	var wait time.Duration
	switch {
	case resp.StatusCode == 429:
		s, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		wait = time.Duration(s) * time.Second
	case r == 0:
		wait = t
	case pace:
		wait = t / time.Duration(r)
	}
	return max(wait, time.Microsecond)
}

// allowed is what p admits over d to a client that uses all of it: the
// windows' quota, the buckets' burst plus their refill.
func allowed(p floodgate.Policy, d time.Duration) float64 {
	n := float64(p.Quota) * d.Seconds() / p.Window.Seconds()
	if p.Algorithm == floodgate.TokenBucket || p.Algorithm == floodgate.GCRA {
		n += float64(p.Capacity())
	}
	return n
}

// TestEfficiency runs a greedy follower, a pacer and package client with
// its defaults, each alone on its key, for ten windows of each algorithm
// on a virtual clock, and requires no refusal and most of the quota used:
// the fields are true (following them is never refused) and usable
// (following them uses the quota).
func TestEfficiency(t *testing.T) {
	const windows = 10
	floors := map[string]float64{"greedy": 0.9, "pacer": 0.9, "client": 0.8}
	var table strings.Builder
	for _, cfg := range []struct {
		quota  int64
		window time.Duration
	}{{60, 10 * time.Second}, {100, time.Minute}} {
		for _, p := range efficiencyPolicies(cfg.window, cfg.quota) {
			for _, who := range []string{"greedy", "pacer", "client"} {
				name := fmt.Sprintf("%d-per-%v/%s/%s", p.Quota, p.Window, p.Algorithm, who)
				t.Run(name, func(t *testing.T) {
					clock := newFakeClock()
					start := clock.Now()
					d := windows * p.Window
					l := newLimited(t, clock, p, start.Add(d))
					switch who {
					case "client":
						hc := &http.Client{Transport: newTestTransport(t, l, virtual(clock)...)}
						for clock.Now().Before(l.end) {
							get(t, hc, "http://api.example/items")
						}
					default:
						l.follow(who == "pacer")
					}
					eff := float64(l.admitted) / allowed(p, d)
					fmt.Fprintf(&table, "| %s | %v per %v | %s | %.3f | %d |\n", p.Algorithm, p.Quota, p.Window, who, eff, l.refused)
					if l.refused > 0 || eff < floors[who] {
						t.Errorf("admitted %d of %.0f allowed (%.3f, floor %.2f), %d refused", l.admitted, allowed(p, d), eff, floors[who], l.refused)
					}
				})
			}
		}
	}
	t.Logf("\n| algorithm | policy | follower | admitted ÷ allowed | 429s |\n|---|---|---|---|---|\n%s", table.String())
}

// TestProbeAdvice: the pace Probe advises after one request, against 100
// per minute, is within 10 % of the policy's sustainable rate (q/w) for
// every algorithm, wherever in a fixed window the request falls.
func TestProbeAdvice(t *testing.T) {
	const want = 100.0 / 60
	for _, p := range efficiencyPolicies(time.Minute, 100) {
		for _, at := range []time.Duration{0, 11 * time.Second, 45 * time.Second, 58 * time.Second, 59500 * time.Millisecond} {
			clock := newFakeClock()
			clock.Sleep(t.Context(), at)
			l := newLimited(t, clock, p, clock.Now())
			var out strings.Builder
			if err := Probe(t.Context(), &http.Client{Transport: newTestTransport(t, l, virtual(clock)...)}, "http://api.example/items", &out); err != nil {
				t.Fatal(err)
			}
			_, rest, _ := strings.Cut(out.String(), "next: send at most one request every ")
			_, rest, _ = strings.Cut(rest, "(")
			got, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			if err != nil || got < 0.9*want || got > want*1.001 {
				t.Errorf("%s at +%v: advised %v req/s, want %.3f within 10 %%:\n%s", p.Algorithm, at, got, want, out.String())
			}
		}
	}
}
