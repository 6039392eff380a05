package config

import (
	"slices"
	"strings"
	"time"

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
	cal, calOK := v.calendar(f, spec)
	if cal == nil {
		ok = v.require(f, "window", "window is required, e.g. window: 1m") && ok
	}
	ok = ok && calOK
	unit, err := floodgate.ParseUnit(spec.Unit)
	if err != nil {
		v.failErr(f+".unit", err)
		ok = false
	}
	if !ok || v.erred(f) {
		return
	}
	p := floodgate.Policy{Name: name, Algorithm: spec.Algorithm, Quota: spec.Quota, Window: spec.Window.D(), Burst: spec.Burst, Unit: unit, Calendar: cal}
	if cal != nil && !v.has(f+".window") {
		p.Window = cal.Nominal()
	}
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

// calendar reads a policy's calendar fields: nil without calendar, and
// whether they are valid.
func (v *validator) calendar(f string, spec PolicySpec) (*floodgate.Calendar, bool) {
	if spec.Calendar == "" {
		for _, field := range []string{"zone", "first_day", "anchor_day"} {
			if v.has(f + "." + field) {
				v.fail(f+"."+field, "applies to a calendar policy only (calendar: day, week, month, year or billing)")
				return nil, false
			}
		}
		return nil, true
	}
	period, err := floodgate.ParsePeriod(spec.Calendar)
	if err != nil {
		v.failErr(f+".calendar", err)
		return nil, false
	}
	cal := &floodgate.Calendar{Period: period, AnchorDay: spec.AnchorDay, Location: time.UTC}
	if spec.Zone != "" {
		if cal.Location, err = time.LoadLocation(spec.Zone); err != nil {
			v.fail(f+".zone", "unknown time zone %q (want an IANA name such as Europe/Berlin)", spec.Zone)
			return nil, false
		}
	}
	if spec.FirstDay != "" {
		day := slices.IndexFunc(weekdays[:], func(d time.Weekday) bool { return strings.EqualFold(d.String(), spec.FirstDay) })
		if day < 0 {
			v.fail(f+".first_day", "unknown day %q (want monday … sunday)", spec.FirstDay)
			return nil, false
		}
		cal.FirstDay = time.Weekday(day)
	}
	return cal, true
}

var weekdays = [...]time.Weekday{time.Sunday, time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday, time.Saturday}

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
