package header

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

type vector struct {
	ID      string          `json:"id"`
	Field   string          `json:"field"`
	Value   string          `json:"value"`
	Lines   []string        `json:"lines"`
	Valid   bool            `json:"valid"`
	Parsed  json.RawMessage `json:"parsed"`
	Error   string          `json:"error"`
	Lenient string          `json:"lenient"`
}

func (v vector) lines() []string {
	if v.Lines != nil {
		return v.Lines
	}
	return []string{v.Value}
}

type vecItem struct {
	Name   string         `json:"name"`
	Q      *int64         `json:"q"`
	QU     string         `json:"qu"`
	W      *int64         `json:"w"`
	R      *int64         `json:"r"`
	T      *int64         `json:"t"`
	PKHex  *string        `json:"pk_hex"`
	Other  map[string]any `json:"other_params"`
	Limit  *int64         `json:"limit"`
	Kind   string         `json:"kind"`
	Secs   *int64         `json:"seconds"`
	Format string         `json:"format"`
	UTC    string         `json:"utc"`
	Epoch  *int64         `json:"epoch"`
	Over   bool           `json:"overflow_int64"`
}

type vecParsed struct {
	vecItem
	Dialect   string    `json:"dialect"`
	Policies  []vecItem `json:"policies"`
	Limits    []vecItem `json:"limits"`
	Remaining *int64    `json:"remaining"`
	Reset     *int64    `json:"reset"`
}

// vectorNow is the "current year is 2026" the vectors assume (ra-05).
var vectorNow = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

func loadVectors(t testing.TB) []vector {
	t.Helper()
	b, err := os.ReadFile("testdata/header-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Vectors []vector `json:"vectors"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	return doc.Vectors
}

// TestVectors runs every vector of header-vectors.json (H4, C1).
func TestVectors(t *testing.T) {
	vs := loadVectors(t)
	for _, v := range vs {
		t.Run(v.ID, func(t *testing.T) {
			var p vecParsed
			if v.Valid {
				if err := json.Unmarshal(v.Parsed, &p); err != nil {
					t.Fatal(err)
				}
			}
			if len(v.Lines) > 0 && strings.Join(v.Lines, ", ") != v.Value {
				t.Fatalf("lines do not join to value")
			}
			switch {
			case v.Field == "RateLimit-Policy" && p.Dialect == "draft-06/07":
				got, err := ParsePolicyDraft06(v.lines()...)
				mustOK(t, err)
				if len(got) != len(p.Policies) {
					t.Fatalf("got %d policies, want %d", len(got), len(p.Policies))
				}
				for i, w := range p.Policies {
					if got[i].Limit != *w.Limit || got[i].Window != *w.W {
						t.Errorf("policy %d = %+v, want %+v", i, got[i], w)
					}
				}
			case v.Field == "RateLimit-Policy":
				got, err := ParsePolicy(v.lines()...)
				checkStrict(t, v, err)
				if v.Valid {
					comparePolicies(t, got, p.Policies)
				}
				lgot, lerr := ParsePolicyLenient(v.lines()...)
				checkLenient(t, v, err, lerr)
				if v.Lenient != "" {
					if len(lgot) != 1 || !lgot[0].Lenient {
						t.Errorf("lenient parse not flagged: %+v", lgot)
					}
				}
			case v.Field == "RateLimit" && p.Dialect == "draft-07":
				got, err := ParseDraft07(v.lines()...)
				mustOK(t, err)
				want := Draft07{Limit: *p.Limit, Remaining: *p.Remaining, HasRemaining: true, Reset: *p.Reset}
				if got != want {
					t.Errorf("got %+v, want %+v", got, want)
				}
			case v.Field == "RateLimit":
				got, err := ParseLimit(v.lines()...)
				checkStrict(t, v, err)
				if v.Valid {
					compareLimits(t, got, p.Limits)
				}
				lgot, lerr := ParseLimitLenient(v.lines()...)
				checkLenient(t, v, err, lerr)
				if v.Lenient != "" && (len(lgot) != 1 || !lgot[0].Lenient) {
					t.Errorf("lenient parse not flagged: %+v", lgot)
				}
			case v.Field == "Retry-After":
				ra, err := ParseRetryAfterDetail(v.Value, vectorNow, false)
				checkStrict(t, v, err)
				if v.Valid {
					compareRetryAfter(t, ra, p.vecItem)
				}
				_, lerr := ParseRetryAfterDetail(v.Value, vectorNow, true)
				checkLenient(t, v, err, lerr)
			case v.Field == "X-RateLimit-Reset":
				r, err := ParseLegacyReset(v.Value, ResetAuto, vectorNow)
				mustOK(t, err)
				switch p.Kind {
				case "epoch-seconds":
					if r.Style != ResetEpoch || r.At.Unix() != *p.Epoch || r.At.Format(time.RFC3339) != p.UTC {
						t.Errorf("got %+v, want epoch %d", r, *p.Epoch)
					}
				case "delta-seconds":
					if r.Style != ResetDelta || r.Seconds != *p.Secs {
						t.Errorf("got %+v, want delta %d", r, *p.Secs)
					}
				default:
					t.Fatalf("unknown kind %q", p.Kind)
				}
			case v.Field == "RateLimit-Reset":
				n, err := ParseDraft06Int(v.lines()...)
				mustOK(t, err)
				if p.Dialect != "draft-06" || p.Kind != "delta-seconds" || n != *p.Secs {
					t.Errorf("got %d, want %+v", n, p)
				}
			case v.Field == "X-RateLimit-Limit":
				limit, ps, err := ParseLegacyLimit(v.lines()...)
				mustOK(t, err)
				if limit != *p.Limit || len(ps) != len(p.Policies) {
					t.Fatalf("got %d %+v, want %+v", limit, ps, p)
				}
				for i, w := range p.Policies {
					if ps[i].Limit != *w.Limit || ps[i].Window != *w.W {
						t.Errorf("policy %d = %+v, want %+v", i, ps[i], w)
					}
				}
			default:
				t.Fatalf("no test mapping for field %q", v.Field)
			}
		})
	}
	if len(vs) < 90 {
		t.Errorf("only %d vectors read", len(vs))
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func checkStrict(t *testing.T, v vector, err error) {
	t.Helper()
	if v.Valid && err != nil {
		t.Fatalf("valid vector rejected: %v", err)
	}
	if !v.Valid {
		if err == nil {
			t.Fatalf("invalid vector accepted (want %q)", v.Error)
		}
		if !errors.Is(err, ErrEmpty) && !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrInvalid) {
			t.Errorf("error %v wraps none of the sentinels", err)
		}
		if strings.HasPrefix(v.Error, "sf-parse") && !errors.Is(err, ErrSyntax) {
			t.Errorf("want a syntax error (%s), got %v", v.Error, err)
		}
		if strings.HasPrefix(v.Error, "empty") && !errors.Is(err, ErrEmpty) {
			t.Errorf("want ErrEmpty, got %v", err)
		}
	}
}

// checkLenient: a vector with a lenient note must be accepted by the lenient
// parser; every other vector must get the same verdict from both parsers.
func checkLenient(t *testing.T, v vector, strictErr, lenientErr error) {
	t.Helper()
	if v.Lenient != "" {
		if lenientErr != nil {
			t.Errorf("lenient parser rejected %q (note %q): %v", v.Value, v.Lenient, lenientErr)
		}
		return
	}
	if (strictErr == nil) != (lenientErr == nil) {
		t.Errorf("strict err %v, lenient err %v: verdicts differ without a lenient note", strictErr, lenientErr)
	}
}

func wantPK(t *testing.T, got []byte, want *string) {
	t.Helper()
	if want == nil {
		if got != nil {
			t.Errorf("pk = %x, want absent", got)
		}
		return
	}
	if got == nil || hex.EncodeToString(got) != *want {
		t.Errorf("pk = %x, want %s", got, *want)
	}
}

func wantOther(t *testing.T, got map[string]any, want map[string]any) {
	t.Helper()
	conv := map[string]any{}
	for k, v := range got {
		switch x := v.(type) {
		case int64:
			conv[k] = float64(x)
		default:
			conv[k] = x
		}
	}
	if len(want) == 0 && len(got) == 0 {
		return
	}
	if !reflect.DeepEqual(conv, want) {
		t.Errorf("other = %v, want %v", conv, want)
	}
}

func comparePolicies(t *testing.T, got []Policy, want []vecItem) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d policies, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.Name || g.Quota != *w.Q || g.Unit != w.QU || g.Lenient {
			t.Errorf("policy %d = %+v, want %+v", i, g, w)
		}
		if (w.W == nil && g.Window != 0) || (w.W != nil && g.Window != *w.W) {
			t.Errorf("policy %d w = %d, want %v", i, g.Window, w.W)
		}
		wantPK(t, g.PartitionKey, w.PKHex)
		wantOther(t, g.Other, w.Other)
	}
}

