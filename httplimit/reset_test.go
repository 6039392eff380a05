package httplimit_test

import (
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/memorystore"
	"github.com/floodgate/floodgate/storetest"
)

// timelineSeconds are the seconds of docs/MIDDLEWARE.md's timelines: one
// client, five requests a second apart from second 11 of a minute, then a
// few more.
var timelineSeconds = []int64{11, 12, 13, 14, 15, 16, 31, 51, 60, 71, 83}

// row is one response of a timeline: status, RateLimit, X-RateLimit-Remaining,
// X-RateLimit-Reset (epoch seconds) and Retry-After.
type row struct {
	status               int
	rateLimit, remaining string
	reset                int64
	retryAfter           string
}

// timeline plays timelineSeconds through the middleware on the memory
// store with an injected clock, under a policy of 5 per minute of a.
func timeline(t *testing.T, a floodgate.Algorithm) []row {
	clock := storetest.NewClock(storetest.Epoch)
	st := testkit.Memory(t, memorystore.WithClock(clock.Now))
	p := policy("api", a, 5, time.Minute)
	if a == floodgate.TokenBucket || a == floodgate.GCRA {
		p.Burst = 5
	}
	mw, err := httplimit.New(httplimit.Config{Store: st, Now: clock.Now, Logger: quiet,
		Rules: []httplimit.Rule{{Pattern: "/", Rule: engine.Rule{Policies: []floodgate.Policy{p}}, Key: []httplimit.KeyPart{httplimit.Literal("k")}}}})
	if err != nil {
		t.Fatal(err)
	}
	h := mw.Wrap(ok)
	var rows []row
	for _, sec := range timelineSeconds {
		clock.Set(storetest.Epoch.Add(time.Duration(sec) * time.Second))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "http://api.example/items", nil))
		reset, err := strconv.ParseInt(rec.Header().Get("X-RateLimit-Reset"), 10, 64)
		if err != nil {
			t.Fatalf("second %d: X-RateLimit-Reset %q", sec, rec.Header().Get("X-RateLimit-Reset"))
		}
		rows = append(rows, row{rec.Code, rec.Header().Get("RateLimit"), rec.Header().Get("X-RateLimit-Remaining"),
			reset - storetest.Epoch.Unix(), rec.Header().Get("Retry-After")})
	}
	return rows
}

// TestLegacyResetNeverMovesBack: along the timeline, for every algorithm,
// X-RateLimit-Reset never moves earlier from one response to the next,
// whether the client spent in between or not, so that the 200s and the
// 429s tell one story.
func TestLegacyResetNeverMovesBack(t *testing.T) {
	for _, a := range floodgate.Algorithms() {
		rows := timeline(t, a)
		for i := 1; i < len(rows); i++ {
			if rows[i].reset < rows[i-1].reset {
				t.Errorf("%v: X-RateLimit-Reset moved from second %d (at second %d) to %d (at second %d)",
					a, rows[i-1].reset, timelineSeconds[i-1], rows[i].reset, timelineSeconds[i])
			}
		}
	}
}

// TestSlidingCounterTimeline is docs/MIDDLEWARE.md's timeline of the
// sliding window counter. X-RateLimit-Reset is when the whole quota is
// free again: the end of the window after the last spend (second 120 for
// the first five, 180 once second 83 spends in the window from 60). When
// the next unit frees, which RateLimit's t says, comes sooner the more a
// window spends: reported as the reset, it moved from 120 to 90, 80, 75
// and 72 over the first five requests.
func TestSlidingCounterTimeline(t *testing.T) {
	want := []row{
		{200, `"api";r=4;t=48`, "4", 120, ""},
		{200, `"api";r=3;t=36`, "3", 120, ""},
		{200, `"api";r=2;t=24`, "2", 120, ""},
		{200, `"api";r=1;t=12`, "1", 120, ""},
		{200, `"api";r=0;t=57`, "0", 120, ""},
		{429, `"api";r=0;t=56`, "0", 120, "56"},
		{429, `"api";r=0;t=41`, "0", 120, "41"},
		{429, `"api";r=0;t=21`, "0", 120, "21"},
		{429, `"api";r=0;t=12`, "0", 120, "12"},
		{429, `"api";r=0;t=1`, "0", 120, "1"},
		{200, `"api";r=0;t=1`, "0", 180, ""},
	}
	for i, got := range timeline(t, floodgate.SlidingWindowCounter) {
		if got != want[i] {
			t.Errorf("second %d: %+v, want %+v", timelineSeconds[i], got, want[i])
		}
	}
}

// TestAnchoredWindowTimeline is docs/MIDDLEWARE.md's timeline of the
// anchored window: the first request, at second 11, opens the key's
// window to second 71, where the count restarts; unlike the fixed
// window's, it does not end at the minute (second 60 is still refused).
func TestAnchoredWindowTimeline(t *testing.T) {
	want := []row{
		{200, `"api";r=4;t=48`, "4", 71, ""},
		{200, `"api";r=3;t=36`, "3", 71, ""},
		{200, `"api";r=2;t=24`, "2", 71, ""},
		{200, `"api";r=1;t=12`, "1", 71, ""},
		{200, `"api";r=0;t=56`, "0", 71, ""},
		{429, `"api";r=0;t=55`, "0", 71, "55"},
		{429, `"api";r=0;t=40`, "0", 71, "40"},
		{429, `"api";r=0;t=20`, "0", 71, "20"},
		{429, `"api";r=0;t=11`, "0", 71, "11"},
		{200, `"api";r=4;t=48`, "4", 131, ""},
		{200, `"api";r=3;t=36`, "3", 131, ""},
	}
	for i, got := range timeline(t, floodgate.AnchoredWindow) {
		if got != want[i] {
			t.Errorf("second %d: %+v, want %+v", timelineSeconds[i], got, want[i])
		}
	}
}
