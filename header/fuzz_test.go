package header

import (
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"
)

func seedVectors(f *testing.F, field string) {
	for _, v := range loadVectors(f) {
		if v.Field == field {
			f.Add(v.Value)
		}
	}
}

// canonicalFormatErr reports whether a Format error is one of the product
// rules that are stricter than the parser (empty or duplicate names, the
// unit "request"); such values parse but are never emitted (digest §4).
func canonicalFormatErr(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("format error does not wrap ErrInvalid: %v", err)
	}
}

func FuzzParsePolicy(f *testing.F) {
	seedVectors(f, "RateLimit-Policy")
	f.Add(`"a";q=1;pk=:YWI:;x=@12;y=%"%c3%a9";z=1.5;t=tok`)
	f.Fuzz(func(t *testing.T, s string) {
		for _, parse := range []func(...string) ([]Policy, error){ParsePolicy, ParsePolicyLenient} {
			ps, err := parse(s)
			if err != nil {
				if ps != nil {
					t.Fatal("non-nil result with error")
				}
				continue
			}
			out, err := FormatPolicy(ps)
			if err != nil {
				canonicalFormatErr(t, err)
				continue
			}
			back, err := ParsePolicy(out)
			if err != nil {
				t.Fatalf("re-parse of %q (from %q): %v", out, s, err)
			}
			for i := range ps {
				ps[i].Lenient = false
			}
			if !reflect.DeepEqual(back, ps) {
				t.Fatalf("round trip of %q via %q:\n got %#v\nwant %#v", s, out, back, ps)
			}
		}
	})
}

func FuzzParseLimit(f *testing.F) {
	seedVectors(f, "RateLimit")
	f.Fuzz(func(t *testing.T, s string) {
		for _, parse := range []func(...string) ([]Limit, error){ParseLimit, ParseLimitLenient} {
			ls, err := parse(s)
			if err != nil {
				continue
			}
			out, err := FormatLimit(ls)
			if err != nil {
				canonicalFormatErr(t, err)
				continue
			}
			back, err := ParseLimit(out)
			if err != nil {
				t.Fatalf("re-parse of %q (from %q): %v", out, s, err)
			}
			for i := range ls {
				ls[i].Lenient = false
			}
			if !reflect.DeepEqual(back, ls) {
				t.Fatalf("round trip of %q via %q:\n got %#v\nwant %#v", s, out, back, ls)
			}
		}
	})
}

func FuzzParseRetryAfter(f *testing.F) {
	seedVectors(f, "Retry-After")
	f.Fuzz(func(t *testing.T, s string) {
		for _, lenient := range []bool{false, true} {
			ra, err := ParseRetryAfterDetail(s, vectorNow, lenient)
			if err != nil {
				continue
			}
			if d := ra.Delay(vectorNow); d < 0 {
				t.Fatalf("negative delay %v for %q", d, s)
			}
			back, err := ParseRetryAfterDetail(ra.String(), vectorNow, false)
			if err != nil {
				t.Fatalf("re-parse of %q (from %q): %v", ra.String(), s, err)
			}
			if back.Seconds != ra.Seconds || !back.Date.Equal(ra.Date) || back.IsDate() != ra.IsDate() {
				t.Fatalf("round trip of %q: %+v != %+v", s, back, ra)
			}
			if !ra.IsDate() {
				if d, err := ParseRetryAfter(FormatRetryAfter(ra.Delay(vectorNow)), vectorNow); err != nil || d < ra.Delay(vectorNow) && ra.Seconds > 0 && !ra.Saturated {
					t.Fatalf("FormatRetryAfter lost time for %q: %v, %v", s, d, err)
				}
			}
		}
	})
}

func FuzzParseLegacyReset(f *testing.F) {
	for _, s := range []string{"42", "1773394200", "1773394200123", "Fri, 13 Mar 2026 09:30:00 GMT", "2026-03-13T09:30:00Z", "", "x"} {
		f.Add(s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, s string, style uint8) {
		st := ResetStyle(style % 3)
		r, err := ParseLegacyReset(s, st, vectorNow)
		if err != nil {
			return
		}
		switch r.Style {
		case ResetEpoch:
			// Formatting rounds up to whole seconds (express-rate-limit
			// does the same), so milliseconds may move forward by < 1 s.
			back, err := ParseLegacyReset(FormatLegacyReset(r.At, vectorNow, ResetEpoch), ResetEpoch, vectorNow)
			if d := back.At.Sub(r.At); err != nil || d < 0 || d >= time.Second {
				t.Fatalf("round trip of %q: %+v vs %+v, %v", s, back, r, err)
			}
		case ResetDelta:
			if r.Seconds < 1<<32 {
				out := FormatLegacyReset(vectorNow.Add(time.Duration(r.Seconds)*time.Second), vectorNow, ResetDelta)
				if back, err := ParseLegacyReset(out, ResetDelta, vectorNow); err != nil || back != r {
					t.Fatalf("round trip of %q via %q: %+v, %v", s, out, back, err)
				}
			}
		}
	})
}

// FuzzDetect feeds arbitrary values to every field Detect reads: it must
// never panic, and a field it reports as parsed must parse on its own.
func FuzzDetect(f *testing.F) {
	f.Add(`"a";r=1;t=2`, `"a";q=1;w=2`, "100, 100;w=60", "5", "42", "7")
	f.Add("limit=1, reset=2", "1;w=1", "1", "1;x", "Fri, 13 Mar 2026 09:30:00 GMT", "x")
	f.Fuzz(func(t *testing.T, rl, pol, lim, rem, reset, ra string) {
		h := http.Header{}
		h.Set("RateLimit", rl)
		h.Set("RateLimit-Policy", pol)
		h.Set("RateLimit-Limit", lim)
		h.Set("X-RateLimit-Limit", lim)
		h.Set("RateLimit-Remaining", rem)
		h.Set("X-RateLimit-Remaining", rem)
		h.Set("RateLimit-Reset", reset)
		h.Set("X-RateLimit-Reset", reset)
		h.Set("Retry-After", ra)
		for _, lenient := range []bool{false, true} {
			o := Detect(h, vectorNow, DetectOptions{Lenient: lenient})
			if len(o.Limits) > 0 && !lenient {
				if _, err := ParseLimit(rl); err != nil {
					t.Fatalf("Detect accepted RateLimit %q that ParseLimit rejects", rl)
				}
			}
			if o.HasRetryAfter {
				if _, err := ParseRetryAfterDetail(ra, vectorNow, lenient); err != nil {
					t.Fatalf("Detect accepted Retry-After %q that the parser rejects", ra)
				}
			}
			for _, e := range o.Ignored {
				if !errors.Is(e, ErrEmpty) && !errors.Is(e, ErrSyntax) && !errors.Is(e, ErrInvalid) {
					t.Fatalf("ignored error wraps no sentinel: %v", e)
				}
			}
		}
	})
}
