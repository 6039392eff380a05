package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/secret"
)

// CheckRequest is one check of POST /v1/check.
type CheckRequest struct {
	// Key is the partition key, e.g. a user ID or "203.0.113.7|POST /login";
	// required. The same key and policy share counters with the gateway and
	// forward-auth.
	Key string `json:"key"`
	// Rule names a configured rule whose policies apply; or give Policies.
	Rule string `json:"rule,omitempty"`
	// Policies names configured policies that all apply.
	Policies []string `json:"policies,omitempty"`
	// Cost is the units to spend; default 1, at most api.max_cost and each
	// policy's capacity.
	Cost *int64 `json:"cost,omitempty"`
	// Reserve keeps an admitted check's cost as an estimate to settle
	// with the actual cost (POST /v1/settle) within 10 minutes: the answer
	// then carries "reservation", its id. Not in a batch.
	Reserve bool `json:"reserve,omitempty"`
}

// checkError is a check the API refuses: status and a detail for the
// problem body.
type checkError struct {
	status int
	detail string
}

func (e *checkError) Error() string { return e.detail }

func badRequest(format string, args ...any) *checkError {
	return &checkError{status: http.StatusBadRequest, detail: fmt.Sprintf(format, args...)}
}

const maxBody = 1 << 20

var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (s *Server) handleCheck(w http.ResponseWriter, r *http.Request) {
	st := s.state.Load()
	buf := bodyPool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 64<<10 {
			buf.Reset()
			bodyPool.Put(buf)
		}
	}()
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxBody))
	body := buf.Bytes()
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeProblem(w, http.StatusRequestEntityTooLarge, "Content Too Large", fmt.Sprintf("the body is larger than %d bytes", maxBody))
			return
		}
		writeProblem(w, http.StatusBadRequest, "Bad Request", "reading the body: "+err.Error())
		return
	}
	// The decoders get the body as sent, so that the byte offsets in their
	// errors count from its start.
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		s.checkBatch(w, r.Context(), st, body)
		return
	}
	var req CheckRequest
	if !parseSimple(trimmed, &req) {
		// A variable of its own, so that req stays on the stack: the strict
		// decoder's argument escapes.
		var full CheckRequest
		if err := decodeStrict(body, &full); err != nil {
			s.m.checkErrors.Inc()
			writeProblem(w, http.StatusBadRequest, "Bad Request", err.Error())
			return
		}
		req = full
	}
	out, cerr := s.check(r.Context(), st, &req)
	if cerr != nil {
		s.m.checkErrors.Inc()
		if cerr.status == http.StatusServiceUnavailable {
			st.fields.SetKnown(w.Header(), &out) // what is known: the policies
			w.Header().Set(header.FieldRetryAfter, "1")
		}
		writeProblem(w, cerr.status, http.StatusText(cerr.status), cerr.detail)
		return
	}
	s.countCheck(&out)
	st.setHeaders(w.Header(), &out)
	// The answer is written over the body, which the decoders copied from.
	writeJSON(w, http.StatusOK, s.reserve(appendOutcome(body[:0], req.Key, &out), &req, &out))
}

func (s *Server) countCheck(o *engine.Outcome) {
	if o.Verdict == engine.Allowed {
		s.m.checkAllowed.Inc()
	} else {
		s.m.checkDenied.Inc()
	}
}

