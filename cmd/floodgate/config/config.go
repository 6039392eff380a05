package config

import (
	"log/slog"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
)

// Default values of fields left out of the file (docs/CONFIG.md lists them
// all).
const (
	DefaultAdminListen     = "127.0.0.1:9090"
	DefaultStoreType       = StoreMemory
	DefaultRedisTimeout    = time.Second
	DefaultRedisPrefix     = "fg:"
	DefaultNearCache       = 10_000
	DefaultRedisInFlight   = 1
	DefaultMemoryMaxKeys   = 1_000_000
	DefaultKey             = "{ip}"
	DefaultAPIKeyHeader    = "X-API-Key"
	DefaultUserHeader      = "X-User-ID"
	DefaultTenantHeader    = "X-Tenant-ID"
	DefaultBypassHeader    = "X-Bypass-Token"
	DefaultMaxCost         = 1_000_000
	DefaultMaxBatch        = 100
	DefaultMaxKeyLength    = 1024
	DefaultShutdownTimeout = 10 * time.Second
	DefaultUpstreamTimeout = 30 * time.Second
	DefaultWarnAt          = 0.9
	// Demo is the Gateway.Upstream value that starts the built-in demo
	// upstream in the same process.
	Demo = "demo"
	// Off as a listen address switches the admin listener off.
	Off = "off"
)

// Config is one parsed and validated configuration file. Fields mirror the
// YAML keys (snake_case there); defaults are filled in by Load.
type Config struct {
	// File is the path the configuration was read from ("" for Parse
	// without a name).
	File string `yaml:"-"`

	// Gateway, API and ForwardAuth are the three faces; nil means off. At
	// least one must be on.
	Gateway     *Gateway     `yaml:"gateway"`
	API         *API         `yaml:"api"`
	ForwardAuth *ForwardAuth `yaml:"forward_auth"`
	// Admin serves /metrics, /healthz and /readyz; on by default at
	// DefaultAdminListen.
	Admin Admin `yaml:"admin"`
	// EnvoyRLS is Envoy's rate limit service (gRPC); nil means off
	// (envoy.go).
	EnvoyRLS *EnvoyRLS `yaml:"envoy_rls"`
	// RLQS is Envoy's rate limit quota service (gRPC); nil means off
	// (rlqs.go).
	RLQS *RLQS `yaml:"rlqs"`

	Store Store `yaml:"store"`
	// Policies are the named quotas rules refer to.
	Policies map[string]PolicySpec `yaml:"policies"`
	// Rules are tried in order; the first whose Match fits a request
	// applies.
	Rules []Rule `yaml:"rules"`
	// Skip lists patterns never limited (checked before every rule).
	Skip []string `yaml:"skip"`
	// Bypass lets trusted tokens and networks through.
	Bypass Bypass `yaml:"bypass"`
	// TrustedProxies are the CIDRs or addresses whose forwarding headers are
	// believed (REQUIREMENTS K2).
	TrustedProxies []string `yaml:"trusted_proxies"`
	// ClientIP says which forwarding headers name the client.
	ClientIP ClientIP `yaml:"client_ip"`
	// Identity names the headers behind the {user}, {tenant} and {api_key}
	// key parts.
	Identity Identity `yaml:"identity"`
	// Headers selects the rate-limit response fields.
	Headers Headers `yaml:"headers"`
	// ShutdownTimeout bounds a graceful shutdown; default 10s.
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
	Log             Log      `yaml:"log"`
	// Tracing exports a span per decision over OTLP (tracing.go).
	Tracing Tracing `yaml:"tracing"`
	// Ops configures abuse detection, the alert webhook, the dashboard
	// and capacity reductions (ops.go).
	Ops Ops `yaml:"ops"`
	// Database is the PostgreSQL of tiers.source postgres (tiers.go).
	Database Database `yaml:"database"`
	// Tiers says where API keys and their tiers come from; nil when no
	// rule limits by tier (tiers.go).
	Tiers *Tiers `yaml:"tiers"`
	// Listeners bounds every listener's connections and requests, and
	// holds their TLS and Host allow-list (security.go).
	Listeners Listeners `yaml:"listeners"`

	// policies holds the compiled Policies, filled by validation.
	policies map[string]floodgate.Policy
	caps     map[string]floodgate.Concurrency // policies of unit concurrent-requests
}

