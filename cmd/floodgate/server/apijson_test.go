package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/header"
)

// TestAnswerLength: every answer of the decision API states its length,
// short ones (which net/http measures itself) and a batch's longer than
// net/http buffers (which writeJSON measures), so that none goes out
// chunked.
func TestAnswerLength(t *testing.T) {
	f := start(t, baseConfig)
	batch := "[" + strings.TrimSuffix(strings.Repeat(`{"key":"user-1","rule":"api"},`, 20), ",") + "]"
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v1/check", `{"key":"user-1","rule":"api"}`},
		{"POST", "/v1/check", batch},
		{"GET", "/v1/limits/user-1", ""},
		{"POST", "/v1/check", `{"key":"user-1","rule":"nope"}`}, // a problem answer
	} {
		resp, body := testkit.Do(t, tc.method, f.url(FaceAPI, tc.path), tc.body)
		if resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) > 0 {
			t.Errorf("%s %s (%d bytes of body): Content-Length %d, Transfer-Encoding %v", tc.method, tc.path, len(body), resp.ContentLength, resp.TransferEncoding)
		}
	}
	if _, body := testkit.Do(t, "POST", f.url(FaceAPI, "/v1/check"), batch); len(body) <= selfLength {
		t.Errorf("the batch's answer is %d bytes, not above selfLength (%d): it tests nothing of writeJSON's own field", len(body), selfLength)
	}
}

// pacedConfig's policy "pace" is one whose RateLimit r is cut below what
// is left: after one check of a fresh key, 99 units are left, but at 100
// per 60 s the 59 s that 99 units last at that pace hold only 98 (r/t ≤
// q/w, draft-11 §8). %s is the store.
const pacedConfig = `
api: {listen: "127.0.0.1:0"}
admin: {listen: "off"}
log: {level: error}
store: %s
policies:
  pace: {algorithm: gcra, quota: 100, window: 60s}
  roomy: {algorithm: sliding-window-log, quota: 5, window: 1h}
rules:
  - {name: paced, match: "/", policies: [pace]}
  - {name: both, match: "/b/", policies: [pace, roomy]}
`

// TestCheckPairsWithRateLimit (H4): the JSON's remaining and reset are
// the r and t that the answer's RateLimit field carries, for the summary
// and for each policy, so that a client pacing itself by the JSON spends
// no faster than the headers advise; units_left is the store's count,
// which X-RateLimit-Remaining carries.
func TestCheckPairsWithRateLimit(t *testing.T) {
	testPaired(t, start(t, fmt.Sprintf(pacedConfig, "{type: memory}")))
}

// TestCheckPairsWithRateLimitRedis is TestCheckPairsWithRateLimit on the
// Redis store.
func TestCheckPairsWithRateLimitRedis(t *testing.T) {
	store := fmt.Sprintf(`{type: redis, redis: {url: "redis://%s/0", timeout: 500ms, prefix: "fgtest:%d:"}}`,
		testkit.Env(t, "FLOODGATE_TEST_REDIS"), time.Now().UnixNano())
	testPaired(t, start(t, fmt.Sprintf(pacedConfig, store)))
}

func testPaired(t *testing.T, f *fixture) {
	// After n checks of a fresh key, 100-n units are left; they last
	// ⌊(100-n)·0.6⌋ s at the policy's pace, in which it allows ⌊q·t/w⌋.
	for n, want := range []jsonPair{{98, 59, 99}, {96, 58, 98}, {96, 58, 97}} {
		resp, m := check(t, f, `{"key":"user-1","rule":"paced"}`)
		got := pairOf(t, m)
		if got != want {
			t.Errorf("check %d: remaining, reset, units_left = %v, want %v", n+1, got, want)
		}
		if x := resp.Header.Get("X-Ratelimit-Remaining"); x != fmt.Sprint(want.left) {
			t.Errorf("check %d: X-RateLimit-Remaining %s, want units_left %d", n+1, x, want.left)
		}
		matchesField(t, resp, m)
	}
	resp, m := check(t, f, `{"key":"user-2","rule":"both"}`)
	if rs := m["results"].([]any); len(rs) != 2 || pairOf(t, rs[0].(map[string]any)) != (jsonPair{98, 59, 99}) {
		t.Errorf("two policies: results %v", rs)
	}
	matchesField(t, resp, m)
}

// matchesField checks that each result of a check's JSON m carries the r
// and t of the same policy in the answer's RateLimit field, and the
// summary those of its policy.
func matchesField(t *testing.T, resp *http.Response, m map[string]any) {
	t.Helper()
	limits, err := header.ParseLimit(resp.Header.Values("Ratelimit")...)
	if err != nil {
		t.Fatalf("RateLimit %q: %v", resp.Header.Values("Ratelimit"), err)
	}
	field := map[string][2]int64{}
	for _, l := range limits {
		field[l.Name] = [2]int64{l.Remaining, l.Window}
	}
	results := m["results"].([]any)
	if len(results) != len(limits) {
		t.Fatalf("%d results, %d items in RateLimit %q", len(results), len(limits), resp.Header.Values("Ratelimit"))
	}
	for _, r := range append(results, any(m)) {
		r := r.(map[string]any)
		p := pairOf(t, r)
		if want := field[r["policy"].(string)]; [2]int64{p.remaining, p.reset} != want {
			t.Errorf("policy %v: remaining %d, reset %d; RateLimit r=%d, t=%d", r["policy"], p.remaining, p.reset, want[0], want[1])
		}
	}
}

// jsonPair is a check's or a result's remaining, reset and units_left.
type jsonPair struct{ remaining, reset, left int64 }

func pairOf(t *testing.T, m map[string]any) jsonPair {
	t.Helper()
	n := func(name string) int64 {
		v, ok := m[name].(float64)
		if !ok {
			t.Fatalf("no number %q in %v", name, m)
		}
		return int64(v)
	}
	return jsonPair{n("remaining"), n("reset"), n("units_left")}
}
