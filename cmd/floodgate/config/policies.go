package config

import (
	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/header"
)

// policies compiles the policies section with the library's types:
// floodgate.Policy, or floodgate.Concurrency for a concurrent-requests
// policy. The checks here are about the file (fields required, fields
// that do not apply); what a value means, Validate says.
func (v *validator) policies() {
	c := v.cfg
	c.policies = map[string]floodgate.Policy{}
	c.caps = map[string]floodgate.Concurrency{}
	for _, name := range sortedKeys(c.Policies) {
		if spec := c.Policies[name]; spec.Unit == header.UnitConcurrentRequests {
			v.concurrency(name, spec)
		} else {
			v.policy(name, spec)
		}
	}
}

func (v *validator) policy(name string, spec PolicySpec) {
	f := "policies." + name
	ok := v.require(f, "quota", "quota is required")
	ok = v.require(f, "window", "window is required, e.g. window: 1m") && ok
	unit, err := floodgate.ParseUnit(spec.Unit)
	if err != nil {
		v.failErr(f+".unit", err)
		ok = false
	}
	if !ok || v.erred(f) {
		return
	}
	p := floodgate.Policy{Name: name, Algorithm: spec.Algorithm, Quota: spec.Quota, Window: spec.Window.D(), Burst: spec.Burst, Unit: unit}
	if !v.has(f + ".algorithm") {
		p.Algorithm = floodgate.SlidingWindowCounter
	}
	if v.has(f+".burst") && p.Burst == 0 {
		// The library reads Burst 0 as "= quota"; written out, it more
		// likely means nginx's burst=0, and on a window algorithm any
		// burst written is a mistake: ask Validate with a burst it sees.
		p.Burst = 1
		if p.Validate() == nil {
			v.fail(f+".burst", "must be at least 1 (it is the bucket size): burst: 1 spaces requests evenly, like nginx's burst=0; leave it out for burst = quota")
			return
		}
	}
	if err := p.Validate(); err != nil {
		v.failLimit(f, err)
		return
	}
	v.cfg.policies[name] = p
}

// concurrency compiles a policy of unit concurrent-requests: an in-flight
// cap, with a name and a quota only.
func (v *validator) concurrency(name string, spec PolicySpec) {
	f := "policies." + name
	ok := v.require(f, "quota", "quota is required")
	for _, field := range []string{"algorithm", "burst"} {
		if v.has(f + "." + field) {
			v.fail(f+"."+field, "a concurrent-requests policy counts requests in flight: it has no %s", field)
			ok = false
		}
	}
	if !ok || v.erred(f) {
		return
	}
	k := floodgate.Concurrency{Name: name, Max: spec.Quota}
	if err := k.Validate(); err != nil {
		v.failLimit(f, err)
		return
	}
	v.cfg.caps[name] = k
}
