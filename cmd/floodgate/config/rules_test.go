package config

import (
	"reflect"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
)

// TestEngineRule: every field of engine.Rule is reachable from a rule of
// the file, and EngineRule gives the value validation checked and the
// daemon compiles, the store's failure mode and local share filling in.
func TestEngineRule(t *testing.T) {
	c, err := Parse("f.yaml", []byte(minimal+`store: {failure_mode: fail-to-local, local_share: 0.5}
policies:
  a: {algorithm: gcra, quota: 10, window: 1s}
  inflight: {quota: 4, unit: concurrent-requests}
rules:
  - name: slow
    match: /slow
    policies: [a, inflight]
    mode: throttle
    max_delay: 2s
    failure_mode: fail-open
    local_share: 0.25
    lease: 30s
  - {name: plain, match: /, policies: a}
`))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := c.Policy("a")
	want := engine.Rule{Name: "slow", Policies: []floodgate.Policy{a}, Concurrency: []floodgate.Concurrency{{Name: "inflight", Max: 4}},
		Mode: engine.Throttle, MaxDelay: 2 * time.Second, FailureMode: floodgate.FailOpen, LocalShare: 0.25, Lease: 30 * time.Second}
	if got := c.EngineRule(0); !reflect.DeepEqual(got, want) {
		t.Errorf("EngineRule(0) = %+v\nwant %+v", got, want)
	}
	want = engine.Rule{Name: "plain", Policies: []floodgate.Policy{a}, FailureMode: floodgate.FailToLocal, LocalShare: 0.5}
	if got := c.EngineRule(1); !reflect.DeepEqual(got, want) {
		t.Errorf("EngineRule(1) = %+v\nwant %+v", got, want)
	}
	// Every field of engine.Rule is set by some rule above: a field added
	// to the engine and not to the file fails here.
	set := map[string]bool{}
	for i := range c.Rules {
		v := reflect.ValueOf(c.EngineRule(i))
		for j := range v.NumField() {
			if !v.Field(j).IsZero() {
				set[v.Type().Field(j).Name] = true
			}
		}
	}
	for f := range reflect.TypeFor[engine.Rule]().Fields() {
		if !set[f.Name] {
			t.Errorf("engine.Rule.%s is set by no rule of the file: add its YAML key", f.Name)
		}
	}
	ps := c.PolicySet("(policies)", []floodgate.Policy{a})
	if want := (engine.Rule{Name: "(policies)", Policies: []floodgate.Policy{a}, FailureMode: floodgate.FailToLocal, LocalShare: 0.5}); !reflect.DeepEqual(ps, want) {
		t.Errorf("PolicySet = %+v, want %+v", ps, want)
	}
}

// TestRuleShareAndLeaseErrors: a bad local_share or lease is reported at
// its own line, in the engine's words.
func TestRuleShareAndLeaseErrors(t *testing.T) {
	const head = minimal + "policies: {a: {quota: 1, window: 1s}}\nrules:\n  - match: /\n    policies: a\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"share above 1", head + "    local_share: 2\n", "f.yaml:6: rules[0].local_share: local share 2 is outside (0, 1] (0: the default, 1)"},
		{"share negative", head + "    local_share: -0.5\n", "f.yaml:6: rules[0].local_share: local share -0.5 is outside (0, 1] (0: the default, 1)"},
		{"lease negative", head + "    lease: -1s\n", "f.yaml:6: rules[0].lease: negative slot lease -1s"},
		{"lease too short", head + "    lease: 1ms\n", "f.yaml:6: rules[0].lease: slot lease 1ms is under 1s: a request's slot would expire while it runs"},
		{"lease not a duration", head + "    lease: long\n", `f.yaml:6: rules[0].lease: bad duration "long" (want e.g. "500ms", "30s", "1m", "1h" or "1d")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseErr(t, tc.yaml); got != tc.want {
				t.Errorf("error:\n %s\nwant:\n %s", got, tc.want)
			}
		})
	}
}