func compareLimits(t *testing.T, got []Limit, want []vecItem) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d limits, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.Name || g.Remaining != *w.R || g.Lenient {
			t.Errorf("limit %d = %+v, want %+v", i, g, w)
		}
		if (w.T == nil) == g.HasWindow || (w.T != nil && g.Window != *w.T) {
			t.Errorf("limit %d t = %d/%v, want %v", i, g.Window, g.HasWindow, w.T)
		}
		wantPK(t, g.PartitionKey, w.PKHex)
		wantOther(t, g.Other, w.Other)
	}
}

func compareRetryAfter(t *testing.T, ra RetryAfter, w vecItem) {
	t.Helper()
	switch w.Kind {
	case "delay-seconds":
		if ra.IsDate() {
			t.Fatalf("got a date %v", ra.Date)
		}
		if w.Over {
			if !ra.Saturated || ra.Seconds != 1<<63-1 {
				t.Errorf("overflow not saturated: %+v", ra)
			}
			if d := ra.Delay(vectorNow); d != 1<<63-1 {
				t.Errorf("Delay = %v, want max Duration", d)
			}
			return
		}
		if ra.Seconds != *w.Secs || ra.Saturated {
			t.Errorf("seconds = %d, want %d", ra.Seconds, *w.Secs)
		}
		if d := ra.Delay(vectorNow); d != time.Duration(*w.Secs)*time.Second {
			t.Errorf("Delay = %v", d)
		}
	case "http-date":
		if ra.Format.String() != w.Format {
			t.Errorf("format = %s, want %s", ra.Format, w.Format)
		}
		if ra.Date.Unix() != *w.Epoch || ra.Date.Format(time.RFC3339) != w.UTC {
			t.Errorf("date = %v, want %s", ra.Date, w.UTC)
		}
	default:
		t.Fatalf("unknown kind %q", w.Kind)
	}
}
