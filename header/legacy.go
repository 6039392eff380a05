package header

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
)

// Legacy and older-draft field names (canonical MIME form).
const (
	FieldXLimit     = "X-Ratelimit-Limit"     // legacy, H3
	FieldXRemaining = "X-Ratelimit-Remaining" // legacy, H3
	FieldXReset     = "X-Ratelimit-Reset"     // legacy, H3; epoch or delta seconds
	FieldXWarning   = "X-Ratelimit-Warning"   // H6: a policy nearly spent
	FieldLimit06    = "Ratelimit-Limit"       // draft-00…06
	FieldRemaining6 = "Ratelimit-Remaining"   // draft-00…06
	FieldReset06    = "Ratelimit-Reset"       // draft-00…06, delta seconds
)

// ResetStyle is the meaning of a legacy X-RateLimit-Reset value (digest
// §2.1): the header name is shared by two incompatible conventions.
type ResetStyle uint8

const (
	// ResetAuto parses with the digest §2.1 heuristic (letters: a date;
	// above 1e12: epoch milliseconds; above 1e9: epoch seconds; else delta
	// seconds). When formatting it means ResetEpoch, the product default
	// (digest §4).
	ResetAuto ResetStyle = iota
	// ResetEpoch is Unix time in seconds, UTC (GitHub, express-rate-limit).
	ResetEpoch
	// ResetDelta is seconds until the reset.
	ResetDelta
	// ResetDate is reported by the parser for HTTP-date or RFC 3339 values.
	ResetDate
)

func (s ResetStyle) String() string {
	switch s {
	case ResetEpoch:
		return "epoch-seconds"
	case ResetDelta:
		return "delta-seconds"
	case ResetDate:
		return "date"
	}
	return "auto"
}

// FormatLegacyReset formats reset for X-RateLimit-Reset. ResetEpoch (and
// ResetAuto) give Unix seconds rounded up, as express-rate-limit does;
// ResetDelta gives whole seconds from now rounded up, never negative.
func FormatLegacyReset(reset, now time.Time, style ResetStyle) string {
	var buf [20]byte
	return string(AppendLegacyReset(buf[:0], reset, now, style))
}

// AppendLegacyReset is FormatLegacyReset appending to dst.
func AppendLegacyReset(dst []byte, reset, now time.Time, style ResetStyle) []byte {
	if style == ResetDelta {
		d := reset.Sub(now)
		if d <= 0 {
			return append(dst, '0')
		}
		return strconv.AppendInt(dst, CeilSeconds(d), 10)
	}
	s := reset.Unix()
	if reset.Nanosecond() > 0 {
		s++
	}
	return strconv.AppendInt(dst, s, 10)
}

// SetLegacy sets X-RateLimit-Limit, -Remaining and -Reset on h (H3).
// Negative limit or remaining values are written as 0.
func SetLegacy(h http.Header, limit, remaining int64, reset, now time.Time, style ResetStyle) {
	h[FieldXLimit] = []string{strconv.FormatInt(max(limit, 0), 10)}
	h[FieldXRemaining] = []string{strconv.FormatInt(max(remaining, 0), 10)}
	h[FieldXReset] = []string{FormatLegacyReset(reset, now, style)}
}

// Reset is a parsed legacy reset value.
type Reset struct {
	// Style is ResetEpoch, ResetDelta or ResetDate (never ResetAuto).
	Style ResetStyle
	// Seconds is the delta for ResetDelta (saturated, never negative).
	Seconds int64
	// At is the reset instant (UTC) for ResetEpoch and ResetDate.
	At time.Time
}

// Until returns the time from now to the reset, never negative.
func (r Reset) Until(now time.Time) time.Duration {
	if r.Style == ResetDelta {
		return RetryAfter{Seconds: r.Seconds}.Delay(now)
	}
	if d := r.At.Sub(now); d > 0 {
		return d
	}
	return 0
}

