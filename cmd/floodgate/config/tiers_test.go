package config

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
)

// sha of "fg_test_free", as `printf %s fg_test_free | sha256sum` prints it.
var freeHash = sha256Hex("fg_test_free")

func sha256Hex(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

const tiersBase = `api: {listen: ':0'}
policies:
  ip-guard: {quota: 100, window: 1m}
  free-minute: {quota: 2, window: 1m}
  pro-minute: {algorithm: gcra, quota: 5, window: 1m}
`

func TestTiersStatic(t *testing.T) {
	c, err := Parse("f.yaml", []byte(tiersBase+`identity: {api_key_header: X-Key}
tiers:
  source: static
  plans:
    free: [free-minute]
    pro: [pro-minute, ip-guard]
  keys:
    - {key_sha256: "`+strings.ToUpper(freeHash)+`", tenant: acme, tier: free}
    - {key_sha256: "`+sha256Hex("k2")+`", tenant: beta, tier: pro, disabled: true}
rules:
  - match: /api/
    policies: [ip-guard]
    tiers: {partition: key, per_route: true}
  - match: /v2/
    policies: ip-guard
    tiers:
`))
	if err != nil {
		t.Fatal(err)
	}
	plans := c.TierPlans()
	if len(plans) != 2 || len(plans["pro"].Policies) != 2 || plans["pro"].Policies[0].Algorithm != floodgate.GCRA || plans["free"].Policies[0].Quota != 2 || plans["free"].Policies[0].Window != time.Minute {
		t.Errorf("plans = %+v", plans)
	}
	keys := c.Tiers.Keys
	if len(keys) != 2 || keys[0].Hash() != sha256.Sum256([]byte("fg_test_free")) || keys[0].Tenant != "acme" || keys[0].Tier != "free" || keys[0].Disabled || !keys[1].Disabled {
		t.Errorf("keys = %+v", keys)
	}
	r0, r1 := c.Rules[0].Tiers, c.Rules[1].Tiers
	if r0.Partition != "key" || !r0.PerRoute || r0.Header != "X-Key" {
		t.Errorf("rules[0].tiers = %+v", r0)
	}
	if r1.Partition != "tenant" || r1.PerRoute || r1.Header != "X-Key" {
		t.Errorf("rules[1].tiers = %+v", r1)
	}
	if !c.UsesTiers() {
		t.Error("UsesTiers = false")
	}
}

func TestTiersPostgres(t *testing.T) {
	t.Setenv("FG_TEST_DB", "postgres://u:p@db:5432/fg?sslmode=disable")
	c, err := Parse("f.yaml", []byte(tiersBase+`database: {url: "${FG_TEST_DB}"}
tiers:
  source: postgres
  cache: {ttl: 30s, negative_ttl: 2s, max_entries: 500, max_stale: -1s, query_timeout: 1s, retry_interval: 3s}
rules:
  - {match: /api/, policies: [ip-guard], tiers: {header: Authorization}}
`))
	if err != nil {
		t.Fatal(err)
	}
	o := c.Tiers.Cache
	if o.TTL.D() != 30*time.Second || o.NegativeTTL.D() != 2*time.Second || o.MaxEntries != 500 || o.MaxStale.D() != -time.Second ||
		o.QueryTimeout.D() != time.Second || o.RetryInterval.D() != 3*time.Second {
		t.Errorf("cache options = %+v", o)
	}
	if c.Database.URL != "postgres://u:p@db:5432/fg?sslmode=disable" || c.Rules[0].Tiers.Header != "Authorization" {
		t.Errorf("database %q, rule tiers %+v", c.Database.URL, c.Rules[0].Tiers)
	}
}

func TestTiersErrors(t *testing.T) {
	rule := "rules:\n  - {match: /api/, policies: [ip-guard], tiers: {}}\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"rule without source", tiersBase + rule,
			"f.yaml:7: rules[0].tiers: needs a top-level tiers section saying where keys come from (source: postgres or static)"},
		{"no source", tiersBase + "tiers: {plans: {free: [free-minute]}}\n" + rule,
			"f.yaml:6: tiers: source is required: postgres or static"},
		{"unknown source", tiersBase + "tiers:\n  source: mysql\n" + rule,
			`f.yaml:7: tiers.source: unknown source "mysql" (want postgres or static)`},
		{"postgres without url", tiersBase + "tiers:\n  source: postgres\n" + rule,
			"f.yaml:7: tiers.source: postgres needs database.url (e.g. url: ${FLOODGATE_DATABASE_URL})"},
		{"postgres with plans", tiersBase + "database: {url: 'postgres://db/fg'}\ntiers:\n  source: postgres\n  plans: {free: [free-minute]}\n" + rule,
			"f.yaml:9: tiers.plans: plans are read from PostgreSQL with source postgres (set them with `floodgate tiers set`); remove this or use source: static"},
		{"postgres with keys", tiersBase + "database: {url: 'postgres://db/fg'}\ntiers:\n  source: postgres\n  keys:\n    - {key_sha256: '" + freeHash + "', tenant: a, tier: free}\n" + rule,
			"f.yaml:9: tiers.keys: keys are read from PostgreSQL with source postgres (add them with `floodgate keys add`); remove this or use source: static"},
		{"bad database url", tiersBase + "database: {url: 'postgres://db:notaport/fg'}\n",
			"f.yaml:6: database.url: not a PostgreSQL connection string (want postgres://user:password@host:5432/db)"},
		{"negative ttl", tiersBase + "database: {url: 'postgres://db/fg'}\ntiers:\n  source: postgres\n  cache: {ttl: -1s}\n" + rule,
			"f.yaml:9: tiers.cache.ttl: must not be negative"},
		{"static cache", tiersBase + "tiers:\n  source: static\n  cache: {ttl: 1s}\n  plans: {free: [free-minute]}\n" + rule,
			"f.yaml:8: tiers.cache: a static source needs no cache; remove this or use source: postgres"},
		{"unknown plan policy", tiersBase + "tiers:\n  source: static\n  plans:\n    free: [free-minut]\n" + rule,
			`f.yaml:9: tiers.plans.free[0]: unknown policy "free-minut" (did you mean "free-minute"?) (defined: free-minute, ip-guard, pro-minute)`},
		{"key of unknown tier", tiersBase + "tiers:\n  source: static\n  plans: {free: [free-minute]}\n  keys:\n    - {key_sha256: '" + freeHash + "', tenant: acme, tier: pro}\n" + rule,
			`f.yaml:10: tiers.keys[0].tier: unknown tier "pro" (tiers.plans defines: free)`},
		{"bad hash", tiersBase + "tiers:\n  source: static\n  plans: {free: [free-minute]}\n  keys:\n    - {key_sha256: 'fg_live_secret', tenant: acme, tier: free}\n" + rule,
			`f.yaml:10: tiers.keys[0].key_sha256: want the key's SHA-256 as 64 hex digits (printf %s "$KEY" | sha256sum), got 14 characters`},
		{"hash not hex", tiersBase + "tiers:\n  source: static\n  plans: {free: [free-minute]}\n  keys:\n    - {key_sha256: '" + strings.Repeat("z", 64) + "', tenant: acme, tier: free}\n" + rule,
			`f.yaml:10: tiers.keys[0].key_sha256: want the key's SHA-256 as 64 hex digits (printf %s "$KEY" | sha256sum), got 64 characters that are not all hex digits`},
		{"same key twice", tiersBase + "tiers:\n  source: static\n  plans: {free: [free-minute]}\n  keys:\n    - {key_sha256: '" + freeHash + "', tenant: a, tier: free}\n    - {key_sha256: '" + freeHash + "', tenant: b, tier: free}\n" + rule,
			"f.yaml:11: tiers.keys[1].key_sha256: the same key as tiers.keys[0]"},
		{"bad partition", tiersBase + "tiers:\n  source: static\n  plans: {free: [free-minute]}\nrules:\n  - {match: /api/, policies: [ip-guard], tiers: {partition: user}}\n",
			`f.yaml:10: rules[0].tiers.partition: unknown partition "user" (want tenant or key)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseErr(t, tc.yaml); got != tc.want {
				t.Errorf("error:\n %s\nwant:\n %s", got, tc.want)
			}
		})
	}
}

// The Redis store holds concurrent-requests slots as leases, so the
// policies are accepted with it like with the memory store; they compile
// to caps, not rate policies.
func TestConcurrentRequestsWithRedis(t *testing.T) {
	c, err := Parse("f.yaml", []byte(`gateway: {listen: ':0', upstream: demo}
store:
  type: redis
  redis: {url: "redis://127.0.0.1:6379/0"}
policies:
  inflight: {quota: 4, unit: concurrent-requests}
rules:
  - {match: /upload, policies: [inflight]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if l := c.RuleLimits(0); len(l.Policies) != 0 || len(l.Concurrency) != 1 || l.Concurrency[0] != (floodgate.Concurrency{Name: "inflight", Max: 4}) {
		t.Errorf("limits = %+v, want the one cap inflight of 4", l)
	}
}
