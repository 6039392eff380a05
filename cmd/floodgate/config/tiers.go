package config

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/header"
)

// Database is the PostgreSQL that tiers.source postgres and the `floodgate
// keys` and `floodgate tiers` commands use.
type Database struct {
	// URL is a PostgreSQL connection string:
	// postgres://user:password@host:5432/db?sslmode=require, or key=value
	// pairs. Write ${FLOODGATE_DATABASE_URL} to keep it out of the file.
	URL string `yaml:"url"`
}

// Tiers says where API keys and their tiers come from (docs/TIERS.md).
// Rules opt in with their own tiers section.
type Tiers struct {
	// Source is "postgres" (the api_keys and tier_policies tables, behind a
	// cache) or "static" (Plans and Keys below). Required.
	Source string `yaml:"source"`
	// Cache configures the cache in front of PostgreSQL.
	Cache TierCache `yaml:"cache"`
	// Plans maps a tier name to policy names of the policies section; all
	// of a tier's policies apply at once. Static only.
	Plans map[string][]string `yaml:"plans"`
	// Keys are the API keys, as SHA-256 hashes. Static only.
	Keys []TierKey `yaml:"keys"`
}

// TierCache is the cache of tier.CacheOptions; zero values take its
// defaults.
type TierCache struct {
	TTL           Duration `yaml:"ttl"`            // default 60s
	NegativeTTL   Duration `yaml:"negative_ttl"`   // default 5s
	MaxEntries    int      `yaml:"max_entries"`    // default 100000
	MaxStale      Duration `yaml:"max_stale"`      // 0: no bound; negative: never stale
	QueryTimeout  Duration `yaml:"query_timeout"`  // default 2s
	RetryInterval Duration `yaml:"retry_interval"` // default 1s
}

// TierKey is one API key of a static source. The key itself never appears
// in the file: only its SHA-256, as `printf %s "$KEY" | sha256sum` prints it.
type TierKey struct {
	KeySHA256 string `yaml:"key_sha256"`
	Tenant    string `yaml:"tenant"`
	Tier      string `yaml:"tier"`
	Disabled  bool   `yaml:"disabled"`
}

// Hash returns KeySHA256 as bytes. Valid only after validation.
func (k TierKey) Hash() [32]byte {
	var h [32]byte
	hex.Decode(h[:], []byte(k.KeySHA256))
	return h
}

// RuleTiers makes a rule limit each request by the tier of its API key,
// after the rule's own policies (the IP guard).
type RuleTiers struct {
	// Partition is what tier limits are counted per: "tenant" (default;
	// a tenant's keys share its quota) or "key".
	Partition string `yaml:"partition"`
	// PerRoute counts this rule apart from other tiers rules; by default
	// rules whose tiers use the same policies share one count per tenant.
	PerRoute bool `yaml:"per_route"`
	// Header carries the API key; default identity.api_key_header.
	// "Authorization: Bearer <key>" is read when it is absent.
	Header string `yaml:"header"`
}

// TierPlans returns the static tiers with their compiled policies. Valid
// only after validation, and only for tiers.source static.
func (c *Config) TierPlans() map[string]Limits {
	if c.Tiers == nil {
		return nil
	}
	out := make(map[string]Limits, len(c.Tiers.Plans))
	for name, ps := range c.Tiers.Plans {
		out[name] = c.limits(ps)
	}
	return out
}

// UsesTiers reports whether any rule has a tiers section.
func (c *Config) UsesTiers() bool {
	for _, r := range c.Rules {
		if r.Tiers != nil && !r.Skip {
			return true
		}
	}
	return false
}

func (v *validator) tiers() {
	c := v.cfg
	if u := c.Database.URL; u != "" {
		if !postgresURL(u) {
			// The message does not repeat the URL: it may hold a password.
			v.fail("database.url", "not a PostgreSQL connection string (want postgres://user:password@host:5432/db)")
		}
	}
	for i := range c.Rules {
		v.ruleTiers(i)
	}
	t := c.Tiers
	if t == nil {
		return
	}
	switch t.Source {
	case "postgres":
		if c.Database.URL == "" {
			v.fail("tiers.source", "postgres needs database.url (e.g. url: ${FLOODGATE_DATABASE_URL})")
		}
		if len(t.Plans) > 0 {
			v.fail("tiers.plans", "plans are read from PostgreSQL with source postgres (set them with `floodgate tiers set`); remove this or use source: static")
		}
		if len(t.Keys) > 0 {
			v.fail("tiers.keys", "keys are read from PostgreSQL with source postgres (add them with `floodgate keys add`); remove this or use source: static")
		}
		v.tierCache()
	case "static":
		if v.has("tiers.cache") {
			v.fail("tiers.cache", "a static source needs no cache; remove this or use source: postgres")
		}
		v.staticTiers()
	case "":
		v.fail("tiers", "source is required: postgres or static")
	default:
		v.fail("tiers.source", "unknown source %q (want postgres or static)", t.Source)
	}
}

