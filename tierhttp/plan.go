package tierhttp

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/tier"
)

// Partition chooses what a tier's limits are counted per.
type Partition uint8

const (
	// ByTenant counts per tenant: all keys of a tenant share its quota,
	// so minting more keys buys no more requests. The default.
	ByTenant Partition = iota
	// ByKey counts per API key, named by its tier.Hash.ID.
	ByKey
)

// Default problem type URIs of Plan's 401 responses. They identify the
// problems without pointing at documentation; set PlanOptions.ProblemTypeBase
// to serve your own.
const (
	ProblemAPIKeyRequired = "urn:floodgate:problem:api_key_required"
	ProblemInvalidAPIKey  = "urn:floodgate:problem:invalid_api_key"
)

// PlanOptions configures Plan. Zero values take the defaults.
type PlanOptions struct {
	// Header carries the API key; default "X-API-Key". When it is absent
	// or empty, "Authorization: Bearer <key>" is read instead.
	Header string
	// Partition is what limits are counted per; default ByTenant.
	Partition Partition
	// Route, when set, is appended to the partition key ("tenant|route"),
	// so that each rule using this Plan counts separately; use the rule's
	// Pattern. Empty: rules with the same tier policies share the count.
	Route string
	// ProblemTypeBase prefixes "api_key_required" and "invalid_api_key"
	// to form the problem type URIs; default "urn:floodgate:problem:".
	ProblemTypeBase string
	// MaxKeyLength refuses longer keys as invalid without a lookup;
	// default 256 bytes.
	MaxKeyLength int
}

// Plan returns an httplimit.Rule.Plan func that limits each request by
// the tier of its API key:
//
//   - no key: a *httplimit.Reject, 401 problem+json with type
//     …api_key_required;
//   - a key src answers with tier.ErrUnknownKey or tier.ErrDisabledKey, or one
//     longer than MaxKeyLength: 401 …invalid_api_key;
//   - any other error of src (e.g. tier.ErrUnavailable): an
//     *httplimit.SourceError naming the "API key database" and wrapping
//     it, so that the rule's FailureMode answers, and a fail-closed 503
//     says the database is unavailable;
//   - otherwise the partition key (tenant or key ID, then "|" and Route
//     if set) and the plan named after the tier with its policies.
//
// src is asked on every request, so a database source belongs behind a
// Cache. The returned func is safe for concurrent use.
func Plan(src tier.Source, opts PlanOptions) func(r *http.Request) (engine.Plan, error) {
	shown := opts.Header
	if shown == "" {
		shown = "X-API-Key"
	}
	name := http.CanonicalHeaderKey(shown)
	base := opts.ProblemTypeBase
	if base == "" {
		base = "urn:floodgate:problem:"
	}
	maxLen := opts.MaxKeyLength
	if maxLen <= 0 {
		maxLen = 256
	}
	suffix := ""
	if opts.Route != "" {
		suffix = "|" + opts.Route
	}
	how := "Send it in the " + shown + " header, or in Authorization with the Bearer scheme."
	if name == "Authorization" {
		how = "Send it in Authorization with the Bearer scheme."
	}
	// Built once: the middleware only reads a Reject.
	required := &httplimit.Reject{Status: http.StatusUnauthorized, Problem: header.Problem{
		Type: base + "api_key_required", Title: "API Key Required", Status: http.StatusUnauthorized,
		Detail: "This API needs an API key. " + how,
	}}
	invalid := &httplimit.Reject{Status: http.StatusUnauthorized, Problem: header.Problem{
		Type: base + "invalid_api_key", Title: "Invalid API Key", Status: http.StatusUnauthorized,
		Detail: "The API key is unknown or has been revoked.",
	}}

	return func(r *http.Request) (engine.Plan, error) {
		key := apiKey(r, name)
		if key == "" {
			return engine.Plan{}, required
		}
		if len(key) > maxLen {
			return engine.Plan{}, invalid
		}
		h := tier.HashKey(key)
		e, err := src.Lookup(r.Context(), h)
		switch {
		case err == nil:
		case errors.Is(err, tier.ErrUnknownKey) || errors.Is(err, tier.ErrDisabledKey):
			return engine.Plan{}, invalid
		default:
			return engine.Plan{}, &httplimit.SourceError{Source: "API key database", Err: fmt.Errorf("tier: key %s: %w", h.ID(), err)}
		}
		pk := e.Tenant
		if opts.Partition == ByKey {
			pk = h.ID()
		}
		return engine.Plan{Name: e.Tier, Key: pk + suffix, Policies: e.Policies, Concurrency: e.Concurrency}, nil
	}
}

// apiKey reads the key from the named header, else from a Bearer
// Authorization header; "" when there is none.
func apiKey(r *http.Request, name string) string {
	if name != "Authorization" {
		if v := r.Header.Get(name); v != "" {
			return v
		}
	}
	token, _ := httplimit.BearerToken(r)
	return token
}
