package httplimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/header"
)

// refuse answers a request the engine did not admit, by its verdict.
func (m *Middleware) refuse(w http.ResponseWriter, r *http.Request, ru *rule, key string, o *engine.Outcome) {
	switch o.Verdict {
	case engine.Denied:
		m.fields.Set(w.Header(), o)
		m.reject(w, r, ru, key, o)
	case engine.Reduced:
		m.fields.Set(w.Header(), o)
		m.reducedCapacity(w, r, ru, key, o)
	case engine.Blocked:
		m.fields.Set(w.Header(), o) // the limits are known, not their state
		m.block(w, r, ru, key, o.RetryAfter)
	case engine.Invalid:
		status, title := http.StatusBadRequest, "Bad Request"
		if errors.Is(o.Err, floodgate.ErrCostExceedsQuota) {
			status, title = http.StatusRequestEntityTooLarge, "Content Too Large"
		}
		header.Problem{Title: title, Status: status, Detail: o.Err.Error()}.Write(w)
	case engine.Rejected:
		m.fields.Set(w.Header(), o) // the rule's own limits, which the request met
		m.rejected(w, r, ru, o.Err)
	default: // Unavailable
		if o.CallerEnded() {
			contextEnded(w, o.Err)
			return
		}
		if err := r.Context().Err(); err != nil {
			contextEnded(w, err)
			return
		}
		m.fields.Set(w.Header(), o)
		what := "rate limit store"
		if se := (*SourceError)(nil); errors.As(o.Err, &se) {
			what = se.Source
		} else {
			// fail-closed answering for a failing store: marked as the
			// other failure modes' answers are, so that a proxy or an
			// operator tells it from the upstream's own 503s.
			w.Header()[engine.FieldDegraded] = []string{"store-unavailable"}
		}
		serviceUnavailable(w, what+" unavailable for rule "+strconv.Quote(ru.name))
	}
}

// rejected writes a *Reject (from a Plan func or a Cost func) as it says.
func (m *Middleware) rejected(w http.ResponseWriter, r *http.Request, ru *rule, err error) {
	var rej *Reject
	if !errors.As(err, &rej) || rej.Status < 400 || rej.Status > 599 {
		m.logger.Error("a rule refused a request with a status that is not an error", slog.String("rule", ru.name), slog.Any("error", err))
		header.Problem{Title: "Internal Server Error", Status: 500,
			Detail: fmt.Sprintf("rule %q refused the request without a 4xx or 5xx status", ru.name)}.Write(w)
		return
	}
	p := rej.Problem
	p.Status = rej.Status // RFC 9457 §3.1.2: the member repeats the response's status
	p.Write(w)
}

func problem(status int, detail string) header.Problem {
	return header.Problem{Title: http.StatusText(status), Status: status, Detail: detail}
}

func (m *Middleware) reject(w http.ResponseWriter, r *http.Request, ru *rule, key string, o *engine.Outcome) {
	secs := engine.RetryAfterSeconds(o)
	refusing(w.Header(), secs)
	m.logDenied(r.Context(), ru, key, o, secs, "rate limit exceeded")
	if m.onReject != nil {
		oc := *o // a copy: the caller's outcome stays on its stack
		m.onReject(w, r, &oc)
		return
	}
	header.QuotaExceeded(Detail(o), secs, o.Violated()...).Write(w)
}

// Detail says in words which limit refused o: "rate limit of 5 requests
// per 1m exceeded", or "limit of 4 concurrent requests exceeded".
func Detail(o *engine.Outcome) string {
	it := o.Item(o.Summary)
	if it.Window == 0 {
		return fmt.Sprintf("limit of %d concurrent requests exceeded", it.Quota)
	}
	return fmt.Sprintf("rate limit of %d %s per %s exceeded", it.Quota, it.Unit, formatWindow(it.Window))
}

// block answers a key held by the Blocker: 429 with the
// abnormal-usage-detected problem type (draft-11 §5).
func (m *Middleware) block(w http.ResponseWriter, r *http.Request, ru *rule, key string, ra time.Duration) {
	secs := header.Seconds(ra)
	refusing(w.Header(), secs)
	if n, ok := m.refusals.Admit(ru.name, key); ok {
		m.logger.LogAttrs(r.Context(), slog.LevelWarn, "blocked for abnormal usage",
			slog.String("rule", ru.name), slog.String("key", Fingerprint(key)), slog.Int64("retry_after", secs), slog.Int64("suppressed", n))
	}
	header.Problem{
		Type: header.ProblemAbnormalUsageDetected, Title: "Abnormal Usage Detected", Status: 429,
		Detail: "requests from this client were blocked after abnormal usage", RetryAfter: secs,
	}.Write(w)
}

// reducedCapacity answers a request refused only because quotas are
// temporarily lowered: 503 with the temporary-reduced-capacity type; the
// RateLimit-Policy already set shows the lowered quotas (draft-11 §5).
func (m *Middleware) reducedCapacity(w http.ResponseWriter, r *http.Request, ru *rule, key string, o *engine.Outcome) {
	secs := engine.RetryAfterSeconds(o)
	refusing(w.Header(), secs)
	m.logDenied(r.Context(), ru, key, o, secs, "refused under reduced capacity")
	it := o.Item(o.Summary)
	header.Problem{
		Type: header.ProblemTemporaryReducedCapacity, Title: "Temporary Reduced Capacity", Status: 503,
		Detail:           fmt.Sprintf("capacity temporarily reduced to %d %s per %s", it.Quota, it.Unit, formatWindow(it.Window)),
		ViolatedPolicies: o.Violated(), RetryAfter: secs,
	}.Write(w)
}

// contextEnded answers a request whose context ended before its limits
// were decided: either its client left and nobody reads this, or a
// deadline of the server's own passed, and the client is owed an answer.
func contextEnded(w http.ResponseWriter, err error) {
	serviceUnavailable(w, "the request's context ended before its rate limit was decided: "+err.Error())
}

// serviceUnavailable is a 503 that nothing the client did caused: worth
// trying again in a second.
func serviceUnavailable(w http.ResponseWriter, detail string) {
	w.Header()[header.FieldRetryAfter] = []string{"1"}
	header.Problem{Title: "Service Unavailable", Status: 503, Detail: detail}.Write(w)
}

// logDenied logs a refusal, unless one of the same rule and key was
// logged within the refusal log interval; suppressed counts those held
// back since.
func (m *Middleware) logDenied(ctx context.Context, ru *rule, key string, o *engine.Outcome, retryAfter int64, msg string) {
	n, ok := m.refusals.Admit(ru.name, key)
	if !ok {
		return
	}
	m.logger.LogAttrs(ctx, slog.LevelWarn, msg,
		slog.String("rule", ru.name),
		slog.String("policy", o.Item(o.Summary).Name),
		slog.String("key", Fingerprint(key)),
		slog.Int64("retry_after", retryAfter),
		slog.Int64("suppressed", n),
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