// Gateway is the reverse proxy face.
type Gateway struct {
	// Listen is the address, e.g. ":8080". Required.
	Listen string `yaml:"listen"`
	// Upstream is the URL requests are proxied to ("http://app:3000"), or
	// "demo" for the built-in demo upstream. Required.
	Upstream string `yaml:"upstream"`
	// Timeout bounds the wait for the upstream's response headers; default
	// 30s. Bodies stream without a limit.
	Timeout Duration `yaml:"timeout"`
	// FlushInterval is how often a streamed response is flushed to the
	// client; 0 flushes as the upstream's Content-Type asks (immediately for
	// text/event-stream), a negative value after every write.
	FlushInterval Duration `yaml:"flush_interval"`
	// UploadTimeout bounds reading a whole request, headers and body;
	// default 60s, 0 for none.
	UploadTimeout Duration `yaml:"upload_timeout"`
	// WriteTimeout bounds writing a whole response, streams included;
	// default 5m, 0 for none (endless event streams).
	WriteTimeout Duration `yaml:"write_timeout"`
	// Routes send matching requests to other upstreams (routes.go);
	// the rest go to Upstream.
	Routes []Route `yaml:"routes"`
}

// API is the decision API face (/v1/check, /v1/limits).
type API struct {
	// Listen is the address, e.g. ":8081"; may equal ForwardAuth.Listen or
	// Admin.Listen to share one listener. Required.
	Listen string `yaml:"listen"`
	// MaxCost is the largest cost one check may ask for; default 1,000,000.
	MaxCost int64 `yaml:"max_cost"`
	// MaxBatch is the most checks in one batch; default 100.
	MaxBatch int `yaml:"max_batch"`
	// MaxKeyLength is the longest key in bytes; default 1024. A longer
	// key is refused with 400.
	MaxKeyLength int `yaml:"max_key_length"`
	// Callers are who may use the API, each with its secret, scopes and
	// rules (security.go). With none, the API listens on loopback only.
	Callers []Caller `yaml:"callers"`
}

// ForwardAuth is the face answering nginx auth_request, Traefik ForwardAuth
// and Caddy forward_auth subrequests (/v1/auth, /v1/auth/nginx).
type ForwardAuth struct {
	// Listen is the address; may equal API.Listen or Admin.Listen. Required.
	Listen string `yaml:"listen"`
}

// Admin is the operations listener.
type Admin struct {
	// Listen is the address; default 127.0.0.1:9090, "off" for none.
	Listen string `yaml:"listen"`
	// Token, when set, is required as "Authorization: Bearer <token>" (or
	// as the password of Basic authentication, for a browser) on every
	// admin endpoint but /healthz and /readyz, and on DELETE
	// /v1/limits/{key}.
	Token string `yaml:"token"`
	// ReadToken, when set, opens the read-only endpoints (/metrics, the
	// dashboard and its data, top offenders, alerts and reductions) and
	// nothing else; it needs Token set too.
	ReadToken string `yaml:"read_token"`
}

// Store says where counters live.
type Store struct {
	// Type is a kind of store (StoreKinds): "memory" (default: one
	// process) or "redis" (shared).
	Type string `yaml:"type"`
	// FailureMode is what rules answer while the store fails, unless a rule
	// sets its own: "fail-closed" (default), "fail-open" or "fail-to-local".
	FailureMode floodgate.FailureMode `yaml:"failure_mode"`
	// LocalShare scales quotas under fail-to-local (e.g. 1/replicas);
	// default 1.
	LocalShare float64 `yaml:"local_share"`
	Memory     Memory  `yaml:"memory"`
	Redis      Redis   `yaml:"redis"`
	// Breaker stops asking a failing store (store.go).
	Breaker Breaker `yaml:"breaker"`
}

// Memory configures the in-process store.
type Memory struct {
	// MaxKeys bounds the keys held; default 1,000,000.
	MaxKeys int `yaml:"max_keys"`
}