// ruleTiers checks rule i's tiers section and fills its defaults.
func (v *validator) ruleTiers(i int) {
	c := v.cfg
	f := fmt.Sprintf("rules[%d].tiers", i)
	if c.Rules[i].Tiers == nil && v.has(f) {
		// A bare "tiers:" asks for tiers with every default, like "tiers: {}".
		c.Rules[i].Tiers = &RuleTiers{}
	}
	r := c.Rules[i]
	if r.Tiers == nil || r.Skip {
		return
	}
	if c.Tiers == nil {
		v.fail(f, "needs a top-level tiers section saying where keys come from (source: postgres or static)")
	}
	switch r.Tiers.Partition {
	case "":
		c.Rules[i].Tiers.Partition = "tenant"
	case "tenant", "key":
	default:
		v.fail(f+".partition", "unknown partition %q (want tenant or key)", r.Tiers.Partition)
	}
	if r.Tiers.Header == "" {
		c.Rules[i].Tiers.Header = c.Identity.APIKeyHeader // defaulted already
	} else if !header.IsToken(r.Tiers.Header) {
		v.fail(f+".header", "%q is not a header name", r.Tiers.Header)
	}
}

func (v *validator) tierCache() {
	cc := v.cfg.Tiers.Cache
	for _, d := range []struct {
		name string
		val  Duration
	}{{"ttl", cc.TTL}, {"negative_ttl", cc.NegativeTTL}, {"query_timeout", cc.QueryTimeout}, {"retry_interval", cc.RetryInterval}} {
		if d.val < 0 {
			v.fail("tiers.cache."+d.name, "must not be negative")
		}
	}
	if cc.MaxEntries < 0 {
		v.fail("tiers.cache.max_entries", "must not be negative")
	}
}

func (v *validator) staticTiers() {
	c := v.cfg
	t := c.Tiers
	if len(t.Plans) == 0 {
		v.fail("tiers", "a static source needs plans: tier name → policy names")
	}
	for _, name := range sortedKeys(t.Plans) {
		f := "tiers.plans." + name
		ps := t.Plans[name]
		if len(ps) == 0 {
			v.fail(f, "a tier needs at least one policy")
			continue
		}
		v.tierName(f, name)
		ok := true
		for j, p := range ps {
			_, found := c.policies[p]
			if _, isCap := c.caps[p]; !found && !isCap {
				ok = false
				if _, defined := c.Policies[p]; !defined {
					v.fail(fmt.Sprintf("%s[%d]", f, j), "unknown policy %q%s", p, knownPolicies(p, c.Policies))
				}
			}
		}
		if l := c.limits(ps); ok {
			if err := floodgate.ValidateLimits(l.Policies, l.Concurrency); err != nil {
				v.failErr(f, err)
			}
		}
	}
	v.staticKeys()
}

// tierName checks a tier's name, which follows the rule of policy names.
func (v *validator) tierName(f, name string) {
	var pe *floodgate.PolicyError
	if err := (floodgate.Concurrency{Name: name, Max: 1}).Validate(); errors.As(err, &pe) {
		v.fail(f, "tier name %s", pe.Msg)
	}
}

func (v *validator) staticKeys() {
	t := v.cfg.Tiers
	seen := map[[32]byte]int{}
	for i, k := range t.Keys {
		f := fmt.Sprintf("tiers.keys[%d]", i)
		h, err := hex.DecodeString(k.KeySHA256)
		switch {
		case k.KeySHA256 == "":
			v.fail(f, "key_sha256 is required: the SHA-256 of the key in hex (printf %%s \"$KEY\" | sha256sum)")
		case err != nil || len(h) != 32:
			v.fail(f+".key_sha256", "want the key's SHA-256 as 64 hex digits (printf %%s \"$KEY\" | sha256sum), got %d characters%s", len(k.KeySHA256), notHex(k.KeySHA256))
		default:
			if j, dup := seen[k.Hash()]; dup {
				v.fail(f+".key_sha256", "the same key as tiers.keys[%d]", j)
			}
			seen[k.Hash()] = i
		}
		if k.Tenant == "" {
			v.fail(f, "tenant is required")
		}
		if k.Tier == "" {
			v.fail(f, "tier is required")
		} else if _, ok := t.Plans[k.Tier]; !ok {
			v.fail(f+".tier", "unknown tier %q%s (tiers.plans defines: %s)", k.Tier, suggest(k.Tier, sortedKeys(t.Plans)), strings.Join(sortedKeys(t.Plans), ", "))
		}
	}
}

// notHex explains a 64-character value that is not hex.
func notHex(s string) string {
	if len(s) != 64 {
		return ""
	}
	return " that are not all hex digits"
}

// postgresURL reports whether s has the form of a PostgreSQL connection
// string: a postgres:// or postgresql:// URL, or key=value pairs.
func postgresURL(s string) bool {
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		_, err := url.Parse(s)
		return err == nil
	}
	for _, kv := range strings.Fields(s) {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return false
		}
	}
	return s != ""
}
