package httplimit

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/pattern"
)

// Rule limits the requests that match its pattern. The engine's side
// (name, policies, caps, modes, failure mode, local share, lease) is the
// embedded engine.Rule, whose Name defaults to Pattern: Policies all
// apply at once, all or nothing (REQUIREMENTS K3), Requests policies
// charged Cost and ContentBytes policies the request body size, in one
// store call; Concurrency caps requests in flight per key, a slot held
// while the handler runs; a FailClosed rule answers 503 while the store
// fails (S3).
type Rule struct {
	// Pattern selects requests, in http.ServeMux syntax
	// "[METHOD ][HOST]/[PATH]" (see the package doc); "/" matches all.
	// Rules are tried in order and the first match wins.
	Pattern string
	// Key builds the partition key from its parts (K1); default ClientIP().
	Key []KeyPart
	// Missing is what a request gets whose key lacks a part (a KeyPart
	// returned ""): ShareMissing (the default) or RefuseMissing.
	Missing MissingKey
	// Cost charges a request against the Requests policies; default 1.
	// An error answers 400.
	Cost func(r *http.Request) (int64, error)
	// CostHeader names a response header, or trailer, in which the
	// handler reports the request's actual cost in the Requests unit (a
	// token count, say): the middleware removes it from the response, so
	// the client never sees it, and settles the charge made at admission
	// (Cost) with it: the excess is post-charged, counted even past the
	// quota (the key is then refused until the debt is repaid), a smaller
	// cost is refunded. A value that is not a non-negative integer is
	// removed and ignored. "" (the default) reads nothing.
	CostHeader string
	// MaxBodyBytes caps a body of unknown length read under ContentBytes
	// policies; reading past it fails the read. Default 10 MiB.
	MaxBodyBytes int64
	// Plan picks further limits per request: for tiered quotas, the plan
	// of the request's API key (K6), under the plan's own key ("" means
	// the rule's). Its limits are decided after the rule's own, so those
	// can guard it by client IP (K7): guessing keys is limited before any
	// key lookup. A *Reject error is written as it is (e.g. a 401); any
	// other error is a failing source, answered by FailureMode: 503 when
	// closed, the request passes unlimited when open.
	Plan func(r *http.Request) (engine.Plan, error)
	// Limits, if set, is the rule's engine side compiled already (so that
	// several doors share one rule); the embedded engine.Rule must then
	// hold at most a Name.
	Limits *engine.Compiled
	engine.Rule
}

// MissingKey says what a rule does with a request whose partition key
// lacks a part, such as an API key it did not send.
type MissingKey uint8

const (
	// ShareMissing writes "-" for the absent part, so all requests lacking
	// it share one partition (per value of the other parts): an
	// unauthenticated flood limits itself, not the clients that identify.
	ShareMissing MissingKey = iota
	// RefuseMissing answers 401 with a problem+json body (Cache-Control:
	// no-store) before any limit is spent, for routes that require the
	// key, e.g. an API key.
	RefuseMissing
)

// rule is a Rule made ready to serve.
type rule struct {
	name       string
	pattern    *pattern.Pattern
	key        []KeyPart
	cost       func(*http.Request) (int64, error)
	maxBody    int64
	plan       func(r *http.Request) (engine.Plan, error)
	limits     *engine.Compiled
	bytes      bool   // some policy counts content bytes (a plan's may too)
	costHeader string // canonical; "" for none
	refuse     bool   // RefuseMissing
}

func newRule(in Rule, eng *engine.Engine) (*rule, error) {
	if in.Name == "" {
		in.Name = in.Pattern
	}
	name := in.Name
	fail := func(err error) (*rule, error) { return nil, fmt.Errorf("httplimit: rule %q: %w", name, err) }
	pat, err := pattern.Parse(in.Pattern)
	if err != nil {
		return fail(err)
	}
	r := &rule{name: name, pattern: pat, key: in.Key, cost: in.Cost, maxBody: in.MaxBodyBytes, plan: in.Plan, limits: in.Limits,
		refuse: in.Missing == RefuseMissing, costHeader: http.CanonicalHeaderKey(in.CostHeader)}
	if in.Missing > RefuseMissing {
		return fail(fmt.Errorf("unknown Missing %d (want ShareMissing or RefuseMissing)", in.Missing))
	}
	if len(r.key) == 0 {
		r.key = []KeyPart{ClientIP()}
	}
	for i, k := range r.key {
		if k == nil {
			return fail(fmt.Errorf("key part %d is nil", i))
		}
	}
	switch {
	case in.MaxBodyBytes < 0:
		return fail(fmt.Errorf("max body bytes %d is negative (0: the default, 10 MiB)", in.MaxBodyBytes))
	case in.MaxBodyBytes == 0:
		r.maxBody = 10 << 20
	}
	if r.limits == nil {
		if len(in.Policies) == 0 && len(in.Concurrency) == 0 && in.Plan == nil {
			return fail(fmt.Errorf("no policies, concurrency caps or plan: it would limit nothing"))
		}
		if r.limits, err = eng.Compile(in.Rule); err != nil {
			return nil, fmt.Errorf("httplimit: %w", err)
		}
	} else if !onlyNamed(in.Rule) {
		return fail(fmt.Errorf("a rule with Limits takes its policies, caps, modes and lease from them; leave the engine.Rule but its Name zero"))
	}
	r.bytes = r.plan != nil
	for _, p := range r.limits.Policies() {
		r.bytes = r.bytes || p.Unit == floodgate.ContentBytes
	}
	return r, nil
}

// onlyNamed reports whether r sets nothing but its Name.
func onlyNamed(r engine.Rule) bool {
	return len(r.Policies) == 0 && len(r.Concurrency) == 0 && r.Mode == 0 && r.MaxDelay == 0 &&
		r.FailureMode == 0 && r.LocalShare == 0 && r.Lease == 0
}

// request builds the engine's request for r: the key, the cost in each
// unit (a body of unknown length costs 0 bytes here, and is charged as it
// is read) and the plan.
func (ru *rule) request(r *http.Request, info Info) (engine.Request, error) {
	key, missing := buildKey(ru.key, r, info)
	req := engine.Request{Key: key, Cost: floodgate.Cost{Requests: 1}}
	if missing && ru.refuse {
		return req, &Reject{Status: http.StatusUnauthorized, Problem: problem(http.StatusUnauthorized,
			"this route needs a key the request did not send (rule "+strconv.Quote(ru.name)+")")}
	}
	if ru.cost != nil {
		c, err := ru.cost(r)
		if err != nil {
			return req, &Reject{Status: http.StatusBadRequest, Problem: problem(http.StatusBadRequest, "cost: "+err.Error())}
		}
		req.Cost.Requests = c
	}
	if ru.bytes && r.ContentLength > 0 {
		req.Cost.ContentBytes = r.ContentLength
	}
	if ru.plan != nil {
		req.Plan = func(context.Context) (*engine.Plan, error) {
			p, err := ru.plan(r)
			return &p, err
		}
	}
	return req, nil
}
