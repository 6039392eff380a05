package httplimit

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/bits"
	"net/http"
	"strconv"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/header"
)

// Headers writes the rate-limit fields of a response (REQUIREMENTS H3,
// H4, H6). The middleware uses it on every response; the daemon's decision
// API uses it too, so both speak alike.
type Headers struct {
	Style  HeaderStyle
	Reset  header.ResetStyle // X-RateLimit-Reset: epoch (default) or delta seconds
	WarnAt float64           // X-RateLimit-Warning from this share used; ≤ 0: never
	Now    func() time.Time  // for the reset epoch; nil: time.Now
}

// PolicyField formats the RateLimit-Policy value of policies: name, q, w
// in whole seconds (at least 1; none for concurrent-requests), and qu when
// not "requests" (draft-11 §3.1).
func PolicyField(policies []floodgate.Policy) (string, error) {
	fields := make([]header.Policy, len(policies))
	for i, p := range policies {
		fields[i] = header.Policy{Name: p.Name, Quota: p.Quota, Unit: p.Unit.String()}
		if p.Unit != floodgate.ConcurrentRequests {
			fields[i].Window = header.Seconds(p.Window)
		}
	}
	return header.FormatPolicy(fields)
}

// Set writes the fields for results on h: RateLimit with every result,
// policyValue as RateLimit-Policy (see PolicyField; the slice is shared,
// which is safe as long as its len equals its cap), and X-RateLimit-* for
// the denying policy of denied, or else the one closest to its limit.
// denied is nil for an admitted request. Set runs on every response, so
// the values are built in one buffer and cut from one string.
func (hw *Headers) Set(h http.Header, policyValue []string, results []floodgate.Result, denied *floodgate.Decision) {
	if hw.Style == None || len(results) == 0 {
		return
	}
	var buf [192]byte
	b := buf[:0]
	var ends [4]int // where each value ends in b
	n := 0
	if hw.Style != Legacy {
		var lbuf [8]header.Limit
		limits := lbuf[:0]
		for _, r := range results {
			l := header.Limit{Name: r.Policy.Name, Remaining: r.Remaining}
			if r.Policy.Unit != floodgate.ConcurrentRequests {
				l.Remaining, l.Window = Spendable(r)
				l.HasWindow = true
			}
			limits = append(limits, l)
		}
		var err error
		if b, err = header.AppendLimit(b, limits); err != nil {
			return // names were validated when the rule was built
		}
		ends[n], n = len(b), n+1
	}
	// The legacy fields and the warning speak of one policy: the denying
	// one (the decision's own), or else the one closest to its limit.
	var r floodgate.Result
	if denied != nil {
		r = floodgate.Result{Policy: denied.Policy, Remaining: denied.Remaining, ResetAfter: denied.ResetAfter, RetryAfter: denied.RetryAfter}
	} else {
		r = results[0]
		for i := range results[1:] {
			if c := &results[1+i]; c.Remaining*r.Policy.Quota < r.Remaining*c.Policy.Quota {
				r = *c
			}
		}
	}
	if hw.Style != Draft11 {
		now := time.Now()
		if hw.Now != nil {
			now = hw.Now()
		}
		b = strconv.AppendInt(b, r.Policy.Quota, 10)
		ends[n], n = len(b), n+1
		b = strconv.AppendInt(b, max(r.Remaining, 0), 10)
		ends[n], n = len(b), n+1
		b = header.AppendLegacyReset(b, now.Add(max(r.ResetAfter, r.RetryAfter)), now, hw.Reset)
		ends[n], n = len(b), n+1
	}
	all := string(b)
	vals := make([]string, n)
	start := 0
	for i := range n {
		vals[i], start = all[start:ends[i]], ends[i]
	}
	i := 0
	if hw.Style != Legacy {
		h[header.FieldRateLimit] = vals[0:1:1]
		h[header.FieldPolicy] = policyValue
		i = 1
	}
	if hw.Style != Draft11 {
		h[header.FieldXLimit] = vals[i : i+1 : i+1]
		h[header.FieldXRemaining] = vals[i+1 : i+2 : i+2]
		h[header.FieldXReset] = vals[i+2 : i+3 : i+3]
	}
	if hw.WarnAt > 0 && denied == nil {
		if used := r.Policy.Quota - r.Remaining; float64(used) >= hw.WarnAt*float64(r.Policy.Quota) {
			h[header.FieldXWarning] = []string{fmt.Sprintf("approaching limit %q: %d of %d used", r.Policy.Name, used, r.Policy.Quota)}
			return
		}
	}
	// An outer middleware's warning would speak of a policy whose other
	// fields were just replaced.
	delete(h, header.FieldXWarning)
}

