package config

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/rlqs"
)

// RLQS is the face answering Envoy's rate limit quota service
// (envoy.service.rate_limit_quota.v3) over gRPC: clients report usage per
// bucket and enforce the leases it assigns (docs/RLQS.md).
type RLQS struct {
	// Listen is the gRPC address, a listener of its own. A lease spends
	// quota, so it must be a loopback address unless
	// listeners.tls.client_ca_file asks every client for a certificate.
	// Required.
	Listen string `yaml:"listen"`
	// Interval is the report interval the clients are configured with
	// (Envoy's reporting_interval); default rlqs.DefaultInterval (125ms).
	Interval Duration `yaml:"interval"`
	// TTL is every assignment's time to live; default 5 × interval.
	TTL Duration `yaml:"ttl"`
	// Slack is how late, in intervals, reports and answers may be while
	// leases keep refilling (rlqs.Options.Slack); 0 (default) to 1.
	Slack float64 `yaml:"slack"`
	// Domains maps each domain to its rules, the first match winning.
	Domains map[string][]RLQSRule `yaml:"domains"`

	// Rules is Domains compiled, filled by validation.
	Rules *rlqs.Rules `yaml:"-"`
}

// RLQSRule gives the buckets it matches a policy of the policies section.
type RLQSRule struct {
	// Match holds the bucket id entries a bucket must have; "*" as a
	// value matches any value; empty matches every bucket.
	Match map[string]string `yaml:"match"`
	// Policy names the quota (algorithm, quota, window, burst) every
	// matched bucket has, shared by all its clients; its unit must be
	// requests.
	Policy string `yaml:"policy"`
}

func (v *validator) rlqs() {
	r := v.cfg.RLQS
	if r == nil {
		return
	}
	v.rlqsListen(r)
	if r.Interval < 0 || r.TTL < 0 {
		v.fail("rlqs", "interval and ttl must not be negative")
	}
	if r.Slack < 0 || r.Slack > 1 {
		v.fail("rlqs.slack", "must be within 0..1 (intervals), got %g", r.Slack)
	}
	if v.has("rlqs.interval") && r.Interval.D() < time.Millisecond {
		v.fail("rlqs.interval", "must be at least 1ms, got %v", r.Interval.D())
	}
	if len(r.Domains) == 0 {
		v.fail("rlqs.domains", "required: at least one domain with its rules")
		return
	}
	domains := map[string][]rlqs.Rule{}
	for _, d := range slices.Sorted(maps.Keys(r.Domains)) {
		for i, rule := range r.Domains[d] {
			f := fmt.Sprintf("rlqs.domains.%s[%d]", d, i)
			p, ok := v.cfg.policies[rule.Policy]
			switch {
			case rule.Policy == "":
				v.fail(f, "policy is required: a name from the policies section")
				continue
			case !ok:
				v.fail(f+".policy", "no policy named %q in the policies section", rule.Policy)
				continue
			case p.Unit != floodgate.Requests:
				v.fail(f+".policy", "policy %q counts %s; RLQS reports count requests", rule.Policy, p.Unit)
				continue
			}
			for k := range rule.Match {
				if k == "" {
					v.fail(f+".match", "a bucket id key must not be empty")
				}
			}
			domains[d] = append(domains[d], rlqs.Rule{Match: rule.Match, Policy: p})
		}
	}
	rules, err := rlqs.NewRules(domains)
	if err != nil {
		v.fail("rlqs.domains", "%v", err)
		return
	}
	r.Rules = rules
}

// rlqsListen checks that the face has a listener of its own, on loopback
// unless every client must show a certificate.
func (v *validator) rlqsListen(r *RLQS) {
	if !v.listen("rlqs.listen", r.Listen) {
		return
	}
	c := v.cfg
	others := []string{c.Admin.Listen}
	if c.Gateway != nil {
		others = append(others, c.Gateway.Listen)
	}
	if c.API != nil {
		others = append(others, c.API.Listen)
	}
	if c.ForwardAuth != nil {
		others = append(others, c.ForwardAuth.Listen)
	}
	if c.EnvoyRLS != nil {
		others = append(others, c.EnvoyRLS.Listen)
	}
	for _, o := range others {
		if o != Off && o != "" && sameAddr(r.Listen, o) {
			v.fail("rlqs.listen", "%s is another face's address; gRPC needs a listener of its own", r.Listen)
		}
	}
	mtls := c.Listeners.TLS != nil && c.Listeners.TLS.ClientCAFile != ""
	if !mtls && !Loopback(r.Listen) {
		v.fail("rlqs.listen", "%s is not a loopback address: a lease spends quota, so anyone reaching it could; listen on 127.0.0.1 or set listeners.tls.client_ca_file (mutual TLS)", r.Listen)
	}
}

// Loopback reports whether the listen address addr reaches loopback only:
// a loopback IP or "localhost"; ":8081" and "0.0.0.0:8081" do not.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	return (err == nil && a.IsLoopback()) || host == "localhost"
}
