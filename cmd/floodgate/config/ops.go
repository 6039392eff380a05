package config

import (
	"fmt"
	"net/url"
	"slices"
)

// Ops configures the operations features: abuse detection, the alert
// webhook, top offenders, the dashboard and temporary capacity reductions
// (docs/OPERATIONS.md).
type Ops struct {
	// Abuse is the detection every rule gets unless it has its own abuse
	// section. On by default: 100 limited requests of one key within 1m.
	Abuse Abuse `yaml:"abuse"`
	// Webhook receives every abuse alert as a JSON POST; off when URL is
	// empty.
	Webhook Webhook `yaml:"webhook"`
	// RawKeys shows partition keys as they are in alerts, logs, the top
	// offenders and metrics; by default only their fingerprints.
	RawKeys bool `yaml:"raw_keys"`
	// FingerprintSecret keys the fingerprints (an HMAC-SHA-256), so that
	// they cannot be reversed by hashing every address; give every replica
	// the same one (e.g. "${FLOODGATE_FINGERPRINT_SECRET}") for fingerprints
	// that agree across replicas and restarts. Default: a random secret
	// per process.
	FingerprintSecret string `yaml:"fingerprint_secret"`
	// Reductions is where capacity reductions are kept, a kind of store
	// (StoreKinds): "memory" (this process) or "redis" (every replica
	// sharing store.redis, so only with store.type redis); default the
	// store's type.
	Reductions string `yaml:"reductions"`
}

// Abuse says when limited requests of one key are abuse, and what then.
type Abuse struct {
	// Off switches detection off (for one rule, or by default).
	Off bool `yaml:"off"`
	// Threshold is the limited requests within Window that raise an
	// alert; default 100.
	Threshold int `yaml:"threshold"`
	// Window is the sliding span; default 1m.
	Window Duration `yaml:"window"`
	// Block, when set, refuses the key on the rule for that long after an
	// alert, with 429 abnormal-usage-detected.
	Block Duration `yaml:"block"`
	// Key is the part of the rule's key template to count by, e.g. "{ip}"
	// for a rule keyed "{ip}|{route}"; default the whole partition key.
	Key string `yaml:"key"`
}

// Webhook is where abuse alerts are POSTed.
type Webhook struct {
	// URL is an http or https URL.
	URL string `yaml:"url"`
	// Headers are sent with each POST, e.g. Authorization: "Bearer ${TOKEN}".
	Headers map[string]string `yaml:"headers"`
	// Timeout bounds one attempt; default 5s.
	Timeout Duration `yaml:"timeout"`
	// Attempts is the most tries per alert; default 4.
	Attempts int `yaml:"attempts"`
}

// AbuseFor returns the abuse settings of rule i: its own section, else
// ops.abuse.
func (c *Config) AbuseFor(i int) Abuse {
	if a := c.Rules[i].Abuse; a != nil {
		return *a
	}
	return c.Ops.Abuse
}

// AbuseKeyPart returns the index of abuse.key within rule i's key template,
// or -1 for the whole partition key.
func (c *Config) AbuseKeyPart(i int) int {
	a := c.AbuseFor(i)
	if a.Key == "" {
		return -1
	}
	parts, err := ParseKey(c.Rules[i].Key)
	if err != nil {
		return -1
	}
	want, err := ParseKey(a.Key)
	if err != nil || len(want) != 1 {
		return -1
	}
	return slices.Index(parts, want[0])
}

func (v *validator) ops() {
	c := v.cfg
	check := func(f string, a Abuse) {
		if a.Threshold < 0 {
			v.fail(f+".threshold", "must not be negative")
		}
		if a.Window < 0 {
			v.fail(f+".window", "must not be negative")
		}
		if a.Block < 0 {
			v.fail(f+".block", "must not be negative")
		}
	}
	check("ops.abuse", c.Ops.Abuse)
	for i := range c.Rules {
		f := fmt.Sprintf("rules[%d].abuse", i)
		if c.Rules[i].Abuse != nil {
			check(f, *c.Rules[i].Abuse)
		} else {
			f = "ops.abuse"
		}
		if c.Rules[i].Skip || c.AbuseFor(i).Key == "" {
			continue
		}
		if c.AbuseKeyPart(i) < 0 {
			v.fail(f+".key", "%q is not one part of rule %q's key %q", c.AbuseFor(i).Key, c.Rules[i].Name, c.Rules[i].Key)
		}
	}
	if u := c.Ops.Webhook.URL; u != "" {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			v.fail("ops.webhook.url", "%q is not an http or https URL", redacted(u))
		}
	}
	if c.Ops.Webhook.Timeout < 0 {
		v.fail("ops.webhook.timeout", "must not be negative")
	}
	if c.Ops.Webhook.Attempts < 0 {
		v.fail("ops.webhook.attempts", "must not be negative")
	}
	v.reductions()
}
