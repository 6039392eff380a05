package httplimit_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/testkit"
)

// TestDeniedSpendsNothingAcrossUnits: a rule with a requests policy (3 per
// hour), a content-bytes policy (10 per hour) and an in-flight cap. A
// request the bytes policy refuses spends no request unit, and one the cap
// refuses spends nothing of either rate (K3: all or nothing), on the memory
// store and on Redis.
func TestDeniedSpendsNothingAcrossUnits(t *testing.T) {
	for name, store := range map[string]func(*testing.T) floodgate.Store{
		"memory": func(t *testing.T) floodgate.Store {
			st := testkit.Memory(t)
			return st
		},
		"redis": func(t *testing.T) floodgate.Store { return redisStore(t) },
	} {
		t.Run(name, func(t *testing.T) {
			bytes := policy("bytes", floodgate.FixedWindow, 10, time.Hour)
			bytes.Unit = floodgate.ContentBytes
			hold := make(chan struct{})
			held := make(chan struct{}, 1)
			srv := serve(t, httplimit.Config{Store: store(t), Rules: []httplimit.Rule{{
				Pattern: "/",
				Rule: engine.Rule{
					Policies:    []floodgate.Policy{policy("req", floodgate.SlidingWindowLog, 3, time.Hour), bytes},
					Concurrency: []floodgate.Concurrency{{Name: "inflight", Max: 1}},
				},
			}}}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/hold" {
					held <- struct{}{}
					<-hold
				}
			}))
			send := func(path, body string) *http.Response {
				t.Helper()
				req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp
			}
			limits := func(resp *http.Response) map[string]int64 {
				t.Helper()
				ls, err := header.ParseLimit(resp.Header.Values("RateLimit")...)
				if err != nil {
					t.Fatal(err)
				}
				m := map[string]int64{}
				for _, l := range ls {
					m[l.Name] = l.Remaining
				}
				return m
			}
			if resp := send("/", "12345678"); resp.StatusCode != 200 {
				t.Fatalf("first 8-byte request: %d", resp.StatusCode)
			}
			resp := send("/", "12345678")
			if got := limits(resp); resp.StatusCode != 429 || got["req"] != 2 || got["bytes"] != 2 {
				t.Fatalf("second 8-byte request: %d %v, want 429 with req 2 left (unspent) and bytes 2", resp.StatusCode, got)
			}
			holding := make(chan int)
			go func() {
				req, _ := http.NewRequest("POST", srv.URL+"/hold", nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					holding <- 0
					return
				}
				resp.Body.Close()
				holding <- resp.StatusCode
			}()
			<-held
			resp = send("/", "1")
			if got := limits(resp); resp.StatusCode != 429 || got["inflight"] != 0 {
				t.Fatalf("request over the in-flight cap: %d %v", resp.StatusCode, got)
			}
			close(hold)
			if code := <-holding; code != 200 {
				t.Fatalf("held request: %d", code)
			}
			resp = send("/", "1")
			if got := limits(resp); resp.StatusCode != 200 || got["req"] != 0 || got["bytes"] != 1 {
				t.Fatalf("after the hold: %d %v, want 200 with req 0 and bytes 1 left: refusals spent nothing", resp.StatusCode, got)
			}
		})
	}
}