// checkBatch answers an array of checks with an array of decisions, each
// in place of its check; a refused check gets {"error": problem} instead.
func (s *Server) checkBatch(w http.ResponseWriter, ctx context.Context, st *state, body []byte) {
	var reqs []*CheckRequest // pointers, so that a null check shows
	err := decodeStrict(body, &reqs)
	if err == nil && slices.Contains(reqs, nil) {
		err = errors.New("a batch holds a null")
	}
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "Bad Request", batchError(body, err).Error())
		return
	}
	if n := st.cfg.API.MaxBatch; len(reqs) > n {
		writeProblem(w, http.StatusBadRequest, "Bad Request", fmt.Sprintf("a batch holds at most %d checks (api.max_batch), got %d", n, len(reqs)))
		return
	}
	if len(reqs) == 0 {
		writeProblem(w, http.StatusBadRequest, "Bad Request", "empty batch")
		return
	}
	if slices.ContainsFunc(reqs, func(r *CheckRequest) bool { return r.Reserve }) {
		writeProblem(w, http.StatusBadRequest, "Bad Request", "reserve is for a single check, not a batch")
		return
	}
	type answer struct {
		out engine.Outcome
		err *checkError
	}
	answers := make([]answer, len(reqs))
	// Concurrent checks let a shared store batch them into one round trip.
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i].out, answers[i].err = s.check(ctx, st, reqs[i])
		}()
	}
	wg.Wait()
	b := make([]byte, 0, 256*len(reqs))
	b = append(b, '[')
	for i, a := range answers {
		if i > 0 {
			b = append(b, ',')
		}
		if a.err != nil {
			s.m.checkErrors.Inc()
			p, _ := json.Marshal(header.Problem{Title: http.StatusText(a.err.status), Status: a.err.status, Detail: a.err.detail})
			b = append(b, `{"error":`...)
			b = append(b, p...)
			b = append(b, '}')
			continue
		}
		s.countCheck(&a.out)
		b = appendOutcome(b, reqs[i].Key, &a.out)
	}
	b = append(b, ']')
	writeJSON(w, http.StatusOK, b)
}

// check validates one request and decides it through the engine, as the
// gateway decides a request of the same rule: shadow, throttle, blocks,
// reductions and observers alike. The cost is charged in every unit. A
// check holds no in-flight slot: a rule's caps say whether one is free
// now.
func (s *Server) check(ctx context.Context, st *state, req *CheckRequest) (engine.Outcome, *checkError) {
	api := st.cfg.API
	if err := checkKey(req.Key, api.MaxKeyLength); err != nil {
		return engine.Outcome{}, err
	}
	cost := int64(1)
	if req.Cost != nil {
		cost = *req.Cost
	}
	if cost < 1 || cost > api.MaxCost {
		return engine.Outcome{}, badRequest("cost must be within 1..%d (api.max_cost), got %d; peek with GET /v1/limits/{key}", api.MaxCost, cost)
	}
	if cerr := permit(ctx, req); cerr != nil {
		return engine.Outcome{}, cerr
	}
	rule, cerr := s.selectSet(st, req.Rule, req.Policies)
	if cerr != nil {
		return engine.Outcome{}, cerr
	}
	out := rule.Decide(ctx, engine.Request{Key: req.Key, Cost: floodgate.Cost{Requests: cost, ContentBytes: cost}})
	out.Release()
	return out, outcomeError(&out)
}

// outcomeError is the API's refusal of an outcome that is not a decision:
// a cost that can never pass, or a failing store.
func outcomeError(o *engine.Outcome) *checkError {
	switch o.Verdict {
	case engine.Invalid, engine.Unavailable:
		return takeError(o.Err)
	}
	return nil
}

func takeError(err error) *checkError {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, floodgate.ErrCostExceedsQuota), errors.Is(err, floodgate.ErrInvalidCost):
		return badRequest("%s", strings.TrimPrefix(err.Error(), "floodgate: "))
	case errors.Is(err, floodgate.ErrStoreUnavailable):
		return &checkError{status: http.StatusServiceUnavailable, detail: "the rate-limit store is unavailable (fail-closed)"}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &checkError{status: http.StatusServiceUnavailable, detail: "the check was cancelled"}
	}
	return &checkError{status: http.StatusInternalServerError, detail: err.Error()}
}

func checkKey(key string, maxLen int) *checkError {
	switch {
	case key == "":
		return badRequest("key is required: the partition key to count under, e.g. a user ID")
	case len(key) > maxLen:
		return badRequest("key is %d bytes long, at most %d allowed (api.max_key_length)", len(key), maxLen)
	case strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f || r == utf8.RuneError }):
		// U+FFFD is what a JSON decoder makes of invalid UTF-8: two
		// different byte strings would otherwise share one counter.
		return badRequest("key holds a control character or U+FFFD (invalid UTF-8); send printable text")
	}
	return nil
}

