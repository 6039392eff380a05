package server

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
)

func slicesSort(s []string) { slices.Sort(s) }

// setHeaders writes the rate-limit fields of a decision-API answer, the
// same fields the middleware puts on proxied responses (H3, H4, H6), and
// Retry-After when denied (H2).
func (st *state) setHeaders(h http.Header, ls *limiterSet, d floodgate.Decision, now time.Time) {
	if d.Allowed == false && len(d.Results) > 0 {
		h[header.FieldRetryAfter] = []string{strconv.FormatInt(retryAfterSeconds(d), 10)}
	}
	if st.style == httplimit.None || len(d.Results) == 0 {
		return
	}
	if st.style != httplimit.Legacy {
		limits := make([]header.Limit, len(d.Results))
		for i, r := range d.Results {
			limits[i] = header.Limit{Name: r.Policy.Name, Remaining: r.Remaining, Window: effectiveWindow(r), HasWindow: true}
		}
		if v, err := header.FormatLimit(limits); err == nil {
			h[header.FieldRateLimit] = []string{v}
		}
		h[header.FieldPolicy] = []string{ls.policyField}
	}
	r := reported(d)
	if st.style != httplimit.Draft11 {
		header.SetLegacy(h, r.Policy.Quota, r.Remaining, now.Add(max(r.ResetAfter, r.RetryAfter)), now, st.reset)
	}
	if st.warnAt > 0 && d.Allowed {
		if used := r.Policy.Quota - r.Remaining; float64(used) >= st.warnAt*float64(r.Policy.Quota) {
			h["X-Ratelimit-Warning"] = []string{fmt.Sprintf("approaching limit %q: %d of %d used", r.Policy.Name, used, r.Policy.Quota)}
		}
	}
}

// reported is the Result the scalar fields speak of: the denying policy
// with the longest wait, or else the one closest to its limit.
func reported(d floodgate.Decision) floodgate.Result {
	for _, r := range d.Results {
		if r.Policy.Name == d.Policy.Name {
			return r
		}
	}
	return d.Results[0]
}

// effectiveWindow is t of draft-11 for one result (digest §4): for a
// denied policy the whole seconds until the cost fits, so Retry-After
// never points before the end of t; otherwise the seconds until more quota
// comes, at least 1, raised so r/t never exceeds q/w (draft-11 §8).
func effectiveWindow(r floodgate.Result) int64 {
	if !r.Allowed {
		return max(1, ceilSeconds(r.RetryAfter))
	}
	t := max(1, ceilSeconds(r.ResetAfter))
	if w := max(1, ceilSeconds(r.Policy.Window)); r.Remaining*w > t*r.Policy.Quota {
		t = (r.Remaining*w + r.Policy.Quota - 1) / r.Policy.Quota
	}
	return t
}

// retryAfterSeconds is Retry-After: rounded up, at least 1, and not before
// the end of any denying policy's t.
func retryAfterSeconds(d floodgate.Decision) int64 {
	s := max(1, ceilSeconds(d.RetryAfter))
	for _, r := range d.Results {
		if !r.Allowed {
			s = max(s, effectiveWindow(r))
		}
	}
	return s
}
