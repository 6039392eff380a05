package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate/floodgate/header"
)

// Item is what one response said about one quota policy: a RateLimit
// item joined with the RateLimit-Policy item of the same name (and pk),
// or the single policy an older dialect describes.
type Item struct {
	// Policy is the policy name; "" for the unnamed draft-06/07 and legacy
	// forms.
	Policy string
	// Unit is the effective quota unit ("requests" when qu is absent or is
	// the singular "request"); KnownUnit is false for units draft-11 §3.1.2
	// does not define, on which the client does not pace (vector pol-13).
	Unit      string
	KnownUnit bool
	// PartitionKey is pk; nil when absent.
	PartitionKey []byte
	// Quota (q, in Unit) and Window (w, whole seconds, 0 when absent) come
	// from the policy; HasPolicy says whether a policy was seen.
	Quota, Window int64
	HasPolicy     bool
	// Remaining (r, in Unit) and EffectiveWindow (t, whole seconds) come
	// from RateLimit, or from Remaining/Reset of an older dialect.
	Remaining       int64
	HasRemaining    bool
	EffectiveWindow int64
	HasWindow       bool
	// Outlier is non-empty when the client ignores this item for pacing,
	// with the reason (C3): t beyond the maximum window, t = 0 with r > 0,
	// r above the maximum, or r above the policy's q.
	Outlier string
}

// Pace is the request rate, in units per second, that this item permits
// on its own: r/t clamped by q/w (draft-11 §8: never follow r/t alone),
// or q/w without a RateLimit item. ok is false when the item gives no
// pace (outlier, unknown unit, no window). Local caps apply on top.
func (it Item) Pace(maxWindow time.Duration) (perSecond float64, ok bool) {
	if it.Outlier != "" || !it.KnownUnit {
		return 0, false
	}
	pace, ok := 0.0, false
	if it.HasRemaining && it.HasWindow && it.EffectiveWindow > 0 {
		pace, ok = float64(it.Remaining)/float64(it.EffectiveWindow), true
	}
	// Policies longer than the maximum window (a daily quota) do not pace
	// alone: spreading them evenly would stall short bursts for no gain;
	// their r and t still do.
	if it.HasPolicy && it.Window > 0 && (ok || it.Window <= int64(maxWindow/time.Second)) {
		qw := float64(it.Quota) / float64(it.Window)
		if !ok || qw < pace {
			pace, ok = qw, true
		}
	}
	return pace, ok
}

// Signal is everything the client took from one response (C1, C8).
type Signal struct {
	// Status is the HTTP status code.
	Status int
	// Dialect is the most modern header family found (digest §2.5).
	Dialect header.Dialect
	// Items lists the policies and limits, RateLimit items first in field
	// order, then policies that had no RateLimit item.
	Items []Item
	// RetryAfter is the parsed Retry-After; RetryDelay its delay from the
	// response time, unclamped (0 for a date in the past). Retry-After
	// takes precedence over t (draft-11 §7, C5).
	RetryAfter    header.RetryAfter
	RetryDelay    time.Duration
	HasRetryAfter bool
	// Problem is the RFC 9457 body of an application/problem+json
	// response; nil otherwise.
	Problem *header.Problem
	// Cached reports a response served from a cache (Age > 0 or
	// X-From-Cache); its rate-limit values are ignored (draft-11 §7).
	Cached bool
	// Ignored lists malformed fields that were ignored as a whole.
	Ignored []error
}

// ProblemType returns the problem type URI, or "".
func (s *Signal) ProblemType() string {
	if s.Problem == nil {
		return ""
	}
	return s.Problem.Type
}

// ExtractOptions tunes Extract; the zero value uses the package defaults.
type ExtractOptions struct {
	MaxWindow    time.Duration     // default DefaultMaxWindow
	MaxRemaining int64             // default DefaultMaxRemaining
	LegacyReset  header.ResetStyle // default: the digest §2.1 heuristic
	Lenient      bool              // accept tolerable malformed forms
}