// selectSet finds the limiter for a rule name or a list of policy names
// (exactly one of them).
func (s *Server) selectSet(st *state, rule string, policies []string) (*engine.Compiled, *checkError) {
	switch {
	case rule != "" && len(policies) > 0:
		return nil, badRequest("give rule or policies, not both")
	case rule != "":
		ls, ok := st.rules[rule]
		if !ok {
			names := slices.Sorted(maps.Keys(st.rules))
			return nil, badRequest("unknown rule %q (rules: %s)", rule, strings.Join(names, ", "))
		}
		return ls, nil
	case len(policies) > 0:
		ls, err := s.set(st, policies)
		if err != nil {
			return nil, badRequest("%v", err)
		}
		return ls, nil
	}
	return nil, badRequest("give rule (a configured rule's name) or policies (a list of policy names)")
}

// selectFromQuery picks the limiters of a peek or reset from "rule" or
// "policies" (comma-separated), or all policies when both are absent. Any
// other parameter, a repeated or empty one, or a query that does not parse
// is a 400: a misspelt "?rules=login" must not peek at, or reset, every
// policy of the key.
func (s *Server) selectFromQuery(st *state, r *http.Request) (*engine.Compiled, *checkError) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest("bad query: %v", err)
	}
	for name, vals := range q {
		switch {
		case name != "rule" && name != "policies" && name != "form":
			return nil, badRequest("unknown query parameter %q (known: rule, policies, form)", name)
		case len(vals) > 1:
			return nil, badRequest("query parameter %q given %d times", name, len(vals))
		case vals[0] == "":
			return nil, badRequest("query parameter %q is empty", name)
		}
	}
	rule := q.Get("rule")
	var policies []string
	if p := q.Get("policies"); p != "" {
		policies = strings.Split(p, ",")
	}
	if rule == "" && policies == nil {
		if st.all == nil {
			return nil, badRequest("no rate policies are configured")
		}
		return st.all, nil
	}
	return s.selectSet(st, rule, policies)
}

func (s *Server) handlePeek(w http.ResponseWriter, r *http.Request) {
	st := s.state.Load()
	key, rule, cerr := s.limitTarget(st, r)
	if cerr == nil {
		out := rule.Peek(r.Context(), key)
		if cerr = outcomeError(&out); cerr == nil {
			st.setHeaders(w.Header(), &out)
			w.Header().Del(header.FieldRetryAfter) // a peek spends nothing and asks no wait
			writeJSON(w, http.StatusOK, appendOutcome(make([]byte, 0, 512), key, &out))
			return
		}
	}
	writeProblem(w, cerr.status, http.StatusText(cerr.status), cerr.detail)
}

func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	st := s.state.Load()
	// With callers, guardAPI has let only a caller with the reset scope or
	// the admin token through.
	if len(st.cfg.API.Callers) == 0 && !s.authorized(w, r, st) {
		return
	}
	key, rule, cerr := s.limitTarget(st, r)
	if cerr != nil {
		writeProblem(w, cerr.status, http.StatusText(cerr.status), cerr.detail)
		return
	}
	var policies []string
	for _, p := range rule.Policies() {
		policies = append(policies, p.Name)
	}
	if err := rule.Reset(r.Context(), key); err != nil {
		s.logger.Error("reset failed", "error", err)
		writeProblem(w, http.StatusServiceUnavailable, "Service Unavailable", "the rate-limit store is unavailable")
		return
	}
	s.logger.Info("limits reset", "key_fingerprint", httplimit.Fingerprint(key), "policies", strings.Join(policies, ","))
	b := append([]byte(`{"reset":true,"key":`), appendString(nil, key)...)
	b = append(b, `,"policies":`...)
	names, _ := json.Marshal(policies)
	b = append(b, names...)
	writeJSON(w, http.StatusOK, append(b, '}'))
}

// authorized checks the admin token; without a configured token the
// guarded endpoints are refused outright rather than left open.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request, st *state) bool {
	token := st.cfg.Admin.Token
	if token == "" {
		writeProblem(w, http.StatusForbidden, "Forbidden", "this endpoint needs admin.token in the configuration")
		return false
	}
	got, ok := httplimit.BearerToken(r)
	if !ok || !secret.Equal(got, token) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="floodgate"`)
		writeProblem(w, http.StatusUnauthorized, "Unauthorized", "send the admin token as Authorization: Bearer <token>")
		return false
	}
	return true
}