// ParseLegacyReset parses an X-RateLimit-Reset value. style says what the
// upstream is known to send; ResetAuto applies the §2.1 heuristic, which is
// only a fallback (configure per upstream where possible). Errors wrap
// ErrInvalid.
func ParseLegacyReset(value string, style ResetStyle, now time.Time) (Reset, error) {
	v := strings.Trim(value, " \t")
	if isDigits(v) {
		n, _ := parseDigitsSaturating(v)
		switch {
		case style == ResetDelta || style == ResetAuto && n <= 1_000_000_000:
			return Reset{Style: ResetDelta, Seconds: n}, nil
		case style == ResetAuto && n > 1_000_000_000_000:
			return Reset{Style: ResetEpoch, At: time.UnixMilli(n).UTC()}, nil
		case n > math.MaxInt64/2:
			return Reset{}, invalidf("X-RateLimit-Reset %q: epoch out of range", value)
		default:
			return Reset{Style: ResetEpoch, At: time.Unix(n, 0).UTC()}, nil
		}
	}
	if style == ResetAuto {
		if t, _, err := parseHTTPDate(v, now, true); err == nil {
			return Reset{Style: ResetDate, At: t}, nil
		}
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			return Reset{Style: ResetDate, At: t.UTC()}, nil
		}
	}
	return Reset{}, invalidf("X-RateLimit-Reset %q: not a %s value", value, style)
}

// ParseLegacyInt parses X-RateLimit-Limit / -Remaining as a plain
// non-negative decimal integer (surrounding spaces trimmed). Errors wrap
// ErrInvalid.
func ParseLegacyInt(value string) (int64, error) {
	v := strings.Trim(value, " \t")
	if !isDigits(v) || len(v) > 18 {
		return 0, invalidf("%q: not a non-negative integer", value)
	}
	n, _ := strconv.ParseInt(v, 10, 64)
	return n, nil
}

// IntPolicy is a quota policy of draft-00…07: an Integer quota with a
// window parameter, e.g. "100;w=60" (digest §2.2, §2.3).
type IntPolicy struct {
	Limit  int64 // the quota
	Window int64 // w (or "window", seen in the wild) in seconds
}