// Redis configures the Redis store. Exactly one of URL, Cluster and
// Sentinel is set.
type Redis struct {
	// URL is a standalone server: redis://[user:password@]host:port/db, or
	// rediss:// for TLS.
	URL string `yaml:"url"`
	// Cluster lists Redis Cluster seed addresses (host:port).
	Cluster []string `yaml:"cluster"`
	// Sentinel finds the master through Sentinels.
	Sentinel *Sentinel `yaml:"sentinel"`
	// Username and Password authenticate Cluster and Sentinel-found
	// servers (a URL carries its own).
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// Timeout bounds one decision; default 1s, above the slowest healthy
	// calls of a saturated host (docs/OPERATIONS.md, "Store outages").
	Timeout Duration `yaml:"timeout"`
	// Prefix starts every key name; default "fg:".
	Prefix string `yaml:"prefix"`
	// NearCache is how many denied keys are answered locally until their
	// Retry-After (default DefaultNearCache, a few MB at most); 0 is off.
	NearCache int `yaml:"near_cache"`
	// MaxInFlight is how many calls, each carrying the decisions queued
	// while the calls before it were answered, may wait on Redis at once;
	// default DefaultRedisInFlight, 1..64.
	MaxInFlight int `yaml:"max_in_flight"`
	// Durability, if set, makes every call wait until Replicas replicas
	// have its writes (WAIT), or fail: a failover then loses no decision
	// Redis answered (docs/REDIS.md, "Failover"). Off by default.
	Durability *Durability `yaml:"durability"`
}

// Durability is redisstore.WithDurability's two figures.
type Durability struct {
	// Replicas is how many replicas must confirm; ≥ 1.
	Replicas int `yaml:"replicas"`
	// Timeout bounds the wait; > 0 and shorter than the store's timeout.
	Timeout Duration `yaml:"timeout"`
}

// Sentinel locates a Redis master.
type Sentinel struct {
	Master   string   `yaml:"master"`
	Addrs    []string `yaml:"addrs"`
	Password string   `yaml:"password"` // the Sentinels' own password
}

// PolicySpec is one named policy as written in the file.
type PolicySpec struct {
	// Algorithm: fixed-window, sliding-window-log, sliding-window-counter
	// (default), token-bucket, gcra or anchored-window (any
	// floodgate.ParseAlgorithm name).
	Algorithm floodgate.Algorithm `yaml:"algorithm"`
	// Quota is units per Window; required, > 0.
	Quota int64 `yaml:"quota"`
	// Window, e.g. "1m"; required except for concurrent-requests.
	Window Duration `yaml:"window"`
	// Burst is the bucket size of token-bucket and gcra; default Quota.
	Burst int64 `yaml:"burst"`
	// Unit: requests (default), content-bytes (floodgate.Unit), or
	// concurrent-requests, which makes the policy a floodgate.Concurrency.
	Unit string `yaml:"unit"`
	// Calendar makes a fixed-window policy count per calendar period (day,
	// week, month, year or billing; floodgate.Calendar); window is then
	// its nominal length and may be left out.
	Calendar string `yaml:"calendar"`
	// Zone is the calendar's IANA time zone, e.g. Europe/Berlin; default UTC.
	Zone string `yaml:"zone"`
	// FirstDay is a calendar week's first day, e.g. monday; default sunday.
	FirstDay string `yaml:"first_day"`
	// AnchorDay is the day of the month a billing period starts on, 1–31.
	AnchorDay int `yaml:"anchor_day"`
}

// Rule limits the requests matching its pattern.
type Rule struct {
	// Name labels the rule in metrics, logs and the decision API; default
	// the Match pattern. Unique.
	Name string `yaml:"name"`
	// Match is a pattern "[METHOD ][HOST]/[PATH]" in http.ServeMux syntax;
	// required.
	Match string `yaml:"match"`
	// Key is a template of "|"-separated parts: {ip}, {route}, {method},
	// {host}, {header:Name}, {api_key}, {api_key:Header}, {user},
	// {tenant}, or literal text. Default "{ip}".
	Key string `yaml:"key"`
	// Policies names the policies that all apply; required unless Skip.
	Policies []string `yaml:"policies"`
	// Cost charges each matching request; default 1.
	Cost int64 `yaml:"cost"`
	// CostHeader names the upstream's response header or trailer that
	// reports the request's actual cost (e.g. X-Tokens-Used): the gateway
	// removes it and settles Cost with it (httplimit.Rule.CostHeader).
	CostHeader string `yaml:"cost_header"`
	// Mode: enforce (default), shadow or throttle.
	Mode engine.Mode `yaml:"mode"`
	// MaxDelay bounds the wait of throttle mode; required with it.
	MaxDelay Duration `yaml:"max_delay"`
	// FailureMode overrides Store.FailureMode for this rule; Load sets
	// the store's when the rule gives none.
	FailureMode floodgate.FailureMode `yaml:"failure_mode"`
	// LocalShare overrides Store.LocalShare for this rule, the share of
	// each quota and cap enforced in memory under fail-to-local; Load
	// sets the store's when the rule gives none.
	LocalShare float64 `yaml:"local_share"`
	// Lease bounds how long an in-flight slot of a crashed replica is
	// held in a shared store; default 1m (engine.Rule.Lease).
	Lease Duration `yaml:"lease"`
	// Skip never limits matching requests (checked before all rules).
	Skip bool `yaml:"skip"`
	// Abuse overrides ops.abuse for this rule.
	Abuse *Abuse `yaml:"abuse"`
	// Tiers, when set, further limits each request by the tier of its API
	// key (httplimit.Rule.Plan), after Policies (tiers.go).
	Tiers *RuleTiers `yaml:"tiers"`

	line int // where the rule starts in the file
}

