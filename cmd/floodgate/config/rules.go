package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/pattern"
)

func (v *validator) rules() {
	names := map[string]int{}
	for i := range v.cfg.Rules {
		v.rule(i, names)
	}
}

// rule checks rule i: what is about the file here, and the rest by
// engine.Rule.Validate and floodgate.CheckCost, as the daemon will
// compile it.
func (v *validator) rule(i int, names map[string]int) {
	c := v.cfg
	r := &c.Rules[i]
	f := fmt.Sprintf("rules[%d]", i)
	r.line = v.line(f)
	if r.Match == "" {
		v.fail(f, "match is required, e.g. match: \"POST /login\"")
	} else if _, err := pattern.Parse(r.Match); err != nil {
		v.fail(f+".match", "%v", err)
	}
	if r.Name == "" {
		r.Name = r.Match
	}
	if j, dup := names[r.Name]; dup && r.Name != "" {
		v.fail(f+".name", "rule name %q is also rules[%d]'s; names must be unique (they label metrics and the decision API)", r.Name, j)
	}
	names[r.Name] = i
	if !v.has(f + ".failure_mode") {
		r.FailureMode = c.Store.FailureMode
	}
	v.shareAndLease(f, r)
	if r.Skip {
		if len(r.Policies) > 0 {
			v.fail(f+".policies", "a skip rule limits nothing; remove policies or skip")
		}
		return
	}
	if r.Key == "" {
		r.Key = DefaultKey
	} else if _, err := ParseKey(r.Key); err != nil {
		v.fail(f+".key", "%v", err)
	}
	if !v.has(f + ".cost") {
		r.Cost = 1
	} else if r.Cost < 1 {
		v.fail(f+".cost", "must be at least 1, got %d", r.Cost)
	}
	if r.CostHeader != "" && !token(r.CostHeader) {
		v.fail(f+".cost_header", "%q is no header name: use letters, digits and !#$%%&'*+-.^_`|~", r.CostHeader)
	}
	if limits, ok := v.ruleLimits(f, r); ok {
		v.compiles(f, i, limits)
	}
}

// shareAndLease defaults a rule's local share to the store's and checks
// the share and the lease given, each by the engine's own check, at its
// line (under a stand-in name: the rule's own is checked at name).
func (v *validator) shareAndLease(f string, r *Rule) {
	if !v.has(f + ".local_share") {
		r.LocalShare = v.cfg.Store.LocalShare
	} else if err := (engine.Rule{Name: "rule", LocalShare: r.LocalShare}).Validate(); err != nil {
		v.fail(f+".local_share", "%s", cause(err))
	}
	if err := (engine.Rule{Name: "rule", Lease: r.Lease.D()}).Validate(); err != nil {
		v.fail(f+".lease", "%s", cause(err))
	}
}

// token reports whether s is an HTTP token (RFC 9110 §5.6.2), as a field
// name must be.
func token(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// ruleLimits resolves the policy names of a rule, reporting whether all
// of them are defined and valid.
func (v *validator) ruleLimits(f string, r *Rule) (Limits, bool) {
	c := v.cfg
	if len(r.Policies) == 0 {
		v.fail(f, "policies is required: name at least one policy")
		return Limits{}, false
	}
	ok := true
	seen := map[string]bool{}
	for j, name := range r.Policies {
		pf := fmt.Sprintf("%s.policies[%d]", f, j)
		_, isPolicy := c.policies[name]
		_, isCap := c.caps[name]
		_, defined := c.Policies[name]
		switch {
		case seen[name]:
			v.fail(pf, "policy %q listed twice", name)
			ok = false
		case isPolicy || isCap:
		case defined:
			ok = false // but invalid: said at its definition
		default:
			v.fail(pf, "unknown policy %q%s", name, knownPolicies(name, c.Policies))
			ok = false
		}
		seen[name] = true
	}
	return c.limits(r.Policies), ok
}

// compiles checks rule i, whose limits are valid, as the engine will
// take it (Config.EngineRule), reporting the library's message at the
// rule.
func (v *validator) compiles(f string, i int, l Limits) {
	if v.erred(f+".mode") || v.erred(f+".failure_mode") || v.erred(f+".max_delay") || v.erred(f+".cost") ||
		v.erred(f+".local_share") || v.erred(f+".lease") {
		return
	}
	if err := floodgate.CheckCost(floodgate.Cost{Requests: v.cfg.Rules[i].Cost}, l.Policies); err != nil {
		v.failErr(f+".cost", err)
	}
	if err := v.cfg.EngineRule(i).Validate(); err != nil {
		v.fail(f, "%s", cause(err))
	}
}

// EngineRule returns rule i as the engine takes it: its name, limits,
// mode, max delay, failure mode, local share and lease (the last three
// the store's when the rule gives none). It is the one place a
// configured rule becomes an engine.Rule: validation checks this value
// and the daemon compiles it.
func (c *Config) EngineRule(i int) engine.Rule {
	r := &c.Rules[i]
	l := c.RuleLimits(i)
	return engine.Rule{Name: r.Name, Policies: l.Policies, Concurrency: l.Concurrency, Mode: r.Mode,
		MaxDelay: r.MaxDelay.D(), FailureMode: r.FailureMode, LocalShare: r.LocalShare, Lease: r.Lease.D()}
}

// PolicySet returns the engine rule of a set of rate policies decided
// outside the configured rules (the decision API's lists, reset and
// peek of every policy), under the store's failure mode and local share.
func (c *Config) PolicySet(name string, policies []floodgate.Policy) engine.Rule {
	return engine.Rule{Name: name, Policies: policies, FailureMode: c.Store.FailureMode, LocalShare: c.Store.LocalShare}
}

// cause is an engine error about a rule without the rule's name, which
// the file's line and field say: the fault it wraps.
func cause(err error) string {
	if inner := errors.Unwrap(err); inner != nil {
		return libraryMessage(inner)
	}
	return err.Error()
}

// unreachable refuses a rule that no request through the gateway or
// forward-auth can reach (pattern.Shadows): skips (top-level, or rules
// with skip: true, wherever they stand) are checked before every rule,
// then the rules in order. Without those faces, rules are reached by name
// through the decision API only, and their order does not matter.
func (v *validator) unreachable() {
	c := v.cfg
	if c.Gateway == nil && c.ForwardAuth == nil {
		return
	}
	var skips, rules []*pattern.Pattern
	var skipAt, ruleAt []string // where each is in the file
	var ruleIndex []int
	for i, s := range c.Skip {
		p, _ := pattern.Parse(s) // nil when invalid: said at skip[i]
		skips, skipAt = append(skips, p), append(skipAt, fmt.Sprintf("skip[%d]", i))
	}
	for i, r := range c.Rules {
		p, _ := pattern.Parse(r.Match)
		if r.Skip {
			skips, skipAt = append(skips, p), append(skipAt, fmt.Sprintf("rules[%d], a skip rule,", i))
		} else {
			rules, ruleAt, ruleIndex = append(rules, p), append(ruleAt, fmt.Sprintf("rules[%d]", i)), append(ruleIndex, i)
		}
	}
	for _, sh := range pattern.Shadows(skips, rules) {
		by, where := rules[sh.By], ruleAt[sh.By]
		if sh.Skip {
			by, where = skips[sh.By], skipAt[sh.By]
		}
		v.fail(fmt.Sprintf("rules[%d].match", ruleIndex[sh.Rule]), "never reached through the gateway or forward-auth: %s (match %q) matches every request this rule does; %s", where, by, sh.Advice())
	}
}