// ParsePolicyDraft06 parses a draft-06/-07 RateLimit-Policy (vector
// leg-03): an SF List of non-negative Integer items, each with a required
// Integer w ≥ 1; other parameters are ignored. Two policies with one
// quota are an error: the limit fields name a policy only by its quota
// (digest §2.2, "10;w=1, 10;w=60").
func ParsePolicyDraft06(lines ...string) ([]IntPolicy, error) {
	list, err := parseList(lines)
	if err != nil {
		return nil, err
	}
	out := make([]IntPolicy, 0, len(list))
	for i, m := range list {
		p, hasW, err := intPolicy(m, i)
		if err != nil {
			return nil, err
		}
		if !hasW {
			return nil, invalidf("member %d: missing required w", i)
		}
		for _, q := range out {
			if q.Limit == p.Limit {
				return nil, invalidf("member %d: quota %d given twice", i, p.Limit)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// ParseLegacyLimit parses an X-RateLimit-Limit or draft-00…06
// RateLimit-Limit value: a plain number, or a List whose first member is
// the limit closest to being reached followed by policy items such as
// "100;w=60" (vector leg-06). Members carrying w or window are returned as
// policies.
func ParseLegacyLimit(lines ...string) (limit int64, policies []IntPolicy, err error) {
	if len(lines) == 1 {
		if n, err := ParseLegacyInt(lines[0]); err == nil {
			return n, nil, nil
		}
	}
	list, err := parseList(lines)
	if err != nil {
		return 0, nil, err
	}
	for i, m := range list {
		p, hasW, err := intPolicy(m, i)
		if err != nil {
			return 0, nil, err
		}
		if i == 0 {
			limit = p.Limit
		}
		if hasW {
			policies = append(policies, p)
		}
	}
	return limit, policies, nil
}

func intPolicy(m httpsfv.Member, i int) (IntPolicy, bool, error) {
	item, ok := m.(httpsfv.Item)
	if !ok {
		return IntPolicy{}, false, invalidf("member %d: expected Integer, got Inner List", i)
	}
	n, ok := item.Value.(int64)
	if !ok || n < 0 {
		return IntPolicy{}, false, invalidf("member %d: expected non-negative Integer, got %s", i, typeName(item.Value))
	}
	p := IntPolicy{Limit: n}
	hasW := false
	for _, k := range []string{"window", "w"} { // w wins when both are sent
		if v, ok := item.Params.Get(k); ok {
			w, ok := v.(int64)
			if !ok || w < 1 {
				return IntPolicy{}, false, invalidf("member %d: %s must be a positive Integer", i, k)
			}
			p.Window, hasW = w, true
		}
	}
	return p, hasW, nil
}

// ParseDraft06Int parses one draft-06 field (RateLimit-Limit,
// RateLimit-Remaining or RateLimit-Reset; vector leg-05): an SF Item whose
// value is a non-negative Integer; parameters are ignored.
func ParseDraft06Int(lines ...string) (int64, error) {
	lines, err := prepareLines(lines)
	if err != nil {
		return 0, err
	}
	item, err := httpsfv.UnmarshalItem(lines)
	if err != nil {
		return 0, syntaxErr(err)
	}
	return nonNegInt(item.Value, "value", "item")
}

// Draft07 is the draft-07 RateLimit Dictionary (digest §2.3, vector leg-04).
type Draft07 struct {
	Limit        int64 // limit (required)
	Remaining    int64 // remaining, valid when HasRemaining
	HasRemaining bool
	Reset        int64 // reset, delta seconds (required)
}

// ParseDraft07 parses "limit=100, remaining=37, reset=22". limit and reset
// are required, all values are non-negative Integers, parameters and
// unknown keys are ignored.
func ParseDraft07(lines ...string) (Draft07, error) {
	lines, err := prepareLines(lines)
	if err != nil {
		return Draft07{}, err
	}
	d, err := httpsfv.UnmarshalDictionary(lines)
	if err != nil {
		return Draft07{}, syntaxErr(err)
	}
	get := func(k string) (int64, bool, error) {
		m, ok := d.Get(k)
		if !ok {
			return 0, false, nil
		}
		item, ok := m.(httpsfv.Item)
		if !ok {
			return 0, false, invalidf("%s must be an Integer", k)
		}
		n, err := nonNegInt(item.Value, k, "RateLimit")
		return n, err == nil, err
	}
	var out Draft07
	var ok bool
	if out.Limit, ok, err = get("limit"); err != nil || !ok {
		return Draft07{}, orMissing(err, "limit")
	}
	if out.Reset, ok, err = get("reset"); err != nil || !ok {
		return Draft07{}, orMissing(err, "reset")
	}
	if out.Remaining, out.HasRemaining, err = get("remaining"); err != nil {
		return Draft07{}, err
	}
	return out, nil
}

func orMissing(err error, k string) error {
	if err != nil {
		return err
	}
	return invalidf("missing required %s", k)
}

// Dialect is the rate-limit header family a response used (digest §2.5).
type Dialect uint8

const (
	DialectNone    Dialect = iota // no rate-limit fields found
	DialectDraft11                // draft-08…11: named List items (RateLimit, RateLimit-Policy)
	DialectDraft07                // draft-07: RateLimit Dictionary
	DialectDraft06                // draft-00…06: RateLimit-Limit/-Remaining/-Reset
	DialectLegacy                 // X-RateLimit-*
)

func (d Dialect) String() string {
	return [...]string{"none", "draft-11", "draft-07", "draft-06", "legacy"}[min(int(d), 4)]
}

// DetectOptions tunes Detect.
type DetectOptions struct {
	// Lenient uses the lenient draft-11 and Retry-After parsers.
	Lenient bool
	// LegacyReset is what the upstream's X-RateLimit-Reset means; the zero
	// value applies the §2.1 heuristic.
	LegacyReset ResetStyle
}

// Observation is everything Detect found in a response's header. Fields
// of dialects that were absent keep their zero values.
type Observation struct {
	// Dialect is the most modern family found (draft-11 > draft-07 >
	// draft-06 > legacy).
	Dialect Dialect
	// Policies and Limits come from draft-08…11 fields.
	Policies []Policy
	Limits   []Limit
	// IntPolicies come from a draft-06/07 RateLimit-Policy or from policies
	// inlined in (X-)RateLimit-Limit.
	IntPolicies []IntPolicy
	// Limit, Remaining and Reset come from draft-07, draft-06 or legacy
	// fields, in that order of preference.
	Limit, Remaining       int64
	HasLimit, HasRemaining bool
	Reset                  Reset
	HasReset               bool
	// RetryAfter always takes precedence for "when may I retry" (digest
	// §1.5, §2.5 step 5; C5).
	RetryAfter    RetryAfter
	HasRetryAfter bool
	// Ignored lists fields that were present but malformed; they MUST be
	// ignored as a whole (digest §1.5).
	Ignored []error
}

// Detect reads every rate-limit field of a response header following the
// digest §2.5 algorithm and reports what it found. now places dates and
// rfc850 years.
func Detect(h http.Header, now time.Time, opts DetectOptions) Observation {
	var o Observation
	ignore := func(field string, err error) {
		o.Ignored = append(o.Ignored, &FieldError{Field: field, Err: err})
	}
	setDialect := func(d Dialect) {
		if o.Dialect == DialectNone || d < o.Dialect {
			o.Dialect = d
		}
	}

	if v := h.Values(FieldRateLimit); len(v) > 0 {
		first := strings.TrimLeft(strings.Join(v, ","), " \t")
		dict := looksLikeDict(first)
		switch {
		case strings.HasPrefix(first, `"`) || opts.Lenient && !dict:
			var err error
			if opts.Lenient {
				o.Limits, err = ParseLimitLenient(v...)
			} else {
				o.Limits, err = ParseLimit(v...)
			}
			if err != nil {
				ignore(FieldRateLimit, err)
			} else {
				setDialect(DialectDraft11)
			}
		case dict:
			if d, err := ParseDraft07(v...); err != nil {
				ignore(FieldRateLimit, err)
			} else {
				setDialect(DialectDraft07)
				o.Limit, o.HasLimit = d.Limit, true
				o.Remaining, o.HasRemaining = d.Remaining, d.HasRemaining
				o.Reset, o.HasReset = Reset{Style: ResetDelta, Seconds: d.Reset}, true
			}
		default:
			ignore(FieldRateLimit, invalidf("unrecognised RateLimit dialect"))
		}
	}

	if v := h.Values(FieldPolicy); len(v) > 0 {
		first := strings.TrimLeft(strings.Join(v, ","), " \t")
		if first != "" && first[0] >= '0' && first[0] <= '9' {
			if ps, err := ParsePolicyDraft06(v...); err != nil {
				ignore(FieldPolicy, err)
			} else {
				o.IntPolicies = append(o.IntPolicies, ps...)
			}
		} else {
			var err error
			if opts.Lenient {
				o.Policies, err = ParsePolicyLenient(v...)
			} else {
				o.Policies, err = ParsePolicy(v...)
			}
			if err != nil {
				ignore(FieldPolicy, err)
			} else {
				setDialect(DialectDraft11)
			}
		}
	}

	legacyTrio := func(d Dialect, limitF, remF, resetF string, resetStyle ResetStyle) {
		if v := h.Values(limitF); len(v) > 0 {
			if n, ps, err := ParseLegacyLimit(v...); err != nil {
				ignore(limitF, err)
			} else {
				setDialect(d)
				if !o.HasLimit {
					o.Limit, o.HasLimit = n, true
				}
				o.IntPolicies = append(o.IntPolicies, ps...)
			}
		}
		if v := h.Values(remF); len(v) > 0 && !o.HasRemaining {
			if n, err := legacyInt(d, v); err != nil {
				ignore(remF, err)
			} else {
				setDialect(d)
				o.Remaining, o.HasRemaining = n, true
			}
		}
		if v := h.Values(resetF); len(v) > 0 && !o.HasReset {
			if r, err := legacyReset(d, v, resetStyle, now); err != nil {
				ignore(resetF, err)
			} else {
				setDialect(d)
				o.Reset, o.HasReset = r, true
			}
		}
	}
	legacyTrio(DialectDraft06, FieldLimit06, FieldRemaining6, FieldReset06, ResetDelta)
	legacyTrio(DialectLegacy, FieldXLimit, FieldXRemaining, FieldXReset, opts.LegacyReset)

	if v := h.Values(FieldRetryAfter); len(v) > 0 {
		if len(v) > 1 {
			ignore(FieldRetryAfter, invalidf("Retry-After is a single value, got %d field lines", len(v)))
		} else if ra, err := ParseRetryAfterDetail(v[0], now, opts.Lenient); err != nil {
			ignore(FieldRetryAfter, err)
		} else {
			o.RetryAfter, o.HasRetryAfter = ra, true
		}
	}
	return o
}

// legacyInt reads a draft-06 Item (parameters ignored) or a plain legacy
// number.
func legacyInt(d Dialect, v []string) (int64, error) {
	if d == DialectDraft06 {
		return ParseDraft06Int(v...)
	}
	if len(v) > 1 {
		return 0, invalidf("expected one value, got %d field lines", len(v))
	}
	return ParseLegacyInt(v[0])
}

func legacyReset(d Dialect, v []string, style ResetStyle, now time.Time) (Reset, error) {
	if d == DialectDraft06 {
		n, err := ParseDraft06Int(v...)
		return Reset{Style: ResetDelta, Seconds: n}, err
	}
	if len(v) > 1 {
		return Reset{}, invalidf("expected one value, got %d field lines", len(v))
	}
	return ParseLegacyReset(v[0], style, now)
}

// looksLikeDict reports a lowercase SF key followed by '=' (draft-07).
func looksLikeDict(s string) bool {
	i := 0
	for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] == '*' || i > 0 && (s[i] >= '0' && s[i] <= '9' || strings.IndexByte("_-.", s[i]) >= 0)) {
		i++
	}
	return i > 0 && i < len(s) && s[i] == '='
}

// FieldError names the field an ignored error came from.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }
