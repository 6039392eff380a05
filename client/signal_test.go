package client

import (
	"encoding/hex"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/header"
)

type vector struct {
	ID     string          `json:"id"`
	Field  string          `json:"field"`
	Value  string          `json:"value"`
	Lines  []string        `json:"lines"`
	Valid  bool            `json:"valid"`
	Parsed json.RawMessage `json:"parsed"`
}

type vecPolicy struct {
	Name  string  `json:"name"`
	Q     int64   `json:"q"`
	QU    string  `json:"qu"`
	W     *int64  `json:"w"`
	PKHex *string `json:"pk_hex"`
}

type vecLimit struct {
	Name  string  `json:"name"`
	R     int64   `json:"r"`
	T     *int64  `json:"t"`
	PKHex *string `json:"pk_hex"`
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	b, err := os.ReadFile("../header/testdata/header-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Vectors []vector }
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) < 90 {
		t.Fatalf("only %d vectors", len(f.Vectors))
	}
	return f.Vectors
}

// vectorNow places the vectors' dates: one minute before 2026-03-13T09:30Z.
var vectorNow = time.Date(2026, 3, 13, 9, 29, 0, 0, time.UTC)

func pkOf(t *testing.T, h *string) []byte {
	if h == nil {
		return nil
	}
	b, err := hex.DecodeString(*h)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func eqPK(a, b []byte) bool { return (a == nil) == (b == nil) && string(a) == string(b) }

// TestExtractVectors runs every vector of spec/header-vectors.json through
// the client's extraction (Extract, as the transport uses it) and checks
// the values a client acts on. The two draft-11-invalid values that are
// valid older dialects (pol-39, lim-20) must be read by digest §2.5
// detection exactly as their legacy twins leg-03 and leg-04.
func TestExtractVectors(t *testing.T) {
	vs := loadVectors(t)
	byID := map[string]vector{}
	for _, v := range vs {
		byID[v.ID] = v
	}
	wantOutlier := map[string][]bool{
		"lim-03": {true, false}, // "day" t=30000 > 600 s
		"lim-05": {true},        // t=1800
		"lim-06": {true},        // r=5;t=0
		"lim-09": {false, true}, // "day" t=40000
	}
	for _, v := range vs {
		t.Run(v.ID, func(t *testing.T) {
			h := http.Header{}
			lines := v.Lines
			if lines == nil {
				lines = []string{v.Value}
			}
			h[http.CanonicalHeaderKey(v.Field)] = lines
			s := Extract(h, 200, vectorNow, ExtractOptions{})

			if alias := map[string]string{"pol-39": "leg-03", "lim-20": "leg-04"}[v.ID]; alias != "" {
				v = byID[alias]
				if len(s.Ignored) != 0 {
					t.Fatalf("older dialect ignored: %v", s.Ignored)
				}
			}
			if !v.Valid {
				if len(s.Items) != 0 || s.HasRetryAfter {
					t.Fatalf("invalid value produced items %+v / retry-after %v", s.Items, s.HasRetryAfter)
				}
				if len(s.Ignored) != 1 {
					t.Fatalf("want the field listed as ignored once, got %v", s.Ignored)
				}
				return
			}
			if len(s.Ignored) != 0 {
				t.Fatalf("valid value ignored: %v", s.Ignored)
			}
			switch {
			case strings.HasPrefix(v.ID, "pol-"):
				var p struct{ Policies []vecPolicy }
				mustJSON(t, v.Parsed, &p)
				if s.Dialect != header.DialectDraft11 || len(s.Items) != len(p.Policies) {
					t.Fatalf("dialect %v, %d items, want draft-11 and %d", s.Dialect, len(s.Items), len(p.Policies))
				}
				for i, want := range p.Policies {
					got := s.Items[i]
					unit := want.QU
					if unit == "request" { // the IANA table's spelling means the default unit
						unit = header.UnitRequests
					}
					w := int64(0)
					if want.W != nil {
						w = *want.W
					}
					if got.Policy != want.Name || got.Quota != want.Q || !got.HasPolicy || got.Window != w ||
						got.Unit != unit || !eqPK(got.PartitionKey, pkOf(t, want.PKHex)) || got.HasRemaining {
						t.Errorf("item %d = %+v, want %+v", i, got, want)
					}
					if got.KnownUnit != (want.QU != "tokens") {
						t.Errorf("item %d KnownUnit = %v", i, got.KnownUnit)
					}
					if got.Outlier != "" {
						t.Errorf("item %d outlier %q", i, got.Outlier)
					}
				}
			case strings.HasPrefix(v.ID, "lim-"):
				var p struct{ Limits []vecLimit }
				mustJSON(t, v.Parsed, &p)
				if s.Dialect != header.DialectDraft11 || len(s.Items) != len(p.Limits) {
					t.Fatalf("dialect %v, %d items, want draft-11 and %d", s.Dialect, len(s.Items), len(p.Limits))
				}
				for i, want := range p.Limits {
					got := s.Items[i]
					if got.Policy != want.Name || got.Remaining != want.R || !got.HasRemaining ||
						got.HasWindow != (want.T != nil) || !eqPK(got.PartitionKey, pkOf(t, want.PKHex)) ||
						got.Unit != header.UnitRequests || got.HasPolicy {
						t.Errorf("item %d = %+v, want %+v", i, got, want)
					}
					if want.T != nil && got.EffectiveWindow != *want.T {
						t.Errorf("item %d t = %d, want %d", i, got.EffectiveWindow, *want.T)
					}
					wantOut := false
					if o := wantOutlier[v.ID]; o != nil {
						wantOut = o[i]
					}
					if (got.Outlier != "") != wantOut {
						t.Errorf("item %d outlier %q, want outlier=%v", i, got.Outlier, wantOut)
					}
				}
			case strings.HasPrefix(v.ID, "ra-"):
				var p struct {
					Kind     string
					Seconds  int64
					Epoch    int64
					Format   string
					Overflow bool `json:"overflow_int64"`
				}
				mustJSON(t, v.Parsed, &p)
				if !s.HasRetryAfter || len(s.Items) != 0 {
					t.Fatalf("HasRetryAfter=%v items=%v", s.HasRetryAfter, s.Items)
				}
				switch {
				case p.Overflow:
					if !s.RetryAfter.Saturated || s.RetryDelay != math.MaxInt64 {
						t.Errorf("overflow: %+v delay %v", s.RetryAfter, s.RetryDelay)
					}
				case p.Kind == "delay-seconds":
					if s.RetryDelay != time.Duration(p.Seconds)*time.Second {
						t.Errorf("delay %v, want %ds", s.RetryDelay, p.Seconds)
					}
				default:
					want := max(time.Unix(p.Epoch, 0).Sub(vectorNow), 0)
					if s.RetryDelay != want || s.RetryAfter.Format.String() != p.Format {
						t.Errorf("date: delay %v format %v, want %v %s", s.RetryDelay, s.RetryAfter.Format, want, p.Format)
					}
				}
			case strings.HasPrefix(v.ID, "leg-"):
				checkLegacy(t, v, s)
			default:
				t.Fatalf("unknown vector family")
			}
		})
	}
}

func checkLegacy(t *testing.T, v vector, s Signal) {
	type want struct {
		q, w, r, t             int64
		hasQ, hasR, hasT, more bool
	}
	exp := map[string]want{
		"leg-01": {t: 60, hasT: true}, // epoch 09:30:00, one minute after vectorNow
		"leg-02": {t: 42, hasT: true},
		"leg-03": {q: 100, w: 60, hasQ: true},
		"leg-04": {q: 100, r: 50, t: 5, hasQ: true, hasR: true, hasT: true},
		"leg-05": {t: 5, hasT: true},
		"leg-06": {q: 100, w: 60, hasQ: true, more: true},
	}[v.ID]
	if len(s.Items) == 0 {
		t.Fatalf("no items")
	}
	it := s.Items[0]
	if it.Policy != "" || it.Unit != header.UnitRequests || it.HasPolicy != exp.hasQ || it.Quota != exp.q || it.Window != exp.w ||
		it.HasRemaining != exp.hasR || it.Remaining != exp.r || it.HasWindow != exp.hasT || it.EffectiveWindow != exp.t || it.Outlier != "" {
		t.Errorf("item = %+v, want %+v", it, exp)
	}
	if exp.more {
		if len(s.Items) != 2 || s.Items[1].Quota != 5000 || s.Items[1].Window != 86400 || s.Items[1].HasRemaining {
			t.Errorf("inline policies: %+v", s.Items)
		}
	} else if len(s.Items) != 1 {
		t.Errorf("items: %+v", s.Items)
	}
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// TestExtractJoinAndPace covers the join of RateLimit with
// RateLimit-Policy and the draft-11 §8 clamp of r/t by q/w.
func TestExtractJoinAndPace(t *testing.T) {
	h := http.Header{}
	h.Set("RateLimit-Policy", `"burst";q=10000;w=1000, "day";q=2000;w=86400`)
	h.Set("RateLimit", `"burst";r=10000;t=10`)
	h.Set("X-RateLimit-Remaining", "1") // ignored: draft-11 fields win
	s := Extract(h, 200, vectorNow, ExtractOptions{})
	if len(s.Items) != 2 {
		t.Fatalf("items %+v", s.Items)
	}
	b := s.Items[0]
	if b.Policy != "burst" || b.Quota != 10000 || b.Window != 1000 || b.Remaining != 10000 || b.EffectiveWindow != 10 {
		t.Fatalf("burst item %+v", b)
	}
	if p, ok := b.Pace(DefaultMaxWindow); !ok || p != 10 {
		t.Fatalf("pace %v %v, want q/w = 10/s, not r/t = 1000/s", p, ok)
	}
	if _, ok := s.Items[1].Pace(DefaultMaxWindow); ok {
		t.Fatalf("a daily policy alone must not pace")
	}

	h = http.Header{}
	h.Set("RateLimit-Policy", `"p";q=10;w=10`)
	h.Set("RateLimit", `"p";r=50;t=5`)
	if s := Extract(h, 200, vectorNow, ExtractOptions{}); s.Items[0].Outlier == "" {
		t.Fatalf("r > q must be an outlier: %+v", s.Items[0])
	}
	h = http.Header{}
	h.Set("RateLimit", `"p";r=1000000000;t=10`)
	if s := Extract(h, 200, vectorNow, ExtractOptions{}); s.Items[0].Outlier == "" {
		t.Fatalf("absurd r must be an outlier")
	}
	h = http.Header{"Age": {"30"}}
	h.Set("RateLimit", `"p";r=5;t=10`)
	if s := Extract(h, 200, vectorNow, ExtractOptions{}); !s.Cached {
		t.Fatalf("Age 30 not seen as cached")
	}
}

func TestReadProblem(t *testing.T) {
	body := `{"type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity","status":"503","title":"Temporary Reduced Capacity","violated-policies":["minute"],"x":1}`
	resp := &http.Response{
		Header: http.Header{"Content-Type": {"application/problem+json; charset=utf-8"}},
		Body:   io.NopCloser(strings.NewReader(body)),
	}
	p := ReadProblem(resp)
	if p == nil || p.Type != header.ProblemTemporaryReducedCapacity || p.Status != 0 || len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "minute" {
		t.Fatalf("problem %+v (a string status must be ignored alone)", p)
	}
	rest, _ := io.ReadAll(resp.Body)
	if string(rest) != body {
		t.Fatalf("body not preserved: %q", rest)
	}
	resp = &http.Response{Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body))}
	if ReadProblem(resp) != nil {
		t.Fatalf("plain JSON read as a problem")
	}
}

// TestRetryAfterDateFromResponseDate: an HTTP-date Retry-After is measured
// against the response's Date, not the client's clock. Date 08:00:00,
// Retry-After 08:01:30, the client's clock 30 s ahead: wait 90 s, not 60.
func TestRetryAfterDateFromResponseDate(t *testing.T) {
	server := time.Date(2026, 3, 13, 8, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("Date", server.Format(http.TimeFormat))
	h.Set("Retry-After", server.Add(90*time.Second).Format(http.TimeFormat))
	s := Extract(h, 429, server.Add(30*time.Second), ExtractOptions{})
	if !s.HasRetryAfter || s.RetryDelay != 90*time.Second {
		t.Fatalf("RetryDelay %v, want 90s", s.RetryDelay)
	}
	// Without a Date, the client's clock is all there is.
	h.Del("Date")
	if s := Extract(h, 429, server.Add(30*time.Second), ExtractOptions{}); s.RetryDelay != 60*time.Second {
		t.Fatalf("without Date: RetryDelay %v, want 60s", s.RetryDelay)
	}
}