// Extract reads the rate-limit fields of a response header with
// header.Detect (draft-11 and the draft-06/07/08 dialects by digest §2.5,
// legacy X-RateLimit-* with epoch or delta reset, Retry-After in both
// forms), joins RateLimit with RateLimit-Policy items and marks outliers.
// now is the time the response arrived: legacy epochs and Retry-After
// dates are converted to seconds from it. Malformed fields are ignored as
// a whole (draft-11 §7) and listed in Signal.Ignored. The body is not
// read; see ReadProblem.
func Extract(h http.Header, status int, now time.Time, o ExtractOptions) Signal {
	if o.MaxWindow <= 0 {
		o.MaxWindow = DefaultMaxWindow
	}
	if o.MaxRemaining <= 0 {
		o.MaxRemaining = DefaultMaxRemaining
	}
	obs := header.Detect(h, now, header.DetectOptions{Lenient: o.Lenient, LegacyReset: o.LegacyReset})
	s := Signal{Status: status, Dialect: obs.Dialect, Ignored: obs.Ignored, Cached: cached(h)}
	if obs.HasRetryAfter {
		s.RetryAfter, s.HasRetryAfter = obs.RetryAfter, true
		s.RetryDelay = obs.RetryAfter.Delay(serverNow(h, now))
	}

	if len(obs.Limits) > 0 || len(obs.Policies) > 0 {
		// draft-08…11. Policies are joined to limits by name, preferring
		// one with the same pk; each policy is used once, so duplicated
		// names (vectors pol-12, lim-11) pair up in order.
		used := make([]bool, len(obs.Policies))
		for _, l := range obs.Limits {
			it := Item{Policy: l.Name, Unit: header.UnitRequests, KnownUnit: true, PartitionKey: l.PartitionKey,
				Remaining: l.Remaining, HasRemaining: true, EffectiveWindow: l.Window, HasWindow: l.HasWindow}
			if j := matchPolicy(obs.Policies, used, l); j >= 0 {
				used[j] = true
				setPolicy(&it, obs.Policies[j])
			}
			s.Items = append(s.Items, it)
		}
		for j, p := range obs.Policies {
			if !used[j] {
				it := Item{Policy: p.Name, PartitionKey: p.PartitionKey}
				setPolicy(&it, p)
				s.Items = append(s.Items, it)
			}
		}
	} else if obs.HasLimit || obs.HasRemaining || obs.HasReset || len(obs.IntPolicies) > 0 {
		// draft-07 Dictionary, draft-06 fields or legacy X-RateLimit-*:
		// one unnamed policy, plus the integer policies that did not match.
		it := Item{Unit: header.UnitRequests, KnownUnit: true}
		if obs.HasLimit {
			it.Quota, it.HasPolicy = obs.Limit, true
		}
		if obs.HasRemaining {
			it.Remaining, it.HasRemaining = obs.Remaining, true
		}
		if obs.HasReset {
			it.EffectiveWindow, it.HasWindow = resetSeconds(obs.Reset, now), true
		}
		rest := obs.IntPolicies
		for j, p := range rest {
			if !obs.HasLimit || p.Limit == obs.Limit {
				it.Quota, it.Window, it.HasPolicy = p.Limit, p.Window, true
				rest = slices.Delete(slices.Clone(rest), j, j+1)
				break
			}
		}
		if it.HasPolicy || it.HasRemaining || it.HasWindow {
			s.Items = append(s.Items, it)
		}
		for _, p := range rest {
			s.Items = append(s.Items, Item{Unit: header.UnitRequests, KnownUnit: true, Quota: p.Limit, Window: p.Window, HasPolicy: true})
		}
	}
	for i := range s.Items {
		s.Items[i].Outlier = outlier(s.Items[i], o)
	}
	return s
}

// serverNow is the reference an HTTP-date Retry-After is measured from:
// the response's Date when it has a valid one, since both are the server's
// clock and the client's may be off (RFC 9110 §10.2.3); else now.
func serverNow(h http.Header, now time.Time) time.Time {
	if d, err := http.ParseTime(h.Get("Date")); err == nil {
		return d
	}
	return now
}

func matchPolicy(ps []header.Policy, used []bool, l header.Limit) int {
	first := -1
	for j, p := range ps {
		if used[j] || p.Name != l.Name {
			continue
		}
		if l.PartitionKey == nil || p.PartitionKey == nil || bytes.Equal(p.PartitionKey, l.PartitionKey) {
			return j
		}
		if first < 0 {
			first = j
		}
	}
	return first
}

func setPolicy(it *Item, p header.Policy) {
	it.Unit, it.KnownUnit = p.EffectiveUnit()
	it.Quota, it.Window, it.HasPolicy = p.Quota, p.Window, true
	if it.PartitionKey == nil {
		it.PartitionKey = p.PartitionKey
	}
}