// Bypass lets trusted callers through unlimited (REQUIREMENTS K5).
type Bypass struct {
	// Header carries a token; default X-Bypass-Token.
	Header string `yaml:"header"`
	// Tokens are accepted bypass tokens; use ${ENV} for them.
	Tokens []string `yaml:"tokens"`
	// CIDRs are client networks never limited.
	CIDRs []string `yaml:"cidrs"`
}

// ClientIP configures client address resolution behind TrustedProxies.
type ClientIP struct {
	// Headers believed from a trusted proxy, in order of preference:
	// x-forwarded-for (default), forwarded, x-real-ip, cf-connecting-ip.
	Headers []string `yaml:"headers"`
	// IPv6Prefix, when set (1–128), keys IPv6 clients by that prefix
	// (e.g. 64) instead of by address.
	IPv6Prefix int `yaml:"ipv6_prefix"`
}

// Identity names the request headers behind key parts. {user} and
// {tenant} are read only from requests whose peer is a trusted proxy: an
// auth layer in front of Floodgate sets them, and a client cannot.
type Identity struct {
	APIKeyHeader string `yaml:"api_key_header"` // default X-API-Key
	UserHeader   string `yaml:"user_header"`    // default X-User-ID
	TenantHeader string `yaml:"tenant_header"`  // default X-Tenant-ID
}

// Headers selects the rate-limit fields on responses.
type Headers struct {
	// Style: both (default), draft11, legacy or none.
	Style engine.HeaderStyle `yaml:"style"`
	// Reset is X-RateLimit-Reset's form: epoch (default) or delta.
	Reset string `yaml:"reset"`
	// WarnAt sends X-RateLimit-Warning once this share of a quota is used;
	// default 0.9, negative for never.
	WarnAt float64 `yaml:"warn_at"`
}

// Log configures the daemon's structured log.
type Log struct {
	// Level: debug, info (default), warn or error (slog.Level's names).
	Level slog.Level `yaml:"level"`
	// Format: text (default) or json.
	Format string `yaml:"format"`
	// RefusalInterval is the least time between two log records of one
	// key's refusals; the later record counts those left out. Default
	// 10s; 0 for the default.
	RefusalInterval Duration `yaml:"refusal_interval"`
	// Access logs one INFO record per gateway request ("request": method,
	// path without its query, status, duration, rule, client fingerprint);
	// default off.
	Access bool `yaml:"access"`
}

// Policy returns the compiled policy of that name.
func (c *Config) Policy(name string) (floodgate.Policy, bool) {
	p, ok := c.policies[name]
	return p, ok
}

// Limits are the compiled policies of a rule or a tier: its rate
// policies, and its concurrent-requests policies as caps, in the order
// they are listed.
type Limits struct {
	Policies    []floodgate.Policy
	Concurrency []floodgate.Concurrency
}

// RuleLimits returns the compiled limits of rule i.
func (c *Config) RuleLimits(i int) Limits { return c.limits(c.Rules[i].Policies) }

// limits compiles a list of policy names.
func (c *Config) limits(names []string) Limits {
	var l Limits
	for _, n := range names {
		if p, ok := c.policies[n]; ok {
			l.Policies = append(l.Policies, p)
		} else if k, ok := c.caps[n]; ok {
			l.Concurrency = append(l.Concurrency, k)
		}
	}
	return l
}

// AllPolicies returns every compiled rate policy, sorted by name.
func (c *Config) AllPolicies() []floodgate.Policy {
	out := make([]floodgate.Policy, 0, len(c.policies))
	for _, n := range sortedKeys(c.policies) {
		out = append(out, c.policies[n])
	}
	return out
}

// Duration is a time.Duration written as in Go ("1m30s", "500ms") or with a
// "d" suffix for days ("1d").
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
