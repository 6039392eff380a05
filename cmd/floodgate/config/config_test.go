package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
)

func TestLoadReportsEveryError(t *testing.T) {
	_, err := Load("testdata/bad.yaml")
	var errs Errors
	if !errors.As(err, &errs) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("Load = %v, want Errors wrapping ErrInvalid", err)
	}
	want := []string{
		`testdata/bad.yaml:3: gateway.upstream: want an http:// or https:// URL with a host, or "demo"; got "ftp://example.com"`,
		`testdata/bad.yaml:4: gateway.timout: unknown field (did you mean "timeout"?) (known: listen, upstream, timeout, flush_interval, upload_timeout, write_timeout, routes)`,
		`testdata/bad.yaml:9: store.redis.timeout: bad duration "fast" (want e.g. "500ms", "30s", "1m", "1h" or "1d")`,
		`testdata/bad.yaml:18: policies.api.burst: must not be negative, got -1`,
		`testdata/bad.yaml:23: policies.weird.burst: applies to token-bucket and gcra only, not sliding-window-counter (use a second, shorter policy for a burst limit)`,
		`testdata/bad.yaml:25: policies.zero.quota: must be positive, got 0`,
		`testdata/bad.yaml:29: rules[0].policies[0]: unknown policy "logn" (did you mean "login"?) (defined: api, login, weird, zero)`,
		`testdata/bad.yaml:32: rules[1].key: unknown key part "{nope}" (want {ip}, {route}, {method}, {host}, {header:Name}, {api_key}, {user} or {tenant})`,
		`testdata/bad.yaml:34: rules[1].cost: floodgate: cost exceeds quota: cost 50 requests, policy "login" admits at most 5 at once`,
		`testdata/bad.yaml:35: rules[2].match: pattern "GET bad": path must start with /`,
		`testdata/bad.yaml:35: rules[2]: throttle mode needs a positive max delay, e.g. 2s`,
	}
	got := strings.Split(err.Error(), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", err, strings.Join(want, "\n"))
	}
	if len(errs) != len(want) || errs[0].Line != 3 || errs[0].Field != "gateway.upstream" || errs[0].File != "testdata/bad.yaml" {
		t.Errorf("first error = %+v", errs[0])
	}
}

func TestLoadGoodFillsDefaults(t *testing.T) {
	t.Setenv("FG_TEST_TOKEN", "s3cret")
	c, err := Load("testdata/good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Admin.Token != "s3cret" || c.Admin.Listen != Off {
		t.Errorf("admin = %+v", c.Admin)
	}
	if got := c.Bypass.Tokens; len(got) != 1 || got[0] != "letmein" {
		t.Errorf("bypass tokens = %q, want the ${:-} default", got)
	}
	if c.Gateway.Timeout.D() != 30*time.Second || c.API.MaxCost != 500 || c.API.MaxBatch != 100 || c.API.MaxKeyLength != 1024 {
		t.Errorf("defaults: gateway %+v api %+v", c.Gateway, c.API)
	}
	if c.Store.Type != "memory" || c.Store.FailureMode != floodgate.FailClosed || c.Store.Memory.MaxKeys != DefaultMemoryMaxKeys {
		t.Errorf("store = %+v", c.Store)
	}
	if c.ShutdownTimeout.D() != 10*time.Second || c.Headers.Style != engine.Both || c.Headers.WarnAt != 0.9 {
		t.Errorf("shutdown %v headers %+v", c.ShutdownTimeout.D(), c.Headers)
	}
	api, _ := c.Policy("api")
	want := floodgate.Policy{Name: "api", Algorithm: floodgate.GCRA, Quota: 100, Window: time.Minute, Burst: 5}
	if api != want {
		t.Errorf("api policy = %+v, want %+v", api, want)
	}
	login, _ := c.Policy("login")
	if login.Algorithm != floodgate.SlidingWindowCounter {
		t.Errorf("default algorithm = %v", login.Algorithm)
	}
	daily, _ := c.Policy("daily")
	if daily.Window != 24*time.Hour {
		t.Errorf("1d = %v", daily.Window)
	}
	if len(c.Rules) != 3 || !c.Rules[0].Skip || c.Rules[1].Name != "login" || c.Rules[1].Cost != 1 || c.Rules[2].Cost != 2 {
		t.Fatalf("rules = %+v", c.Rules)
	}
	if c.Rules[0].Name != "GET /healthz" {
		t.Errorf("unnamed rule's name = %q, want its pattern", c.Rules[0].Name)
	}
	if got := c.RuleLimits(2).Policies; len(got) != 2 || got[0].Name != "api" || got[1].Name != "daily" {
		t.Errorf("RuleLimits(2).Policies = %+v", got)
	}
	if c.FailureMode(1) != floodgate.FailClosed || c.FailureMode(2) != floodgate.FailOpen {
		t.Errorf("failure modes %v %v", c.FailureMode(1), c.FailureMode(2))
	}
}