// resetSeconds turns a legacy reset into whole seconds from now, rounded
// up; an epoch in the past gives 0.
func resetSeconds(r header.Reset, now time.Time) int64 {
	if r.Style == header.ResetDelta {
		return r.Seconds
	}
	d := r.Until(now)
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// outlier applies the client's sanity rules (draft-11 §7, C3). Values the
// parser already rejects (negative, fractional, too long) never get here.
func outlier(it Item, o ExtractOptions) string {
	maxT := int64(o.MaxWindow / time.Second)
	switch {
	case it.HasWindow && it.EffectiveWindow > maxT:
		return fmt.Sprintf("t=%d exceeds the maximum window of %ds", it.EffectiveWindow, maxT)
	case it.HasWindow && it.EffectiveWindow == 0 && it.HasRemaining && it.Remaining > 0:
		return fmt.Sprintf("t=0 with r=%d gives no pace", it.Remaining)
	case it.HasRemaining && it.HasPolicy && it.Remaining > it.Quota:
		return fmt.Sprintf("r=%d exceeds the policy's q=%d", it.Remaining, it.Quota)
	case it.HasRemaining && it.Unit != header.UnitContentBytes && it.Remaining > o.MaxRemaining:
		return fmt.Sprintf("r=%d exceeds the maximum of %d", it.Remaining, o.MaxRemaining)
	case it.HasPolicy && it.Window > 0 && it.Unit != header.UnitContentBytes && it.Quota/it.Window > o.MaxRemaining:
		return fmt.Sprintf("q/w=%d/%d exceeds the maximum of %d per second", it.Quota, it.Window, o.MaxRemaining)
	}
	return ""
}

// cached reports a response that came from a cache: a positive Age
// (RFC 9111 §4.2.3 current_age, draft-11 §7) or the X-From-Cache marker
// some Go caching transports add.
func cached(h http.Header) bool {
	if a := strings.TrimSpace(h.Get("Age")); a != "" {
		if n, err := strconv.ParseInt(a, 10, 64); err == nil && n > 0 {
			return true
		}
	}
	return h.Get("X-From-Cache") == "1"
}

// ianaProblemTypes prefixes the problem type URIs of the IANA registry,
// among them the three of draft-11 (header.ProblemQuotaExceeded, ...).
const ianaProblemTypes = "https://iana.org/assignments/http-problem-types#"

// maxProblemBytes bounds how much of a problem+json body is read, and
// problemWait how long reading it may take.
const (
	maxProblemBytes = 64 << 10
	problemWait     = time.Second
)

// ReadProblem parses an RFC 9457 application/problem+json body, if resp
// has one, and puts the bytes it read back in front of resp.Body so the
// caller still sees the whole body. At most 64 KiB are examined, for at
// most a second: a body that stalls is handed back unparsed, so that it
// holds up only its own reader. Members of the wrong JSON type are ignored
// one by one (RFC 9457 §3), so a bad "status" does not hide the type. It
// returns nil for other media types or bodies that are not a JSON object.
func ReadProblem(resp *http.Response) *header.Problem {
	if resp == nil || resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != header.ProblemContentType {
		return nil
	}
	body := resp.Body
	read := make(chan []byte, 1)
	go func() {
		buf, _ := io.ReadAll(io.LimitReader(body, maxProblemBytes+1))
		read <- buf
	}()
	timer := time.NewTimer(problemWait)
	defer timer.Stop()
	select {
	case buf := <-read:
		resp.Body = &prefixBody{r: io.MultiReader(bytes.NewReader(buf), body), c: body}
		if len(buf) > maxProblemBytes {
			return nil
		}
		return parseProblem(buf)
	case <-timer.C:
		resp.Body = &prefixBody{r: &lateReader{read: read, rest: body}, c: body}
		return nil
	}
}

// lateReader is a body whose first bytes are still being read by
// ReadProblem: it waits for them (or for Close, which ends that read),
// then serves them and the rest.
type lateReader struct {
	read <-chan []byte
	rest io.Reader
	r    io.Reader
}

func (l *lateReader) Read(p []byte) (int, error) {
	if l.r == nil {
		l.r = io.MultiReader(bytes.NewReader(<-l.read), l.rest)
	}
	return l.r.Read(p)
}

func parseProblem(b []byte) *header.Problem {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil || m == nil {
		return nil
	}
	var p header.Problem
	str := func(k string, dst *string) { _ = json.Unmarshal(m[k], dst) }
	str("type", &p.Type)
	str("title", &p.Title)
	str("detail", &p.Detail)
	str("instance", &p.Instance)
	var st float64
	if json.Unmarshal(m["status"], &st) == nil && st == float64(int(st)) {
		p.Status = int(st)
	}
	var vp []string
	if json.Unmarshal(m["violated-policies"], &vp) == nil {
		p.ViolatedPolicies = vp
	}
	var ra int64
	if json.Unmarshal(m["retry_after"], &ra) == nil && ra > 0 {
		p.RetryAfter = ra
	}
	if p.Type == "" {
		p.Type = "about:blank"
	}
	return &p
}

type prefixBody struct {
	r io.Reader
	c io.Closer
}

func (b *prefixBody) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *prefixBody) Close() error               { return b.c.Close() }