// EffectiveWindow is t of draft-11 §3.2 for one result, in whole seconds;
// Spendable gives it with the r it goes with.
func EffectiveWindow(r floodgate.Result) int64 {
	_, t := Spendable(r)
	return t
}

// Spendable is the (r, t) pair RateLimit reports for one result: r units
// the client may spend, in any pattern, within the next t whole seconds
// without a refusal (draft-11 §7), chosen so that a client pacing itself
// by t/r reaches the policy's rate q/w and no faster (§8).
//
//   - Denied: r is what is left, t the seconds until the cost fits, so
//     Retry-After (the largest of them) never points before the end of t
//     (§6).
//   - Nothing left: t is the seconds until the next unit frees.
//   - Otherwise t is how long the units left last at q/w, at least the
//     time one unit takes at q/w; for a fixed window at most the seconds
//     to the window's end, where its count restarts, unless that is under
//     ten units' time away. r is then the units left, cut to what q/w
//     allows in t: r/t never exceeds q/w.
//
// Every algorithm's remaining units stay spendable until spent (windows
// and buckets only free more as time passes), so any r up to Remaining is
// safe for any t; the choice of t only sets the pace r/t suggests.
func Spendable(r floodgate.Result) (remaining, t int64) {
	if !r.Allowed {
		return r.Remaining, header.Seconds(r.RetryAfter)
	}
	if r.Remaining <= 0 {
		return 0, header.Seconds(r.ResetAfter)
	}
	q, w := uint64(r.Policy.Quota), uint64(max(r.Policy.Window.Microseconds(), 1))
	const sec = uint64(time.Second / time.Microsecond)
	a := uint64(min(r.Remaining, r.Policy.Quota))
	// The seconds a units last at q/w, and the seconds one unit takes.
	unit := int64(((w+q-1)/q + sec - 1) / sec)
	t = max(int64(mulDiv(a, w, q)/sec), unit)
	if end := header.Seconds(r.ResetAfter); r.Policy.Algorithm == floodgate.FixedWindow && end < t && end >= 10*unit {
		// The window's end, where the count restarts, unless it is so near
		// that whole units at q/w would cut the pace by more than a tenth.
		t = end
	}
	return int64(min(a, mulDiv(q, uint64(t)*sec, w))), t
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

// RetryAfterSeconds is Retry-After for a denied decision, in whole
// seconds: rounded up, at least 1, and not before the end of any violated
// policy's t (REQUIREMENTS H2, draft-11 §6).
func RetryAfterSeconds(d *floodgate.Decision) int64 {
	s := header.Seconds(d.RetryAfter)
	for _, r := range d.Results {
		if !r.Allowed {
			s = max(s, EffectiveWindow(r))
		}
	}
	return s
}

func (m *Middleware) reject(w http.ResponseWriter, r *http.Request, ru *rule, key string, d *floodgate.Decision) {
	secs := RetryAfterSeconds(d)
	refusing(w.Header(), secs)
	m.metrics.retryAfter(ru.name, secs)
	m.logDenied(r.Context(), ru, key, d, secs, slog.LevelWarn, "rate limit exceeded")
	if m.onReject != nil {
		m.onReject(w, r, *d)
		return
	}
	p := d.Policy
	detail := fmt.Sprintf("rate limit of %d %s per %s exceeded", p.Quota, p.Unit, formatWindow(p.Window))
	if p.Unit == floodgate.ConcurrentRequests {
		detail = fmt.Sprintf("limit of %d concurrent requests exceeded", p.Quota)
	}
	header.QuotaExceeded(detail, secs, d.Violated()...).Write(w)
}

// block answers a key held by the Blocker: 429 with the
// abnormal-usage-detected problem type (draft-11 §5).
func (m *Middleware) block(w http.ResponseWriter, r *http.Request, ru *rule, key string, ra time.Duration) {
	secs := header.Seconds(ra)
	refusing(w.Header(), secs)
	m.metrics.decision(ru.name, "", "blocked")
	m.logger.LogAttrs(r.Context(), slog.LevelWarn, "blocked for abnormal usage",
		slog.String("rule", ru.name), slog.String("key", Fingerprint(key)), slog.Int64("retry_after", secs))
	header.Problem{
		Type: header.ProblemAbnormalUsageDetected, Title: "Abnormal Usage Detected", Status: 429,
		Detail: "requests from this client were blocked after abnormal usage", RetryAfter: secs,
	}.Write(w)
}

// reducedCapacity answers a request refused only because quotas are
// temporarily lowered: 503 with the temporary-reduced-capacity type; the
// RateLimit-Policy already set shows the lowered quotas (draft-11 §5).
func (m *Middleware) reducedCapacity(w http.ResponseWriter, r *http.Request, ru *rule, key string, d *floodgate.Decision) {
	secs := RetryAfterSeconds(d)
	refusing(w.Header(), secs)
	m.logDenied(r.Context(), ru, key, d, secs, slog.LevelWarn, "refused under reduced capacity")
	header.Problem{
		Type: header.ProblemTemporaryReducedCapacity, Title: "Temporary Reduced Capacity", Status: 503,
		Detail:           fmt.Sprintf("capacity temporarily reduced to %d %s per %s", d.Policy.Quota, d.Policy.Unit, formatWindow(d.Policy.Window)),
		ViolatedPolicies: d.Violated(), RetryAfter: secs,
	}.Write(w)
}

// unavailable answers a fail-closed store error: 503, never 429, since the
// client did nothing wrong (S3).
func (m *Middleware) unavailable(w http.ResponseWriter, r *http.Request, ru *rule, err error) {
	serviceUnavailable(w, "rate limit store unavailable for rule "+strconv.Quote(ru.name))
}

// contextEnded answers a request whose context ended before its limits
// were decided: either its client left and nobody reads this, or a
// deadline of the server's own passed, and the client is owed an answer.
func contextEnded(w http.ResponseWriter, ctx context.Context) {
	serviceUnavailable(w, "the request's context ended before its rate limit was decided: "+ctx.Err().Error())
}

// serviceUnavailable is a 503 that nothing the client did caused: worth
// trying again in a second.
func serviceUnavailable(w http.ResponseWriter, detail string) {
	w.Header()[header.FieldRetryAfter] = []string{"1"}
	header.Problem{Title: "Service Unavailable", Status: 503, Detail: detail}.Write(w)
}

func (m *Middleware) logDenied(ctx context.Context, ru *rule, key string, d *floodgate.Decision, retryAfter int64, level slog.Level, msg string) {
	m.logger.LogAttrs(ctx, level, msg,
		slog.String("rule", ru.name),
		slog.String("policy", d.Policy.Name),
		slog.String("key", Fingerprint(key)),
		slog.Int64("retry_after", retryAfter),
	)
}

// refusing sets what a limit's refusal (429, or 503 under reduced
// capacity) carries: Retry-After in whole seconds, and Cache-Control:
// no-store (RFC 6585 §4: a 429 must not be cached).
func refusing(h http.Header, secs int64) {
	h[header.FieldRetryAfter] = []string{strconv.FormatInt(secs, 10)}
	h["Cache-Control"] = []string{"no-store"}
}

// formatWindow writes a window as people say it: "1m", "30s", "1h", "500ms".
func formatWindow(d time.Duration) string {
	for _, u := range []struct {
		d time.Duration
		s string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if d >= u.d && d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.s
		}
	}
	return d.String()
}