func TestQuickstartIsValid(t *testing.T) {
	c, err := Load("../../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Gateway.Upstream != Demo {
		t.Errorf("quickstart upstream = %q", c.Gateway.Upstream)
	}
	login, _ := c.Policy("login")
	if login.Quota != 5 || login.Window != time.Minute {
		t.Errorf("login = %+v, README's curl loop counts on 5/min", login)
	}
}

func parseErr(t *testing.T, yaml string) string {
	t.Helper()
	_, err := Parse("f.yaml", []byte(yaml))
	if err == nil {
		t.Fatalf("Parse(%q) succeeded", yaml)
	}
	return err.Error()
}

const minimal = "api: {listen: ':0'}\n"

// gw is minimal with a gateway, whose requests the rules' order decides.
const gw = "gateway: {listen: ':0', upstream: demo}\n"

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"syntax", "api:\n  listen: [\n", "f.yaml:2: did not find expected node content"},
		{"tab", "api:\n\tlisten: ':1'\n", "f.yaml:2: a tab where YAML allows only spaces (indent with spaces)"},
		{"no face", "admin: {listen: ':1'}\n", "f.yaml: no face is switched on: configure at least one of gateway, api, forward_auth, envoy_rls and rlqs"},
		{"unset env", minimal + "admin: {token: '${FG_SURELY_UNSET}'}\n", "f.yaml:2: admin.token: environment variable FG_SURELY_UNSET is not set (write ${FG_SURELY_UNSET:-default} for a fallback)"},
		{"env in flow mapping", minimal + "admin: {listen: ':2', token: ${FG_SURELY_UNSET}}\n", "f.yaml:2: ${FG_SURELY_UNSET} inside { } or [ ] must be quoted, e.g. '${FG_SURELY_UNSET}': YAML reads its braces as the collection's"},
		{"env in flow list", minimal + "# it's {here}\nbypass:\n  tokens: [\"a\", 'b',\n    x-${FG_T:-d}, ${FG_U}]\n", "f.yaml:5: ${FG_T:-d} inside { } or [ ] must be quoted, e.g. '${FG_T:-d}': YAML reads its braces as the collection's"},
		{"env after another error", minimal + "rules:\n  - match: \"POST /login\"\n    policies: [login\nadmin:\n  token: ${FG_T:-}\n", "f.yaml:4: did not find expected ',' or ']'"},
		{"burst zero, window algorithm", minimal + "policies: {a: {algorithm: fixed-window, quota: 10, window: 1s, burst: 0}}\n", "f.yaml:2: policies.a.burst: applies to token-bucket and gcra only, not fixed-window (use a second, shorter policy for a burst limit)"},
		{"policies misspelt", minimal + "polices: {a: {quota: 1, window: 1s}}\nrules:\n  - {match: /, policies: a}\n",
			"f.yaml:2: polices: unknown field (did you mean \"policies\"?) (known: gateway, api, forward_auth, admin, envoy_rls, rlqs, store, policies, rules, skip, bypass, trusted_proxies, client_ip, identity, headers, shutdown_timeout, log, tracing, ops, database, tiers, listeners)\n" +
				"f.yaml:4: rules[0].policies[0]: unknown policy \"a\" (no policies are defined: is the policies: section missing or misspelt?)"},
		{"redis url with a fragment", "api: {listen: ':1'}\nstore: {type: redis, redis: {url: 'redis://:p@ss#word@127.0.0.1:6379'}}\n", "f.yaml:2: store.redis.url: holds '#' or '?': percent-encode them in a password (%23, %3F) (want redis://[user:password@]host:port[/db], or rediss:// for TLS)"},
		{"upstream password not shown", "gateway: {listen: ':1', upstream: 'ftp://u:secret@x'}\n", `f.yaml:1: gateway.upstream: want an http:// or https:// URL with a host, or "demo"; got "ftp://u:xxxxx@x"`},
		{"redis url without scheme", "api: {listen: ':1'}\nstore: {type: redis, redis: {url: 'localhost:6379'}}\n", "f.yaml:2: store.redis.url: unknown scheme \"localhost\" (want redis://[user:password@]host:port[/db], or rediss:// for TLS)"},
		{"bad indentation", minimal + "admin:\n  listen: ':2'\n token: x\n", "f.yaml:4: did not find expected key"},
		{"unclosed flow mapping", minimal + "admin: {listen: ':2'\nstore: {}\n", "f.yaml:2: did not find expected ',' or '}'"},
		{"burst zero", minimal + "policies: {a: {algorithm: gcra, quota: 10, window: 1s, burst: 0}}\n", "f.yaml:2: policies.a.burst: must be at least 1 (it is the bucket size): burst: 1 spaces requests evenly, like nginx's burst=0; leave it out for burst = quota"},
		{"two docs", minimal + "---\n" + minimal, "f.yaml:2: more than one YAML document; a configuration is one document"},
		{"wrong type", "api: [1, 2]\n", "f.yaml:1: api: want a mapping of fields, got a list"},
		{"bad int", minimal + "policies: {a: {quota: many, window: 1s}}\n", `f.yaml:2: policies.a.quota: want a whole number, got "many"`},
		{"missing window", minimal + "policies:\n  a:\n    quota: 3\n", "f.yaml:3: policies.a: window is required, e.g. window: 1m"},
		{"duplicate field", "api:\n  listen: ':1'\n  listen: ':2'\n", "f.yaml:3: api.listen: field given twice"},
		{"gateway shares", "gateway: {listen: ':8080', upstream: demo}\napi: {listen: ':8080'}\n", `f.yaml:2: api.listen: :8080 is also gateway.listen's address; the gateway needs a listener of its own`},
		{"forward auth untrusted", "forward_auth: {listen: ':1'}\n", "f.yaml:1: forward_auth: forward-auth answers only trusted proxies: list your proxy's address in trusted_proxies"},
		{"redis two sources", "api: {listen: ':1'}\nstore:\n  type: redis\n  redis:\n    url: redis://a:1\n    cluster: ['b:2']\n", "f.yaml:4: store.redis: give exactly one of url, cluster and sentinel (found 2)"},
		{"bad proxy", minimal + "trusted_proxies: [10.0.0.0/33]\n", `f.yaml:2: trusted_proxies[0]: bad address or CIDR "10.0.0.0/33"`},
		{"every proxy", minimal + "trusted_proxies: [10.0.0.0/8, '::/0']\n", `f.yaml:2: trusted_proxies[1]: "::/0" is every address: it would believe every client's X-Forwarded-For`},
		{"bypass everyone", minimal + "bypass: {cidrs: [0.0.0.0/0]}\n", `f.yaml:2: bypass.cidrs[0]: "0.0.0.0/0" is every address: it would limit no client at all`},
		{"rule name with an escape", minimal + "policies: {a: {quota: 1, window: 1s}}\nrules:\n  - {name: \"\\e[31mred\", match: /, policies: a}\n", `f.yaml:4: rules[0]: rule name "\x1b[31mred" holds a control character`},
		{"max delay, no throttle", minimal + "policies: {a: {quota: 1, window: 1s}}\nrules:\n  - {match: /, policies: a, max_delay: 1s}\n", `f.yaml:4: rules[0]: a max delay applies to throttle mode only`},
		{"impossible policy", minimal + "policies: {huge: {algorithm: gcra, quota: 9007199254740993, window: 1h}}\n", `f.yaml:2: policies.huge: capacity 9007199254740993 × window 1h0m0s exceeds 2^53 µs·units, beyond exact arithmetic; use a shorter window or the fixed-window algorithm`},
		{"bad name", minimal + "policies: {'a b': {quota: 1, window: 1s}}\n", "f.yaml:2: policies.a b: name has character ' ' at 1; use letters, digits, '_', '-' or '.'"},
		{"alias list", minimal + "skip: &a [*a]\n", "f.yaml:2: skip[0]: want a single value, got a list"},
		{"not utf-8", minimal + "policies: {p\xff\xfe: {quota: 1, window: 1s}}\n", "f.yaml:2: not valid UTF-8 (byte 0xff); save the file as UTF-8"},
		{"int out of range", minimal + "policies: {a: {quota: 99999999999999999999, window: 1s}}\n", "f.yaml:2: policies.a.quota: 99999999999999999999 is out of range (at most 9223372036854775807)"},
		{"duration out of range", minimal + "policies: {a: {quota: 1, window: 100000000h}}\n", `f.yaml:2: policies.a.window: duration "100000000h" is out of range (at most about 292 years)`},
		{"unreachable rule", gw + "policies: {a: {quota: 1, window: 1s}}\nrules:\n  - {match: /, policies: a}\n  - {match: POST /login, policies: a}\n", `f.yaml:5: rules[1].match: never reached through the gateway or forward-auth: rules[0] (match "/") matches every request this rule does; put the narrower rule first`},
		{"same pattern twice", gw + "policies: {a: {quota: 1, window: 1s}}\nrules:\n  - {name: x, match: /api/, policies: a}\n  - {name: y, match: \"/api/{rest...}\", policies: a}\n", `f.yaml:5: rules[1].match: never reached through the gateway or forward-auth: rules[0] (match "/api/") matches every request this rule does; the two match the same requests: remove or merge one`},
		{"rule under a skip", gw + "skip: [/internal/]\npolicies: {a: {quota: 1, window: 1s}}\nrules:\n  - {match: /internal/x, policies: a}\n  - {match: GET /internal/y, skip: true}\n", `f.yaml:5: rules[0].match: never reached through the gateway or forward-auth: skip[0] (match "/internal/") matches every request this rule does; skips are checked before every rule`},
		{"rule under a later skip rule", gw + "policies: {a: {quota: 1, window: 1s}}\nrules:\n  - {match: GET /healthz, policies: a}\n  - {match: /healthz, skip: true}\n", `f.yaml:4: rules[0].match: never reached through the gateway or forward-auth: rules[1], a skip rule, (match "/healthz") matches every request this rule does; skips are checked before every rule`},
		{"dup rule name", minimal + "policies: {a: {quota: 1, window: 1s}}\nrules:\n  - {name: x, match: /a, policies: a}\n  - {name: x, match: /b, policies: a}\n", `f.yaml:5: rules[1].name: rule name "x" is also rules[0]'s; names must be unique (they label metrics and the decision API)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseErr(t, tc.yaml); got != tc.want {
				t.Errorf("error:\n %s\nwant:\n %s", got, tc.want)
			}
		})
	}
}

// TestPolicyErrorsAreTheLibrarys: each invalid policy of TestParseErrors
// and testdata/bad.yaml, given to config and to floodgate.Policy.Validate,
// gets one message, the library's, at the field the library names.
func TestPolicyErrorsAreTheLibrarys(t *testing.T) {
	for _, tc := range []struct {
		yaml   string // the policy as written, named a (or "a b")
		policy floodgate.Policy
		field  string // where config reports it
	}{
		{"a: {algorithm: fixed-window, quota: 10, window: 1s, burst: 0}", floodgate.Policy{Name: "a", Algorithm: floodgate.FixedWindow, Quota: 10, Window: time.Second, Burst: 1}, "policies.a.burst"},
		{"a: {algorithm: gcra, quota: 9007199254740993, window: 1h}", floodgate.Policy{Name: "a", Algorithm: floodgate.GCRA, Quota: 9007199254740993, Window: time.Hour}, "policies.a"},
		{"'a b': {quota: 1, window: 1s}", floodgate.Policy{Name: "a b", Algorithm: floodgate.SlidingWindowCounter, Quota: 1, Window: time.Second}, "policies.a b"},
		{"a: {algorithm: gcra, quota: 5, window: 1s, burst: -1}", floodgate.Policy{Name: "a", Algorithm: floodgate.GCRA, Quota: 5, Window: time.Second, Burst: -1}, "policies.a.burst"},
		{"a: {quota: 5, window: 1s, burst: 3}", floodgate.Policy{Name: "a", Algorithm: floodgate.SlidingWindowCounter, Quota: 5, Window: time.Second, Burst: 3}, "policies.a.burst"},
		{"a: {quota: 0, window: 1s}", floodgate.Policy{Name: "a", Algorithm: floodgate.SlidingWindowCounter, Window: time.Second}, "policies.a.quota"},
		{"a: {quota: 1, window: 500us}", floodgate.Policy{Name: "a", Algorithm: floodgate.SlidingWindowCounter, Quota: 1, Window: 500 * time.Microsecond}, "policies.a.window"},
	} {
		var pe *floodgate.PolicyError
		if err := tc.policy.Validate(); !errors.As(err, &pe) {
			t.Fatalf("%+v: Validate = %v, want a *PolicyError", tc.policy, err)
		}
		msg := pe.Msg
		if pe.Field == "name" {
			msg = "name " + msg
		}
		want := fmt.Sprintf("f.yaml:2: %s: %s", tc.field, msg)
		if got := parseErr(t, minimal+"policies: {"+tc.yaml+"}\n"); got != want {
			t.Errorf("%s:\n got %s\nwant %s (the library's)", tc.yaml, got, want)
		}
	}
}

// TestPolicyFieldErrorsAtOnce: a policy wrong in quota, window and burst
// gets all three errors, each at its own line, not one per run.
func TestPolicyFieldErrorsAtOnce(t *testing.T) {
	got := parseErr(t, minimal+"policies:\n  a:\n    algorithm: gcra\n    quota: 0\n    window: -1s\n    burst: -2\n")
	want := "f.yaml:5: policies.a.quota: must be positive, got 0\n" +
		"f.yaml:6: policies.a.window: must be at least 1ms, got -1s\n" +
		"f.yaml:7: policies.a.burst: must not be negative, got -2"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestExpandEnv(t *testing.T) {
	t.Setenv("FG_A", "alpha")
	t.Setenv("FG_EMPTY", "")
	for in, want := range map[string]string{
		"plain":               "plain",
		"${FG_A}":             "alpha",
		"x-${FG_A}-y":         "x-alpha-y",
		"${FG_EMPTY}":         "",
		"${FG_EMPTY:-dflt}":   "dflt",
		"${FG_UNSET_X:-d}":    "d",
		"$$FG_A and $$":       "$FG_A and $",
		"cost $5":             "cost $5",
		"${FG_A}${FG_A}":      "alphaalpha",
		"${FG_UNSET_X:-a:-b}": "a:-b",
	} {
		got, err := expandEnv(in)
		if err != nil || got != want {
			t.Errorf("expandEnv(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"${FG_UNSET_X}", "${", "${1BAD}", "${}"} {
		if _, err := expandEnv(in); err == nil {
			t.Errorf("expandEnv(%q) succeeded", in)
		}
	}
}

func TestParseKey(t *testing.T) {
	got, err := ParseKey("{ip}|{route}|{header:x-region}|{api_key}|{api_key:authorization}|{user}|{tenant}|{method}|{host}|v1")
	if err != nil {
		t.Fatal(err)
	}
	want := []KeyPart{{KeyIP, ""}, {KeyRoute, ""}, {KeyHeader, "X-Region"}, {KeyAPIKey, ""}, {KeyAPIKey, "Authorization"}, {KeyUser, ""}, {KeyTenant, ""}, {KeyMethod, ""}, {KeyHost, ""}, {KeyLiteral, "v1"}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("part %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"", "{ip}||{route}", "{ip}{route}", "{header}", "{header:}", "{ip:x}", "a{b", "{unknown}", "{header:bad name}"} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) succeeded", bad)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v", err)
	}
}

func TestAliasesAndScalarsAsLists(t *testing.T) {
	c, err := Parse("f.yaml", []byte(`
api: {listen: ':0'}
policies:
  base: &b {quota: 10, window: 10s}
  copy: *b
rules:
  - {match: /x, policies: copy}
`))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := c.Policy("copy"); p.Quota != 10 || p.Window != 10*time.Second {
		t.Errorf("alias policy = %+v", p)
	}
	if c.Rules[0].Policies[0] != "copy" {
		t.Errorf("scalar list = %q", c.Rules[0].Policies)
	}
}

// TestManyAliases: aliases used many times side by side are as deep as one
// (each alias followed used to add a level for good, so about 60 uses
// failed with "nested too deeply").
func TestManyAliases(t *testing.T) {
	var b strings.Builder
	b.WriteString("api: {listen: ':0'}\npolicies:\n  base: {quota: 10, window: 10s}\nrules:\n  - {name: r0, match: /r0, policies: &pol [base]}\n")
	for i := 1; i < 100; i++ {
		fmt.Fprintf(&b, "  - {name: r%d, match: /r%d, policies: *pol}\n", i, i)
	}
	c, err := Parse("f.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Rules) != 100 || c.Rules[99].Policies[0] != "base" {
		t.Fatalf("rules: %d, last %+v", len(c.Rules), c.Rules[len(c.Rules)-1])
	}
}

// FuzzLoad feeds arbitrary files to the loader: it must never panic, and a
// file it accepts must yield policies that floodgate accepts too.
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"testdata/good.yaml", "testdata/bad.yaml", "../../../examples/quickstart.yaml"} {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(minimal + "policies: {a: &x {quota: 1, window: 1s}, b: *x}\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte(minimal + "skip: &a [*a, *a, *a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err != nil {
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("error is not a non-empty Errors: %v", err)
			}
			return
		}
		for _, p := range c.AllPolicies() {
			if err := p.Validate(); err != nil {
				t.Fatalf("accepted policy fails validation: %v", err)
			}
		}
		for i, r := range c.Rules {
			if r.Skip {
				continue
			}
			if _, err := ParseKey(r.Key); err != nil {
				t.Fatalf("accepted rule %d has bad key: %v", i, err)
			}
			if l := c.RuleLimits(i); len(l.Policies)+len(l.Concurrency) != len(r.Policies) {
				t.Fatalf("rule %d names a policy that was not compiled: %+v for %v", i, l, r.Policies)
			}
		}
	})
}

func TestExamplesAreValid(t *testing.T) {
	t.Setenv("FLOODGATE_ADMIN_TOKEN", "t")
	t.Setenv("REDIS_PASSWORD", "p")
	files, _ := filepath.Glob("../../../examples/*.yaml")
	more, _ := filepath.Glob("../../../examples/*/floodgate.yaml")
	files = append(files, more...)
	if len(files) < 5 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestRuleOrderAccepted: orders that the unreachable-rule check must let
// through.
func TestRuleOrderAccepted(t *testing.T) {
	for name, yaml := range map[string]string{
		"skip rule after a catch-all": gw + "policies: {a: {quota: 1, window: 1s}}\nrules:\n  - {match: /, policies: a}\n  - {match: GET /healthz, skip: true}\n",
		"narrow rule first":           gw + "policies: {a: {quota: 1, window: 1s}}\nrules:\n  - {match: POST /login, policies: a}\n  - {match: /, policies: a}\n",
		"decision API only":           minimal + "policies: {a: {quota: 1, window: 1s}}\nrules:\n  - {name: x, match: /, policies: a}\n  - {name: y, match: /, policies: a}\n",
	} {
		if _, err := Parse("f.yaml", []byte(yaml)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestEnvoyExample: examples/envoy/floodgate.yaml is valid, and reads its
// envoy_rls directory relative to itself.
func TestEnvoyExample(t *testing.T) {
	cfg, err := Load("../../../examples/envoy/floodgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if e := cfg.EnvoyRLS; e == nil || len(e.Limits.Domains) != 1 || e.Limits.Domains[0].Domain != "edge" || e.Headers != engine.Draft11 {
		t.Errorf("envoy_rls %+v", cfg.EnvoyRLS)
	}
}

// TestSampleRatioChecked: a sample ratio outside 0..1 is an error at its
// line, with tracing on or off.
func TestSampleRatioChecked(t *testing.T) {
	for _, y := range []string{"tracing: {sample_ratio: 2}\n", "tracing: {enabled: true, sample_ratio: -1}\n"} {
		if got := parseErr(t, "api: {listen: '127.0.0.1:0'}\n"+y); !strings.Contains(got, "f.yaml:2") || !strings.Contains(got, "tracing.sample_ratio: want a share from 0 to 1") {
			t.Errorf("%s: %s", y, got)
		}
	}
}

// TestNearCacheDefault: the Redis store's near cache is on unless a file
// turns it off with 0.
func TestNearCacheDefault(t *testing.T) {
	for _, tc := range []struct {
		field string
		want  int
	}{{"", DefaultNearCache}, {", near_cache: 0", 0}, {", near_cache: 500", 500}} {
		c, err := Parse("f.yaml", []byte("api: {listen: ':1'}\nstore: {type: redis, redis: {url: 'redis://127.0.0.1:1'"+tc.field+"}}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if c.Store.Redis.NearCache != tc.want {
			t.Errorf("store.redis {url%s}: near_cache %d, want %d", tc.field, c.Store.Redis.NearCache, tc.want)
		}
	}
}

// TestRedisInFlight: one call waits on Redis at a time unless the file
// says otherwise, within 1..64.
func TestRedisInFlight(t *testing.T) {
	for _, tc := range []struct {
		field string
		want  int
		err   string
	}{
		{"", DefaultRedisInFlight, ""},
		{", max_in_flight: 4", 4, ""},
		{", max_in_flight: 0", 0, "store.redis.max_in_flight: must be within 1..64, got 0"},
		{", max_in_flight: 65", 0, "store.redis.max_in_flight: must be within 1..64, got 65"},
	} {
		c, err := Parse("f.yaml", []byte("api: {listen: ':1'}\nstore: {type: redis, redis: {url: 'redis://127.0.0.1:1'"+tc.field+"}}\n"))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("store.redis {url%s}: error %v, want one with %q", tc.field, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("store.redis {url%s}: %v", tc.field, err)
		case tc.err == "" && c.Store.Redis.MaxInFlight != tc.want:
			t.Errorf("store.redis {url%s}: max_in_flight %d, want %d", tc.field, c.Store.Redis.MaxInFlight, tc.want)
		}
	}
}

// TestEnvoyRLSExposed: a network address that asks clients for no
// certificate is refused unless the file says the port is guarded.
func TestEnvoyRLSExposed(t *testing.T) {
	const refused = "is not a loopback address and asks clients for no certificate"
	for _, tc := range []struct{ rls, want string }{
		{"{listen: '0.0.0.0:8081', config: x}", refused},
		{"{listen: ':8081', config: x}", refused},
		{"{listen: '[::]:8081', config: x}", refused},
		{"{listen: '10.0.0.5:8081', config: x, tls: {cert_file: c, key_file: k}}", refused},
		{"{listen: '0.0.0.0:8081', config: x, unauthenticated: true}", ""},
		{"{listen: '0.0.0.0:8081', config: x, tls: {cert_file: c, key_file: k, client_ca_file: ca}}", ""},
		{"{listen: '127.0.0.1:8081', config: x}", ""},
		{"{listen: 'localhost:8081', config: x}", ""},
	} {
		got := parseErr(t, "envoy_rls: "+tc.rls+"\n")
		if tc.want != "" && !strings.Contains(got, tc.want) || tc.want == "" && strings.Contains(got, refused) {
			t.Errorf("%s: %q, want %q", tc.rls, got, tc.want)
		}
	}
}

// TestEnvoyXDS: envoy_rls.xds takes ratelimit's defaults, makes config
// optional, and refuses what could not connect.
func TestEnvoyXDS(t *testing.T) {
	cfg, err := Parse("f.yaml", []byte("envoy_rls: {listen: '127.0.0.1:0', xds: {server: 'eg:18001'}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if x := cfg.EnvoyRLS.XDS; x.NodeID != "default" || x.BackoffInitial.D() != time.Second || x.BackoffMax.D() != time.Minute || cfg.EnvoyRLS.Limits != nil {
		t.Errorf("defaults: %+v", x)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"envoy_rls: {listen: '127.0.0.1:0', xds: {node_id: n}}\n", "envoy_rls.xds.server: required"},
		{"envoy_rls: {listen: '127.0.0.1:0', xds: {server: eg}}\n", `want host:port, got "eg"`},
		{"envoy_rls: {listen: '127.0.0.1:0', xds: {server: 'eg:1', backoff_initial: 2m, backoff_max: 1m}}\n", "backoff_initial must be positive and at most backoff_max"},
		{"envoy_rls: {listen: '127.0.0.1:0', xds: {server: 'eg:1', tls: {cert_file: c}}}\n", "cert_file and key_file go together"},
		{"envoy_rls: {listen: '127.0.0.1:0', near_limit_ratio: 1.5, xds: {server: 'eg:1'}}\n", "envoy_rls.near_limit_ratio: want a ratio in (0, 1]"},
		{"envoy_rls: {listen: '127.0.0.1:0', post_charge: [''], xds: {server: 'eg:1'}}\n", "envoy_rls.post_charge: an empty domain"},
		{"envoy_rls: {listen: '127.0.0.1:0'}\n", "envoy_rls.config: required"},
	} {
		if got := parseErr(t, tc.yaml); !strings.Contains(got, tc.want) {
			t.Errorf("%s: %s, want %q", tc.yaml, got, tc.want)
		}
	}
}

// TestRedisDurability: off unless the file sets it; replicas ≥ 1 and a
// timeout shorter than the store's.
func TestRedisDurability(t *testing.T) {
	for _, tc := range []struct {
		field string
		want  *Durability
		err   string
	}{
		{"", nil, ""},
		{", durability: {replicas: 1, timeout: 100ms}", &Durability{Replicas: 1, Timeout: Duration(100 * time.Millisecond)}, ""},
		{", durability: {replicas: 0, timeout: 100ms}", nil, "store.redis.durability.replicas: must be at least 1, got 0"},
		{", durability: {replicas: 1, timeout: 1s}", nil, "store.redis.durability.timeout: must be positive and shorter than store.redis.timeout (1s), got 1s"},
		{", durability: {replicas: 1}", nil, "store.redis.durability.timeout: must be positive"},
	} {
		c, err := Parse("f.yaml", []byte("api: {listen: ':1'}\nstore: {type: redis, redis: {url: 'redis://127.0.0.1:1'"+tc.field+"}}\n"))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("store.redis {url%s}: error %v, want one with %q", tc.field, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("store.redis {url%s}: %v", tc.field, err)
		case tc.err == "" && (tc.want == nil) != (c.Store.Redis.Durability == nil),
			tc.err == "" && tc.want != nil && *tc.want != *c.Store.Redis.Durability:
			t.Errorf("store.redis {url%s}: durability %+v, want %+v", tc.field, c.Store.Redis.Durability, tc.want)
		}
	}
}

func TestCostHeaderName(t *testing.T) {
	got := parseErr(t, "policies: {p: {algorithm: gcra, quota: 1, window: 1s}}\nrules:\n  - {match: /, policies: [p], cost_header: \"X Tokens\"}\n")
	if want := `rules[0].cost_header: "X Tokens" is no header name`; !strings.Contains(got, want) {
		t.Fatalf("error %q, want it to contain %q", got, want)
	}
}

// TestCalendarPolicy: a fixed-window policy per calendar month in a zone,
// its window the nominal 30 days, and the calendar fields' errors.
func TestCalendarPolicy(t *testing.T) {
	c, err := Parse("f.yaml", []byte(minimal+`policies:
  tokens: {algorithm: fixed-window, quota: 1000000, calendar: month, zone: Europe/Berlin}
  weekly: {algorithm: fixed-window, quota: 10, calendar: week, first_day: Monday}
  bill: {algorithm: fixed-window, quota: 10, calendar: billing, anchor_day: 17}
`))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := c.Policy("tokens")
	if p.Calendar == nil || p.Calendar.Period != floodgate.Month || p.Calendar.Location.String() != "Europe/Berlin" || p.Window != 30*24*time.Hour {
		t.Fatalf("tokens: %+v (calendar %+v)", p, p.Calendar)
	}
	if w, _ := c.Policy("weekly"); w.Calendar.FirstDay != time.Monday || w.Window != 7*24*time.Hour {
		t.Fatalf("weekly: %+v", w.Calendar)
	}
	if b, _ := c.Policy("bill"); b.Calendar.AnchorDay != 17 {
		t.Fatalf("bill: %+v", b.Calendar)
	}
	for spec, want := range map[string]string{
		"{algorithm: fixed-window, quota: 1, calendar: month, zone: Mars/Olympus}": `policies.p.zone: unknown time zone "Mars/Olympus"`,
		"{algorithm: fixed-window, quota: 1, window: 1h, first_day: monday}":       "policies.p.first_day: applies to a calendar policy only",
		"{algorithm: fixed-window, quota: 1, calendar: fortnight}":                 `unknown period "fortnight"`,
		"{algorithm: gcra, quota: 1, calendar: day}":                               "a calendar applies to fixed-window only",
		"{algorithm: fixed-window, quota: 1, calendar: week, first_day: funday}":   `policies.p.first_day: unknown day "funday"`,
	} {
		if got := parseErr(t, minimal+"policies:\n  p: "+spec+"\n"); !strings.Contains(got, want) {
			t.Errorf("%s: error %q, want %q in it", spec, got, want)
		}
	}
}

// TestEveryAlgorithmParses: a policy's algorithm is any name of
// floodgate.Algorithms(), read through the library's own parser.
func TestEveryAlgorithmParses(t *testing.T) {
	for _, a := range floodgate.Algorithms() {
		c, err := Parse("f.yaml", []byte(minimal+"policies: {p: {algorithm: "+a.String()+", quota: 10, window: 1m}}\n"))
		if err != nil {
			t.Fatalf("%v: %v", a, err)
		}
		if p, _ := c.Policy("p"); p.Algorithm != a || p.Quota != 10 || p.Window != time.Minute {
			t.Errorf("%v: parsed to %+v", a, p)
		}
	}
	if got := parseErr(t, minimal+"policies: {p: {algorithm: anchored, quota: 1, window: 1s}}\n"); !strings.Contains(got, "token-bucket, gcra or anchored-window") {
		t.Errorf("unknown algorithm: %q, want every name listed", got)
	}
}
