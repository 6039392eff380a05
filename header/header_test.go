package header

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
)

func TestFormatPolicy(t *testing.T) {
	cases := []struct {
		in   []Policy
		want string
	}{
		{[]Policy{{Name: "minute", Quota: 60, Window: 60}, {Name: "day", Quota: 2000, Window: 86400}},
			`"minute";q=60;w=60, "day";q=2000;w=86400`},
		{[]Policy{{Name: "upload", Quota: 1048576, Unit: UnitContentBytes, Window: 3600, PartitionKey: []byte("user:42")}},
			`"upload";q=1048576;qu="content-bytes";w=3600;pk=:dXNlcjo0Mg==:`},
		{[]Policy{{Name: "inflight", Quota: 8, Unit: UnitConcurrentRequests}}, `"inflight";q=8;qu="concurrent-requests"`},
		{[]Policy{{Name: "x", Quota: 0, Unit: UnitRequests, Window: 1}}, `"x";q=0;w=1`},
		{[]Policy{{Name: `a"b\c`, Quota: 1, Window: 1, PartitionKey: []byte{}}}, `"a\"b\\c";q=1;w=1;pk=::`},
		{[]Policy{{Name: "s", Quota: 120, Window: 60, Other: map[string]any{"acme-soft": true, "acme-burst": int64(20), "acme-algo": "sliding-log", "acme-off": false}}},
			`"s";q=120;w=60;acme-algo="sliding-log";acme-burst=20;acme-off=?0;acme-soft`},
	}
	for _, c := range cases {
		got, err := FormatPolicy(c.in)
		if err != nil || got != c.want {
			t.Errorf("FormatPolicy(%+v) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestFormatLimit(t *testing.T) {
	got, err := FormatLimit([]Limit{{Name: "minute", Remaining: 12, Window: 37, HasWindow: true}, {Name: "trial", Remaining: 991, PartitionKey: []byte("trial:991")}})
	want := `"minute";r=12;t=37, "trial";r=991;pk=:dHJpYWw6OTkx:`
	if err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
	got, err = FormatLimit([]Limit{{Name: "search", Remaining: 0, Window: 0, HasWindow: true}})
	if err != nil || got != `"search";r=0;t=0` {
		t.Errorf("got %q, %v", got, err)
	}
}

func TestFormatRejects(t *testing.T) {
	bad := map[string][]Policy{
		"empty name":     {{Name: "", Quota: 1}},
		"non-printable":  {{Name: "caf\xc3\xa9", Quota: 1}},
		"control":        {{Name: "a\nb", Quota: 1}},
		"duplicate":      {{Name: "a", Quota: 1}, {Name: "b", Quota: 2}, {Name: "a", Quota: 3}},
		"negative q":     {{Name: "a", Quota: -1}},
		"huge q":         {{Name: "a", Quota: MaxInteger + 1}},
		"negative w":     {{Name: "a", Quota: 1, Window: -5}},
		"unit request":   {{Name: "a", Quota: 1, Unit: "request"}},
		"unit non-ascii": {{Name: "a", Quota: 1, Unit: "\x01"}},
		"reserved other": {{Name: "a", Quota: 1, Other: map[string]any{"q": int64(2)}}},
		"pk in other":    {{Name: "a", Quota: 1, Other: map[string]any{"pk": []byte("x")}}},
		"bad key":        {{Name: "a", Quota: 1, Other: map[string]any{"Acme": int64(2)}}},
		"bad value type": {{Name: "a", Quota: 1, Other: map[string]any{"acme": struct{}{}}}},
	}
	for name, ps := range bad {
		if s, err := FormatPolicy(ps); err == nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %q, %v; want ErrInvalid", name, s, err)
		}
	}
	if _, err := FormatPolicy(nil); !errors.Is(err, ErrEmpty) {
		t.Errorf("nil policies: %v", err)
	}
	badL := map[string][]Limit{
		"empty name": {{Name: ""}},
		"duplicate":  {{Name: "a"}, {Name: "a"}},
		"negative r": {{Name: "a", Remaining: -1}},
		"negative t": {{Name: "a", Window: -1, HasWindow: true}},
		"reserved":   {{Name: "a", Other: map[string]any{"t": int64(1)}}},
	}
	for name, ls := range badL {
		if s, err := FormatLimit(ls); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %q, %v; want ErrInvalid", name, s, err)
		}
	}
	if _, err := FormatLimit(nil); !errors.Is(err, ErrEmpty) {
		t.Errorf("nil limits: %v", err)
	}
	// A failed append leaves dst as it was.
	dst := []byte("keep")
	out, err := AppendPolicy(dst, []Policy{{Name: "ok", Quota: 1}, {Name: "", Quota: 1}})
	if err == nil || string(out) != "keep" {
		t.Errorf("AppendPolicy on error = %q, %v", out, err)
	}
}

// TestRoundTrip: what Format emits, Parse reads back to the same value (H4).
func TestRoundTrip(t *testing.T) {
	ps := []Policy{
		{Name: "minute", Quota: 60, Unit: UnitRequests, Window: 60},
		{Name: "bytes", Quota: MaxInteger, Unit: UnitContentBytes, Window: MaxInteger, PartitionKey: []byte{0, 1, 2, 0xff}},
		{Name: ` "\ ~`, Quota: 0, Unit: "tokens", PartitionKey: []byte{}},
		{Name: "vendor", Quota: 5, Unit: UnitRequests, Other: map[string]any{
			"acme-i": int64(-3), "acme-d": 1.25, "acme-s": "x", "acme-t": httpsfv.Token("tok/en:1"),
			"acme-b": []byte("hi"), "acme-on": true, "acme-off": false, "acme-at": time.Unix(1773394200, 0).UTC(),
			"acme-ds": httpsfv.DisplayString("café"),
		}},
	}
	s, err := FormatPolicy(ps)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParsePolicy(s)
	if err != nil {
		t.Fatalf("ParsePolicy(%q): %v", s, err)
	}
	if !reflect.DeepEqual(back, ps) {
		t.Errorf("round trip:\n got %#v\nwant %#v\nwire %s", back, ps, s)
	}
	// An empty Unit means "requests" and reads back as such.
	s, _ = FormatPolicy([]Policy{{Name: "a", Quota: 1}})
	if back, _ := ParsePolicy(s); back[0].Unit != UnitRequests {
		t.Errorf("unit = %q", back[0].Unit)
	}

	ls := []Limit{
		{Name: "minute", Remaining: 0, Window: 41, HasWindow: true},
		{Name: "trial", Remaining: MaxInteger, PartitionKey: []byte("trial:991")},
		{Name: "c", Remaining: 3, Window: 0, HasWindow: true, Other: map[string]any{"q": int64(100)}},
	}
	s, err = FormatLimit(ls)
	if err != nil {
		t.Fatal(err)
	}
	lback, err := ParseLimit(s)
	if err != nil || !reflect.DeepEqual(lback, ls) {
		t.Errorf("limit round trip: got %#v, %v; want %#v", lback, err, ls)
	}
}

func TestParseSplitLines(t *testing.T) {
	got, err := ParseLimit(`"a";r=1`, `"b";r=2;t=3`)
	if err != nil || len(got) != 2 || got[1].Name != "b" || got[1].Window != 3 {
		t.Fatalf("got %+v, %v", got, err)
	}
	// A member may not be split across lines.
	if _, err := ParseLimit(`"a";r=1;`, `t=3`); err == nil {
		t.Error("split member accepted")
	}
	if _, err := ParseLimit(`("a" "b");r=1`); !errors.Is(err, ErrInvalid) {
		t.Errorf("inner list: %v", err)
	}
}

func TestPadByteSequences(t *testing.T) {
	cases := map[string]string{
		`"a";pk=:YQ:`:     `"a";pk=:YQ==:`,
		`"a";pk=:YWI:`:    `"a";pk=:YWI=:`,
		`"a";pk=:YQ=:`:    `"a";pk=:YQ==:`,
		`"a";pk=:YQ==:`:   `"a";pk=:YQ==:`,
		`"x:YQ:";pk=:YQ:`: `"x:YQ:";pk=:YQ==:`,
		`"x\":YQ:";q=1`:   `"x\":YQ:";q=1`,
		`tok:YQ:;q=1`:     `tok:YQ:;q=1`,
		`%"a:YQ:";x=:YQ:`: `%"a:YQ:";x=:YQ==:`,
		`"a";pk=:Y:`:      `"a";pk=:Y:`,
		`"a";pk=:YQ`:      `"a";pk=:YQ`,
		`:YQ:, :YWI:`:     `:YQ==:, :YWI=:`,
	}
	for in, want := range cases {
		if got, _ := padByteSequences(in); got != want {
			t.Errorf("pad(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEffectiveUnit(t *testing.T) {
	for unit, want := range map[string]struct {
		u     string
		known bool
	}{
		"": {"requests", true}, "request": {"requests", true}, "content-bytes": {"content-bytes", true},
		"concurrent-requests": {"concurrent-requests", true}, "tokens": {"tokens", false},
	} {
		u, k := Policy{Unit: unit}.EffectiveUnit()
		if u != want.u || k != want.known {
			t.Errorf("EffectiveUnit(%q) = %q, %v", unit, u, k)
		}
	}
}

func TestFormatRetryAfter(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "1", 0: "1", time.Nanosecond: "1", time.Second: "1",
		time.Second + 1: "2", 41 * time.Second: "41", 40*time.Second + 100*time.Millisecond: "41",
		math.MaxInt64: "9223372037",
	} {
		if got := FormatRetryAfter(d); got != want {
			t.Errorf("FormatRetryAfter(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 13, 9, 29, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
	}{
		{"120", 120 * time.Second},
		{" 7\t", 7 * time.Second},
		{"Fri, 13 Mar 2026 09:30:00 GMT", time.Minute},
		{"Friday, 13-Mar-26 09:30:00 GMT", time.Minute},
		{"Fri Mar 13 09:30:00 2026", time.Minute},
		{"Thu, 12 Mar 2026 09:30:00 GMT", 0},           // in the past
		{"Fri, 13 Mar 2026 09:29:60 GMT", time.Minute}, // leap second
	}
	for _, c := range cases {
		got, err := ParseRetryAfter(c.in, now)
		if err != nil || got != c.want {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "-1", "1e3", "0x10", "Fri, 13 Mar 2026 24:00:00 GMT", "Fri, 13 Mar 2026 09:60:00 GMT",
		"Fri, 13 Foo 2026 09:30:00 GMT", "Xyz, 13 Mar 2026 09:30:00 GMT", "Fri, 13 Mar 2026 09:30:00 GMT ", "Fri,  13 Mar 2026 09:30:00 GMT",
		"Fri Mar 13 09:30:00 2026 ", "Fri Mar 1 09:30:00 2026", "Friday, 13-Mar-2026 09:30:00 GMT"} {
		if _, err := ParseRetryAfter(bad+"x", now); err == nil {
			t.Errorf("accepted %q", bad+"x")
		}
		if bad == "Fri, 13 Mar 2026 09:30:00 GMT " || bad == "Fri Mar 13 09:30:00 2026 " {
			continue // trailing space alone is trimmed
		}
		if _, err := ParseRetryAfter(bad, now); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseRetryAfter(%q): %v, want ErrInvalid", bad, err)
		}
	}
	// rfc850 two-digit years: more than 50 years ahead means the past century.
	for in, year := range map[string]int{
		"Saturday, 01-Jan-77 00:00:00 GMT":  1977,
		"Wednesday, 01-Jan-76 00:00:00 GMT": 2076,
		"Thursday, 01-Jan-26 00:00:00 GMT":  2026,
	} {
		ra, err := ParseRetryAfterDetail(in, now, false)
		if err != nil || ra.Date.Year() != year {
			t.Errorf("%q: year %d, %v; want %d", in, ra.Date.Year(), err, year)
		}
	}
	// Lenient mode accepts sloppy dates but not garbage.
	for _, in := range []string{"FRI, 13 MAR 2026 09:30:00 GMT", "Fri, 13 Mar 2026 09:30:00 +0000", "Mon, 13 Mar 2026 09:30:00 UTC"} {
		if d, err := ParseRetryAfterLenient(in, now); err != nil || d != time.Minute {
			t.Errorf("lenient %q = %v, %v", in, d, err)
		}
	}
	if _, err := ParseRetryAfterLenient("Xyz, 13 Mar 2026 09:30:00 GMT", now); err == nil {
		t.Error("lenient accepted a bad day-name")
	}
}

func TestLegacy(t *testing.T) {
	now := time.Date(2026, 3, 13, 9, 29, 0, 0, time.UTC)
	reset := now.Add(60*time.Second + time.Millisecond)
	if got := FormatLegacyReset(reset, now, ResetEpoch); got != "1773394201" {
		t.Errorf("epoch = %s", got)
	}
	if got := FormatLegacyReset(reset, now, ResetAuto); got != "1773394201" {
		t.Errorf("auto = %s", got)
	}
	if got := FormatLegacyReset(reset, now, ResetDelta); got != "61" {
		t.Errorf("delta = %s", got)
	}
	if got := FormatLegacyReset(now.Add(-time.Hour), now, ResetDelta); got != "0" {
		t.Errorf("past delta = %s", got)
	}
	h := http.Header{}
	SetLegacy(h, 100, -2, reset, now, ResetDelta)
	if h.Get("X-RateLimit-Limit") != "100" || h.Get("X-RateLimit-Remaining") != "0" || h.Get("X-RateLimit-Reset") != "61" {
		t.Errorf("SetLegacy: %v", h)
	}
	// Round trip through the parser in each configured style.
	for _, style := range []ResetStyle{ResetEpoch, ResetDelta} {
		r, err := ParseLegacyReset(FormatLegacyReset(reset, now, style), style, now)
		if err != nil || r.Until(now) != 61*time.Second {
			t.Errorf("%v: %+v, %v", style, r, err)
		}
	}
	for in, want := range map[string]ResetStyle{
		"42": ResetDelta, "1773394200": ResetEpoch, "1773394200123": ResetEpoch,
		"Fri, 13 Mar 2026 09:30:00 GMT": ResetDate, "2026-03-13T09:30:00Z": ResetDate,
	} {
		r, err := ParseLegacyReset(in, ResetAuto, now)
		if err != nil || r.Style != want {
			t.Errorf("auto %q = %+v, %v", in, r, err)
		}
	}
	if r, _ := ParseLegacyReset("1773394200123", ResetAuto, now); r.At.UnixMilli() != 1773394200123 {
		t.Errorf("millis: %v", r.At)
	}
	if r, _ := ParseLegacyReset("42", ResetEpoch, now); r.Style != ResetEpoch || r.At.Unix() != 42 {
		t.Errorf("configured epoch: %+v", r)
	}
	if _, err := ParseLegacyReset("soon", ResetAuto, now); err == nil {
		t.Error("accepted soon")
	}
	if _, err := ParseLegacyReset("99999999999999999999", ResetEpoch, now); err == nil {
		t.Error("accepted out-of-range epoch")
	}
	if n, err := ParseLegacyInt(" 5 "); err != nil || n != 5 {
		t.Errorf("ParseLegacyInt: %d, %v", n, err)
	}
	for _, bad := range []string{"", "-1", "1.5", "9999999999999999999"} {
		if _, err := ParseLegacyInt(bad); err == nil {
			t.Errorf("ParseLegacyInt(%q) accepted", bad)
		}
	}
	if _, _, err := ParseLegacyLimit("100, 100;window=0"); err == nil {
		t.Error("window=0 accepted")
	}
	if l, ps, err := ParseLegacyLimit("100, 100;window=60"); err != nil || l != 100 || len(ps) != 1 || ps[0].Window != 60 {
		t.Errorf("window spelling: %d %+v %v", l, ps, err)
	}
	if _, err := ParsePolicyDraft06("100"); err == nil {
		t.Error("draft-06 policy without w accepted")
	}
	if _, err := ParsePolicyDraft06("10;w=1, 10;w=60"); err == nil {
		t.Error("draft-06 policies sharing a quota accepted")
	}
	if _, err := ParseDraft07("remaining=5, reset=3"); err == nil {
		t.Error("draft-07 without limit accepted")
	}
	if d, err := ParseDraft07("limit=5;x, reset=3, extra=?1"); err != nil || d.HasRemaining || d.Limit != 5 || d.Reset != 3 {
		t.Errorf("draft-07: %+v, %v", d, err)
	}
}

func TestDetect(t *testing.T) {
	now := time.Date(2026, 3, 13, 9, 29, 0, 0, time.UTC)
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
	o := Detect(hdr("RateLimit-Policy", `"minute";q=60;w=60`, "RateLimit", `"minute";r=0;t=41`, "Retry-After", "41",
		"X-RateLimit-Limit", "60", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1773394200"), now, DetectOptions{})
	if o.Dialect != DialectDraft11 || len(o.Policies) != 1 || len(o.Limits) != 1 || o.Limits[0].Window != 41 ||
		!o.HasRetryAfter || o.RetryAfter.Seconds != 41 || !o.HasReset || o.Reset.Style != ResetEpoch || o.Limit != 60 || len(o.Ignored) != 0 {
		t.Errorf("draft-11: %+v", o)
	}

	o = Detect(hdr("RateLimit-Policy", "100;w=60", "RateLimit", "limit=100, remaining=50, reset=5"), now, DetectOptions{})
	if o.Dialect != DialectDraft07 || o.Limit != 100 || o.Remaining != 50 || o.Reset.Seconds != 5 || len(o.IntPolicies) != 1 {
		t.Errorf("draft-07: %+v", o)
	}

	o = Detect(hdr("RateLimit-Policy", "100;w=60", "RateLimit-Limit", "100", "RateLimit-Remaining", "37", "RateLimit-Reset", "22"), now, DetectOptions{})
	if o.Dialect != DialectDraft06 || o.Limit != 100 || o.Remaining != 37 || o.Reset != (Reset{Style: ResetDelta, Seconds: 22}) {
		t.Errorf("draft-06: %+v", o)
	}

	o = Detect(hdr("X-RateLimit-Limit", "100, 100;w=60, 5000;w=86400", "X-RateLimit-Remaining", "3", "X-RateLimit-Reset", "42"), now, DetectOptions{})
	if o.Dialect != DialectLegacy || o.Limit != 100 || o.Remaining != 3 || o.Reset.Style != ResetDelta || len(o.IntPolicies) != 2 {
		t.Errorf("legacy: %+v", o)
	}
	o = Detect(hdr("X-RateLimit-Reset", "42"), now, DetectOptions{LegacyReset: ResetEpoch})
	if o.Reset.Style != ResetEpoch {
		t.Errorf("configured reset style ignored: %+v", o)
	}

	// Malformed fields are ignored as a whole and reported.
	o = Detect(hdr("RateLimit", `"a";r=-1`, "RateLimit-Policy", `default;q=1`, "Retry-After", "soon"), now, DetectOptions{})
	if o.Dialect != DialectNone || len(o.Ignored) != 3 || o.Limits != nil || o.HasRetryAfter {
		t.Errorf("malformed: %+v", o)
	}
	var fe *FieldError
	if !errors.As(o.Ignored[0], &fe) || fe.Field != FieldRateLimit || !errors.Is(o.Ignored[0], ErrInvalid) {
		t.Errorf("ignored[0] = %v", o.Ignored[0])
	}
	// Lenient detection accepts a token name.
	o = Detect(hdr("RateLimit", `default;r=5;t=10`), now, DetectOptions{Lenient: true})
	if o.Dialect != DialectDraft11 || len(o.Limits) != 1 || !o.Limits[0].Lenient {
		t.Errorf("lenient: %+v", o)
	}
	if o := Detect(http.Header{}, now, DetectOptions{}); o.Dialect != DialectNone || o.Dialect.String() != "none" {
		t.Errorf("empty: %+v", o)
	}
}

func TestProblemJSON(t *testing.T) {
	b, err := json.Marshal(QuotaExceeded("60 requests per minute used; retry in 41 s.", 41, "minute"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"detail":"60 requests per minute used; retry in 41 s.","violated-policies":["minute"],"retry_after":41}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	var p Problem
	if err := json.Unmarshal([]byte(`{"type":"`+ProblemTemporaryReducedCapacity+`","status":503,"violated-policies":["minute"]}`), &p); err != nil ||
		p.Status != 503 || p.ViolatedPolicies[0] != "minute" || !strings.HasSuffix(p.Type, "#temporary-reduced-capacity") {
		t.Errorf("decode: %+v, %v", p, err)
	}
}

func BenchmarkFormatPolicy(b *testing.B) {
	ps := []Policy{{Name: "minute", Quota: 60, Window: 60}, {Name: "day", Quota: 2000, Window: 86400, PartitionKey: []byte("user:42")}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FormatPolicy(ps); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFormatLimit(b *testing.B) {
	ls := []Limit{{Name: "minute", Remaining: 12, Window: 37, HasWindow: true}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FormatLimit(ls); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendLimit(b *testing.B) {
	ls := []Limit{{Name: "minute", Remaining: 12, Window: 37, HasWindow: true}}
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendLimit(buf[:0], ls); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMarshalHTTPSFV is the httpsfv-based serialisation of the same
// value as BenchmarkFormatPolicy, for comparison.
func BenchmarkMarshalHTTPSFV(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		l := httpsfv.List{}
		for _, p := range []Policy{{Name: "minute", Quota: 60, Window: 60}, {Name: "day", Quota: 2000, Window: 86400, PartitionKey: []byte("user:42")}} {
			it := httpsfv.NewItem(p.Name)
			it.Params.Add("q", p.Quota)
			it.Params.Add("w", p.Window)
			if p.PartitionKey != nil {
				it.Params.Add("pk", p.PartitionKey)
			}
			l = append(l, it)
		}
		if _, err := httpsfv.Marshal(l); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseLimit(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseLimit(`"minute";r=12;t=37, "day";r=900;t=40000`); err != nil {
			b.Fatal(err)
		}
	}
}
