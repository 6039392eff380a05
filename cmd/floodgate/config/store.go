package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate/floodgate/engine"
)

// The values of store.type (StoreKinds).
const (
	StoreMemory = "memory"
	StoreRedis  = "redis"
)

// storeKind is one value of store.type, whose name is also the section
// under store that configures it, and that section's check (which fills
// its defaults). The daemon's server opens each
// kind (server/store.go, TestEveryStoreKindOpened).
type storeKind struct {
	name string
	// local: held in this process, so it needs no section of the store's
	// kind; capacity reductions may be kept in it whatever the store is.
	local bool
	check func(v *validator, s *Store)
}

// storeKinds are every kind of store, the default first.
var storeKinds = []storeKind{
	{name: StoreMemory, local: true, check: (*validator).memory},
	{name: StoreRedis, check: func(v *validator, s *Store) { v.redis(&s.Redis) }},
}

// StoreKinds returns the names store.type takes, the default first.
func StoreKinds() []string {
	names := make([]string, len(storeKinds))
	for i, k := range storeKinds {
		names[i] = k.name
	}
	return names
}

// findStoreKind returns the kind of that name.
func findStoreKind(name string) (storeKind, bool) {
	for _, k := range storeKinds {
		if k.name == name {
			return k, true
		}
	}
	return storeKind{}, false
}

// kindNames lists the kinds for an error message: "memory or redis".
func kindNames() string {
	names := StoreKinds()
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func (v *validator) store() {
	s := &v.cfg.Store
	if s.Type == "" {
		s.Type = DefaultStoreType
	}
	kind, known := findStoreKind(s.Type)
	if !known {
		v.fail("store.type", "unknown store %q (want %s)", s.Type, kindNames())
	}
	if !v.has("store.local_share") {
		s.LocalShare = 1
	} else if err := (engine.Rule{Name: "store", LocalShare: s.LocalShare}).Validate(); err != nil {
		v.fail("store.local_share", "%s", cause(err)) // every rule's share; the engine's check
	}
	for _, k := range storeKinds {
		if section := "store." + k.name; k.name != s.Type && v.has(section) {
			v.fail(section, "store.type is %q, so this section is unused; set store.type: %s", s.Type, k.name)
		}
	}
	if known {
		kind.check(v, s)
	}
}

// memory checks store.memory, filling its default.
func (v *validator) memory(s *Store) {
	if !v.has("store.memory.max_keys") {
		s.Memory.MaxKeys = DefaultMemoryMaxKeys
	} else if s.Memory.MaxKeys < 1 {
		v.fail("store.memory.max_keys", "must be at least 1, got %d", s.Memory.MaxKeys)
	}
}

// reductions checks where capacity reductions are kept (ops.reductions):
// in a kind of store held in this process, or in the store's own kind;
// the store's kind by default.
func (v *validator) reductions() {
	c := v.cfg
	if c.Ops.Reductions == "" {
		c.Ops.Reductions = c.Store.Type
		return
	}
	switch k, known := findStoreKind(c.Ops.Reductions); {
	case !known:
		v.fail("ops.reductions", "unknown backend %q (want %s)", c.Ops.Reductions, kindNames())
	case !k.local && k.name != c.Store.Type:
		v.fail("ops.reductions", "%s reductions need store.type %s (they use store.%s)", k.name, k.name, k.name)
	}
}

func (v *validator) redis(r *Redis) {
	n := 0
	if r.URL != "" {
		n++
		if err := checkRedisURL(r.URL); err != nil {
			v.fail("store.redis.url", "%v (want redis://[user:password@]host:port[/db], or rediss:// for TLS)", err)
		}
	}
	if len(r.Cluster) > 0 {
		n++
		v.hostPorts("store.redis.cluster", r.Cluster)
	}
	if r.Sentinel != nil {
		n++
		if r.Sentinel.Master == "" {
			v.fail("store.redis.sentinel.master", "required: the master's name as the Sentinels know it")
		}
		if len(r.Sentinel.Addrs) == 0 {
			v.fail("store.redis.sentinel.addrs", "required: at least one Sentinel host:port")
		}
		v.hostPorts("store.redis.sentinel.addrs", r.Sentinel.Addrs)
	}
	if n != 1 {
		v.fail("store.redis", "give exactly one of url, cluster and sentinel (found %d)", n)
	}
	if !v.has("store.redis.timeout") {
		r.Timeout = Duration(DefaultRedisTimeout)
	} else if r.Timeout <= 0 {
		v.fail("store.redis.timeout", "must be positive")
	}
	if !v.has("store.redis.prefix") {
		r.Prefix = DefaultRedisPrefix
	} else if strings.ContainsAny(r.Prefix, "{}") {
		v.fail("store.redis.prefix", "must not contain '{' or '}' (they would take the hash tag's place)")
	}
	if !v.has("store.redis.near_cache") {
		r.NearCache = DefaultNearCache
	} else if r.NearCache < 0 {
		v.fail("store.redis.near_cache", "must not be negative")
	}
	if !v.has("store.redis.max_in_flight") {
		r.MaxInFlight = DefaultRedisInFlight
	} else if r.MaxInFlight < 1 || r.MaxInFlight > 64 {
		v.fail("store.redis.max_in_flight", "must be within 1..64, got %d", r.MaxInFlight)
	}
	if d := r.Durability; d != nil {
		if d.Replicas < 1 {
			v.fail("store.redis.durability.replicas", "must be at least 1, got %d", d.Replicas)
		}
		if d.Timeout <= 0 || d.Timeout >= r.Timeout {
			v.fail("store.redis.durability.timeout", "must be positive and shorter than store.redis.timeout (%v), got %v", r.Timeout.D(), d.Timeout.D())
		}
	}
}

func (v *validator) hostPorts(field string, addrs []string) {
	for i, a := range addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			v.fail(fmt.Sprintf("%s[%d]", field, i), "want host:port, got %q", a)
		}
	}
}

