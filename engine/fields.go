package engine

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/header"
)

// HeaderStyle selects the rate-limit fields a door sends.
type HeaderStyle uint8

const (
	// Both sends draft-11 RateLimit/RateLimit-Policy and X-RateLimit-*.
	Both HeaderStyle = iota
	// Draft11 sends RateLimit and RateLimit-Policy only.
	Draft11
	// Legacy sends X-RateLimit-Limit/Remaining/Reset only.
	Legacy
	// None sends no rate-limit fields (Retry-After still goes on a refusal).
	None
)

var styleNames = [...]string{Both: "both", Draft11: "draft11", Legacy: "legacy", None: "none"}

// String returns "both", "draft11", "legacy" or "none".
func (s HeaderStyle) String() string {
	if int(s) < len(styleNames) {
		return styleNames[s]
	}
	return fmt.Sprintf("style(%d)", uint8(s))
}

// ParseHeaderStyle is the inverse of HeaderStyle.String; "" means Both.
func ParseHeaderStyle(s string) (HeaderStyle, error) {
	if s == "" {
		return Both, nil
	}
	for st, name := range styleNames {
		if name == s {
			return HeaderStyle(st), nil
		}
	}
	return 0, fmt.Errorf("engine: unknown header style %q (want both, draft11, legacy or none)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (s HeaderStyle) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseHeaderStyle.
func (s *HeaderStyle) UnmarshalText(b []byte) error {
	v, err := ParseHeaderStyle(string(b))
	*s = v
	return err
}

// Fields writes an Outcome's rate-limit fields (REQUIREMENTS H3, H4, H6)
// into a field map — an http.Header, or gRPC metadata, which has the same
// shape (gRPC doors lower-case the names). Every door uses it, so all
// speak alike.
type Fields struct {
	Style  HeaderStyle
	Reset  header.ResetStyle // X-RateLimit-Reset: epoch (default) or delta seconds
	WarnAt float64           // X-RateLimit-Warning from this share used; ≤ 0: never
	Now    func() time.Time  // for the reset epoch; nil: time.Now
}

// FieldDegraded marks a response the failure mode answered while the
// store failed (Outcome.Degraded): "store-unavailable". Such a response
// carries no RateLimit, X-RateLimit-Remaining or X-RateLimit-Reset, whose
// values only the store knows; RateLimit-Policy still says the limits.
const FieldDegraded = "Floodgate-Degraded"

// Set writes o's fields on h: RateLimit with every item, RateLimit-Policy
// (o.Field), and X-RateLimit-* for the summary item. A degraded outcome
// gets FieldDegraded and only what is known (SetKnown); an outcome without
// items (blocked, store unavailable) only RateLimit-Policy; a shadow one
// nothing. Set runs on every response, so the values are built in one
// buffer and cut from one string.
func (f *Fields) Set(h map[string][]string, o *Outcome) {
	if f.Style == None || o.Shadow {
		return
	}
	if o.Degraded || o.Summary < 0 {
		f.SetKnown(h, o)
		return
	}
	var buf [192]byte
	b := buf[:0]
	var ends [4]int // where each value ends in b
	n := 0
	if f.Style != Legacy {
		var ok bool
		if b, ok = appendRateLimit(b, o); !ok {
			return // names were validated when the rule was compiled
		}
		ends[n], n = len(b), n+1
	}
	// The legacy fields and the warning speak of one limit: the summary.
	sum := o.Item(o.Summary)
	it := &sum
	if f.Style != Draft11 {
		now := time.Now()
		if f.Now != nil {
			now = f.Now()
		}
		b = strconv.AppendInt(b, it.capacity(), 10)
		ends[n], n = len(b), n+1
		b = strconv.AppendInt(b, max(it.Remaining, 0), 10)
		ends[n], n = len(b), n+1
		b = header.AppendLegacyReset(b, now.Add(legacyReset(it)), now, f.Reset)
		ends[n], n = len(b), n+1
	}
	all := string(b)
	vals := make([]string, n+1)
	start := 0
	for i := range n {
		vals[i], start = all[start:ends[i]], ends[i]
	}
	i := 0
	if f.Style != Legacy {
		vals[n] = o.Field
		h[header.FieldRateLimit] = vals[0:1:1]
		h[header.FieldPolicy] = vals[n : n+1 : n+1]
		i = 1
	}
	if f.Style != Draft11 {
		h[header.FieldXLimit] = vals[i : i+1 : i+1]
		h[header.FieldXRemaining] = vals[i+1 : i+2 : i+2]
		h[header.FieldXReset] = vals[i+2 : i+3 : i+3]
	}
	f.setWarning(h, o, it)
}

// setWarning sends X-RateLimit-Warning (H6) when an admitted request has
// used WarnAt of the summary limit it, and otherwise removes an outer
// layer's, which would speak of a limit whose other fields were just
// replaced. Used and its whole are X-RateLimit-Limit's capacity and what
// X-RateLimit-Remaining leaves of it, so the three fields agree.
func (f *Fields) setWarning(h map[string][]string, o *Outcome, it *Item) {
	if f.WarnAt > 0 && o.Verdict == Allowed {
		c := it.capacity()
		if used := c - it.Remaining; float64(used) >= f.WarnAt*float64(c) {
			h[header.FieldXWarning] = []string{fmt.Sprintf("approaching limit %q: %d of %d used", it.Name, used, c)}
			return
		}
	}
	delete(h, header.FieldXWarning)
}

// capacity is X-RateLimit-Limit for it: the most units it admits at one
// instant (a bucket's burst, above or below the quota), so that
// X-RateLimit-Remaining, which can reach it, never exceeds the limit the
// client is shown (digest §2.1: Limit is what the client may send, and
// Limit − Remaining what it used). The draft-11 fields keep q, the quota
// per window w: q/w is the rate a client paces by, and RateLimit's r
// never exceeds q (Spendable).
func (it *Item) capacity() int64 {
	if it.Capacity > 0 {
		return it.Capacity
	}
	return it.Quota
}

// legacyReset is X-RateLimit-Reset for it, from now: when its remaining
// next grows (for a refusing limit, when the request fits), except for a
// sliding window counter, when its whole quota is free again. The
// counter's next unit comes sooner the more its window spent (a larger
// count decays faster), so that reset would move earlier as a client
// spends; the time it is full again never does.
func legacyReset(it *Item) time.Duration {
	return max(it.ResetAfter, it.RetryAfter, it.FullAfter)
}

// appendRateLimit appends the RateLimit value of o's items: each with its
// spendable r and t (caps, which have no window, with r alone). It
// reports false for a name the field cannot carry.
func appendRateLimit(b []byte, o *Outcome) ([]byte, bool) {
	var lbuf [8]header.Limit
	limits := lbuf[:0]
	for i := range o.Len() {
		it := o.Item(i)
		l := header.Limit{Name: it.Name, Remaining: it.Remaining}
		if it.Window > 0 {
			l.Remaining, l.Window = Spendable(&it)
			l.HasWindow = true
		}
		limits = append(limits, l)
	}
	b, err := header.AppendLimit(b, limits)
	return b, err == nil
}

// SetKnown writes the fields of o that do not depend on the store's
// answer: RateLimit-Policy and, for the summary item, X-RateLimit-Limit;
// FieldDegraded when o is degraded. Stale fields an outer layer set are
// removed.
func (f *Fields) SetKnown(h map[string][]string, o *Outcome) {
	for _, name := range []string{header.FieldRateLimit, header.FieldXRemaining, header.FieldXReset, header.FieldXWarning} {
		delete(h, name)
	}
	if o.Degraded {
		h[FieldDegraded] = []string{"store-unavailable"}
	}
	if f.Style == None || o.Shadow {
		return
	}
	if f.Style != Legacy && o.Field != "" {
		h[header.FieldPolicy] = []string{o.Field}
	}
	if f.Style != Draft11 && o.Summary >= 0 {
		it := o.Item(o.Summary)
		h[header.FieldXLimit] = []string{strconv.FormatInt(it.capacity(), 10)}
	}
}

// EffectiveWindow is t of draft-11 §3.2 for one rate item, in whole
// seconds; Spendable gives it with the r it goes with.
func EffectiveWindow(it *Item) int64 {
	_, t := Spendable(it)
	return t
}

// Spendable is the (r, t) pair RateLimit reports for one rate item: r
// units the client may spend, in any pattern, within the next t whole
// seconds without a refusal (draft-11 §7), chosen so that a client pacing
// itself by t/r reaches the policy's rate q/w and no faster (§8).
//
//   - Refused: r is what is left, t the seconds until the cost fits, so
//     Retry-After (the largest of them) never points before the end of t
//     (§6).
//   - Nothing left: t is the seconds until the next unit frees.
//   - Otherwise t is how long the units left last at q/w, at least the
//     time one unit takes at q/w; for a fixed (or anchored) window at most the seconds
//     to the window's end, where its count restarts, unless that is under
//     ten units' time away. r is then the units left, cut to what q/w
//     allows in t: r/t never exceeds q/w.
//
// Every algorithm's remaining units stay spendable until spent (windows
// and buckets only free more as time passes), so any r up to Remaining is
// safe for any t; the choice of t only sets the pace r/t suggests.
func Spendable(it *Item) (remaining, t int64) {
	if !it.Allowed {
		return it.Remaining, header.Seconds(it.RetryAfter)
	}
	if it.Remaining <= 0 {
		return 0, header.Seconds(it.ResetAfter)
	}
	q, w := uint64(it.Quota), uint64(max(it.Window.Microseconds(), 1))
	const sec = uint64(time.Second / time.Microsecond)
	a := uint64(min(it.Remaining, it.Quota))
	// The seconds a units last at q/w, and the seconds one unit takes.
	unit := int64(((w+q-1)/q + sec - 1) / sec)
	t = max(int64(mulDiv(a, w, q)/sec), unit)
	if end := header.Seconds(it.ResetAfter); restarts(it.Algorithm) && end < t && end >= 10*unit {
		// The window's end, where the count restarts, unless it is so near
		// that whole units at q/w would cut the pace by more than a tenth.
		t = end
	}
	return int64(min(a, mulDiv(q, uint64(t)*sec, w))), t
}

// restarts reports whether a's count restarts at its window's end, which
// ResetAfter then is: the fixed window's, and the anchored window's once
// a key has opened it.
func restarts(a floodgate.Algorithm) bool {
	return a == floodgate.FixedWindow || a == floodgate.AnchoredWindow
}

// mulDiv is ⌊a·b/c⌋ without overflow; c > 0 and the quotient must fit.
func mulDiv(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return math.MaxUint64
	}
	quo, _ := bits.Div64(hi, lo, c)
	return quo
}

// RetryAfterSeconds is Retry-After for a refused outcome, in whole
// seconds: rounded up, at least 1, and not before the end of any refusing
// limit's t (REQUIREMENTS H2, draft-11 §6).
func RetryAfterSeconds(o *Outcome) int64 {
	s := header.Seconds(o.RetryAfter)
	for i := range o.Len() {
		if it := o.Item(i); !it.Allowed {
			s = max(s, header.Seconds(it.RetryAfter))
		}
	}
	return s
}
