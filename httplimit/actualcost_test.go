package httplimit_test

import (
	"io"
	"net/http"
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
	"github.com/floodgate/floodgate/storetest"
)

// TestCostHeader: a handler reports the tokens an answer used in a
// header or a trailer (Rule.CostHeader); the client sees neither, and the
// charge is settled with it: the excess over the admitted cost counted
// even past the quota, a smaller cost refunded.
func TestCostHeader(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch.Add(15 * time.Second))
	st := testkit.Memory(t, memorystore.WithClock(clock.Now))
	answer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		used := r.URL.Query().Get("used")
		if r.URL.Query().Get("as") == "trailer" {
			w.Header().Set("Trailer", "X-Tokens-Used, X-Other")
			io.WriteString(w, "answer")
			w.Header().Set("X-Tokens-Used", used)
			w.Header().Set("X-Other", "kept")
			return
		}
		w.Header().Set("X-Tokens-Used", used)
		io.WriteString(w, "answer")
	})
	srv := serve(t, httplimit.Config{Store: st, Now: clock.Now, Rules: []httplimit.Rule{{
		Pattern: "/v1/",
		Rule: engine.Rule{
			Policies: []floodgate.Policy{policy("tokens", floodgate.FixedWindow, 100, time.Minute)},
		},
		Cost:       func(r *http.Request) (int64, error) { return strconv.ParseInt(r.URL.Query().Get("max"), 10, 64) },
		CostHeader: "x-tokens-used",
	}}}, answer)
	remaining := func() int64 { // a peek at what the key has left
		t.Helper()
		var res [1]floodgate.Result
		p := []floodgate.Policy{policy("tokens", floodgate.FixedWindow, 100, time.Minute)}
		if err := st.Take(t.Context(), "127.0.0.1", floodgate.Cost{}, p, res[:]); err != nil {
			t.Fatal(err)
		}
		return res[0].Remaining
	}
	get := func(query string) *http.Response {
		t.Helper()
		resp, _ := testkit.Do(t, "GET", srv.URL+"/v1/chat?"+query, "")
		if _, ok := resp.Header["X-Tokens-Used"]; ok {
			t.Fatalf("%s: the client sees the cost header", query)
		}
		if _, ok := resp.Trailer["X-Tokens-Used"]; ok {
			t.Fatalf("%s: the client sees the cost trailer", query)
		}
		return resp
	}
	for _, c := range []struct {
		query string
		left  int64
	}{
		{"max=10&used=30", 70},            // 10 admitted, 20 posted
		{"max=10&used=3", 67},             // 7 refunded
		{"max=10&used=50&as=trailer", 17}, // 40 posted, from the trailer
		{"max=1&used=oops", 16},           // not a count: ignored
		{"max=10&used=90", 0},             // 80 posted: 174 of 100
	} {
		resp := get(c.query)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %s", c.query, resp.Status)
		}
		if got := remaining(); got != c.left {
			t.Fatalf("after %s: %d left, want %d", c.query, got, c.left)
		}
		if strings.Contains(c.query, "trailer") && resp.Trailer.Get("X-Other") != "kept" {
			t.Fatalf("trailers: %v, want X-Other kept", resp.Trailer)
		}
	}
	// 174 of 100 spent at 15 s: in debt until the window's end, 45 s on.
	resp := get("max=1&used=1")
	items, err := header.ParseLimit(resp.Header.Values("RateLimit")...)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "45" || len(items) != 1 || items[0].Remaining != 0 || items[0].Window != 45 {
		t.Fatalf("in debt: %s, Retry-After %q, RateLimit %+v; want 429, 45, r=0;t=45", resp.Status, resp.Header.Get("Retry-After"), items)
	}
}

// TestCostHeaderHostile: an upstream's cost header repeated ("2" and
// "0") is no count and is ignored, not read as 20; one past what a
// post-charge holds (2^63−1) leaves the key in the most debt rather than
// charging nothing beyond the admitted cost.
func TestCostHeaderHostile(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch.Add(15 * time.Second))
	st := testkit.Memory(t, memorystore.WithClock(clock.Now))
	answer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, v := range r.URL.Query()["used"] {
			w.Header().Add("X-Tokens-Used", v)
		}
		io.WriteString(w, "answer")
	})
	p := policy("tokens", floodgate.FixedWindow, 100, time.Minute)
	srv := serve(t, httplimit.Config{Store: st, Now: clock.Now, Rules: []httplimit.Rule{{
		Pattern: "/v1/",
		Rule: engine.Rule{
			Policies: []floodgate.Policy{p},
		},
		Cost:       func(r *http.Request) (int64, error) { return 5, nil },
		CostHeader: "x-tokens-used",
	}}}, answer)
	remaining := func() int64 {
		t.Helper()
		var res [1]floodgate.Result
		if err := st.Take(t.Context(), "127.0.0.1", floodgate.Cost{}, []floodgate.Policy{p}, res[:]); err != nil {
			t.Fatal(err)
		}
		return res[0].Remaining
	}
	if resp, _ := testkit.Do(t, "GET", srv.URL+"/v1/x?used=2&used=0", ""); resp.StatusCode != 200 {
		t.Fatalf("repeated: %s", resp.Status)
	}
	if got := remaining(); got != 95 {
		t.Fatalf("after a repeated cost header: %d left, want 95 (the 5 admitted)", got)
	}
	if resp, _ := testkit.Do(t, "GET", srv.URL+"/v1/x?used=9223372036854775807", ""); resp.StatusCode != 200 {
		t.Fatalf("huge: %s", resp.Status)
	}
	if got := remaining(); got != 0 {
		t.Fatalf("after a cost of 2^63-1: %d left, want 0", got)
	}
	if resp, _ := testkit.Do(t, "GET", srv.URL+"/v1/x?used=1", ""); resp.StatusCode != 429 {
		t.Fatalf("after a cost of 2^63-1: %s, want 429", resp.Status)
	}
}