// checkRedisURL checks the form of a Redis URL as the Redis client reads
// it: redis:// or rediss:// with a host and an optional database number,
// or unix:// with a socket path. Its errors never repeat the URL, which
// may hold a password.
func checkRedisURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("not a URL") // the parser's error would quote it, password and all
	}
	if u.Fragment != "" || u.RawQuery != "" || strings.ContainsAny(s, "#?") {
		// "redis://:p@ss#word@host" parses as host "ss" and a fragment:
		// the daemon would connect to the wrong server.
		return errors.New("holds '#' or '?': percent-encode them in a password (%23, %3F)")
	}
	switch u.Scheme {
	case "redis", "rediss":
		if u.Host == "" {
			return errors.New("no host")
		}
		if db := strings.TrimPrefix(u.Path, "/"); db != "" {
			if _, err := strconv.Atoi(db); err != nil {
				return fmt.Errorf("bad database number %q", db)
			}
		}
	case "unix":
		if u.Path == "" {
			return errors.New("no socket path")
		}
	default:
		return fmt.Errorf("unknown scheme %q", u.Scheme)
	}
	return nil
}

// Breaker configures the circuit breaker in front of the store
// (floodgate.Breaker).
type Breaker struct {
	// Threshold is the consecutive failed calls that open it; default 5.
	Threshold int `yaml:"threshold"`
	// Cooldown is how long it stays open before one call probes the
	// store; default 200ms.
	Cooldown Duration `yaml:"cooldown"`
}

// Defaults of the store's breaker (floodgate.DefaultBreakerThreshold and
// DefaultBreakerCooldown).
const (
	DefaultBreakerThreshold = 5
	DefaultBreakerCooldown  = 200 * time.Millisecond
)

func (v *validator) breaker() {
	b := &v.cfg.Store.Breaker
	if !v.has("store.breaker.threshold") {
		b.Threshold = DefaultBreakerThreshold
	} else if b.Threshold < 1 {
		v.fail("store.breaker.threshold", "must be at least 1, got %d", b.Threshold)
	}
	if !v.has("store.breaker.cooldown") {
		b.Cooldown = Duration(DefaultBreakerCooldown)
	} else if b.Cooldown <= 0 {
		v.fail("store.breaker.cooldown", "must be positive")
	}
}

// redacted is a URL as an error may show it: without its password, which
// configuration errors reach logs and the reload endpoint's answer with.
func redacted(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if strings.Contains(s, "@") {
			return "(a URL with credentials, not shown)"
		}
		return s
	}
	return u.Redacted()
}
