package config

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clientip"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/pattern"
)

func reflectValue(c *Config) reflect.Value { return reflect.ValueOf(c).Elem() }

// validator checks a decoded Config, fills defaults and compiles policies,
// adding every problem to the decoder's list. It checks what is about the
// file itself (required fields, references between sections, listeners
// that clash); what a value means, the library's types and validators
// say, and their messages are reported with the field's line.
type validator struct {
	*decoder
	cfg *Config
}

// fail records a problem at field, using the line of the field or of its
// nearest enclosing field that has one.
func (v *validator) fail(field, format string, args ...any) {
	for _, e := range v.errs {
		if within(field, e.Field) {
			return // the decoder already said what is wrong with this value
		}
	}
	v.errorf(v.line(field), field, format, args...)
}

// failErr records a library error at field.
func (v *validator) failErr(field string, err error) { v.fail(field, "%s", libraryMessage(err)) }

// failLimit records a library error about the policy or cap at f, at the
// field the error names.
func (v *validator) failLimit(f string, err error) {
	if joined, ok := err.(interface{ Unwrap() []error }); ok { // several fields at once
		for _, e := range joined.Unwrap() {
			v.failLimit(f, e)
		}
		return
	}
	var pe *floodgate.PolicyError
	if !errors.As(err, &pe) || pe.Kind == "" {
		v.failErr(f, err)
		return
	}
	switch pe.Field {
	case "":
		v.fail(f, "%s", pe.Msg)
	case "name": // the name is the key of the policies section
		v.fail(f, "name %s", pe.Msg)
	case "max": // a cap's Max is its policy's quota
		v.fail(f+".quota", "%s", pe.Msg)
	default:
		v.fail(f+"."+pe.Field, "%s", pe.Msg)
	}
}

// erred reports whether a problem was already found at field or inside
// it, or at a field enclosing it.
func (v *validator) erred(field string) bool {
	for _, e := range v.errs {
		if within(field, e.Field) || within(e.Field, field) {
			return true
		}
	}
	return false
}

// within reports whether field is outer or inside it.
func within(field, outer string) bool {
	return field == outer || strings.HasPrefix(field, outer+".") || strings.HasPrefix(field, outer+"[")
}

func (v *validator) line(field string) int {
	for p := field; p != ""; {
		if l, ok := v.lines[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

func (v *validator) has(field string) bool { _, ok := v.lines[field]; return ok }

// require reports whether f has the field, recording msg at f if not.
func (v *validator) require(f, field, msg string) bool {
	if v.has(f + "." + field) {
		return true
	}
	v.fail(f, "%s", msg)
	return false
}

func (v *validator) validate() {
	v.faces()
	v.store()
	v.breaker()
	v.policies()
	v.rules()
	v.unreachable()
	v.ops()
	v.envoyRLS() // after faces: its listener must not be theirs
	v.rlqs()     // after policies and faces
	v.clients()
	v.output()
	v.security() // after faces and rules: callers name rules
	v.tiers()    // after identity: a rule's tiers.header defaults to its api_key_header
	v.tracing()
}

// clients checks who is limited how: skips, bypass, trusted proxies and
// the headers that name clients.
func (v *validator) clients() {
	c := v.cfg
	for i, s := range c.Skip {
		if _, err := pattern.Parse(s); err != nil {
			v.fail(fmt.Sprintf("skip[%d]", i), "%v", err)
		}
	}
	v.headerName("bypass.header", &c.Bypass.Header, DefaultBypassHeader)
	for i, t := range c.Bypass.Tokens {
		if t == "" {
			v.fail(fmt.Sprintf("bypass.tokens[%d]", i), "empty token (is its environment variable empty?)")
		}
	}
	v.prefixes("bypass.cidrs", c.Bypass.CIDRs, "limit no client at all")
	v.prefixes("trusted_proxies", c.TrustedProxies, "believe every client's X-Forwarded-For")
	for i, h := range c.ClientIP.Headers {
		if _, err := ParseSource(h); err != nil {
			v.fail(fmt.Sprintf("client_ip.headers[%d]", i), "%v", err)
		}
	}
	if p := c.ClientIP.IPv6Prefix; p < 0 || p > 128 {
		v.fail("client_ip.ipv6_prefix", "%d is outside 1..128 (0 keys by whole address)", p)
	}
	id := &c.Identity
	v.headerName("identity.api_key_header", &id.APIKeyHeader, DefaultAPIKeyHeader)
	v.headerName("identity.user_header", &id.UserHeader, DefaultUserHeader)
	v.headerName("identity.tenant_header", &id.TenantHeader, DefaultTenantHeader)
}

// headerName defaults an empty header name to def and checks a given one.
func (v *validator) headerName(field string, name *string, def string) {
	if *name == "" {
		*name = def
	} else if !header.IsToken(*name) {
		v.fail(field, "%q is not a header name", *name)
	}
}

// prefixes checks a list of addresses and CIDRs; a /0, every address,
// would make the list mean what everything says.
func (v *validator) prefixes(field string, list []string, everything string) {
	for i, s := range list {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch p, err := clientip.ParsePrefix(s); {
		case err != nil:
			v.fail(f, "bad address or CIDR %q", s)
		case p.Bits() == 0:
			v.fail(f, "%q is every address: it would %s", s, everything)
		}
	}
}

// output checks the response fields, the shutdown and the log.
func (v *validator) output() {
	c := v.cfg
	switch c.Headers.Reset {
	case "":
		c.Headers.Reset = "epoch"
	case "epoch", "delta":
	default:
		v.fail("headers.reset", "unknown reset style %q (want epoch or delta)", c.Headers.Reset)
	}
	switch w := c.Headers.WarnAt; {
	case w == 0:
		c.Headers.WarnAt = DefaultWarnAt
	case w > 1:
		v.fail("headers.warn_at", "%v is above 1 (a share of the quota; negative never warns)", w)
	}
	switch {
	case !v.has("shutdown_timeout"):
		c.ShutdownTimeout = Duration(DefaultShutdownTimeout)
	case c.ShutdownTimeout < 0:
		v.fail("shutdown_timeout", "must not be negative")
	}
	switch c.Log.Format {
	case "":
		c.Log.Format = "text"
	case "text", "json":
	default:
		v.fail("log.format", "unknown format %q (want text or json)", c.Log.Format)
	}
}

// FailureMode returns rule i's failure mode: its own, else the store's.
func (c *Config) FailureMode(i int) floodgate.FailureMode { return c.Rules[i].FailureMode }

// ParseSource maps a client_ip.headers entry to a clientip.Source.
func ParseSource(s string) (clientip.Source, error) {
	switch strings.ToLower(s) {
	case "x-forwarded-for":
		return clientip.XForwardedFor, nil
	case "forwarded":
		return clientip.Forwarded, nil
	case "x-real-ip":
		return clientip.XRealIP, nil
	case "cf-connecting-ip":
		return clientip.CFConnectingIP, nil
	}
	return 0, fmt.Errorf("unknown client address header %q (want x-forwarded-for, forwarded, x-real-ip or cf-connecting-ip)", s)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
