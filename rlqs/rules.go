package rlqs

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/floodgate/floodgate"
)

// Any, as a value in Rule.Match, matches a bucket whose id has the key
// with any value.
const Any = "*"

// Rule gives the buckets it matches their quota.
type Rule struct {
	// Match holds the entries a bucket id must have: each key present,
	// with this value or any value for Any. An empty Match matches every
	// bucket of the domain. Entries of the id not in Match are free.
	Match map[string]string
	// Policy is the quota every bucket the rule matches has, shared by all
	// the clients reporting that bucket: its Name and Algorithm identify
	// the state in the Store (one state per bucket id), its Unit must be
	// requests (reports count requests).
	Policy floodgate.Policy
}

// Rules maps a domain to its rules, the first match winning. It is
// immutable once built.
type Rules struct {
	domains map[string][]Rule
}

// NewRules checks and copies domains. Errors wrap floodgate.ErrInvalidPolicy
// for a policy Validate refuses, one counted in content bytes or an
// AnchoredWindow, and name the
// domain and the rule's index; an empty domain name is refused.
func NewRules(domains map[string][]Rule) (*Rules, error) {
	r := &Rules{domains: make(map[string][]Rule, len(domains))}
	for d, rules := range domains {
		if d == "" {
			return nil, fmt.Errorf("%w: rlqs: empty domain", floodgate.ErrInvalidPolicy)
		}
		out := make([]Rule, len(rules))
		for i, rule := range rules {
			if err := rule.Policy.Validate(); err != nil {
				return nil, fmt.Errorf("rlqs: domain %q rule %d: %w", d, i, err)
			}
			if rule.Policy.Unit != floodgate.Requests {
				return nil, fmt.Errorf("%w: rlqs: domain %q rule %d: unit must be requests, got %s", floodgate.ErrInvalidPolicy, d, i, rule.Policy.Unit)
			}
			// A reservation must be void once its window's count restarts
			// (windowOf), and an anchored window's end is the key's own,
			// which no bucket's time tells.
			if rule.Policy.Algorithm == floodgate.AnchoredWindow {
				return nil, fmt.Errorf("%w: rlqs: domain %q rule %d: anchored-window is not served (a lease cannot tell when its window ends; use fixed-window)", floodgate.ErrInvalidPolicy, d, i)
			}
			out[i] = Rule{Match: maps.Clone(rule.Match), Policy: rule.Policy}
		}
		r.domains[d] = out
	}
	return r, nil
}

// Domains returns the domain names, sorted.
func (r *Rules) Domains() []string { return slices.Sorted(maps.Keys(r.domains)) }

// match returns the first rule of domain matching id.
func (r *Rules) match(domain string, id map[string]string) (Rule, bool) {
	for _, rule := range r.domains[domain] {
		if matches(rule.Match, id) {
			return rule, true
		}
	}
	return Rule{}, false
}

func matches(want, id map[string]string) bool {
	for k, v := range want {
		got, ok := id[k]
		if !ok || (v != Any && v != got) {
			return false
		}
	}
	return true
}

// bucketKey is the Store's partition key of a bucket: the domain and the
// id's entries sorted by key, each part length-prefixed so that no two ids
// share a key (the order of a BucketId's entries does not matter, per
// rlqs.proto).
func bucketKey(domain string, id map[string]string) string {
	var b strings.Builder
	b.WriteString("rlqs:")
	part := func(s string) { fmt.Fprintf(&b, "%d:%s", len(s), s) }
	part(domain)
	for _, k := range slices.Sorted(maps.Keys(id)) {
		part(k)
		part(id[k])
	}
	return b.String()
}
