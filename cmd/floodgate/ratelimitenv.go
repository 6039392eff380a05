package main

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"gopkg.in/yaml.v3"
)

// rlEnv is a daemon configuration read from envoyproxy/ratelimit's
// environment variables, as Envoy Gateway's rate limit Deployment sets
// them (docs/ENVOY.md, "Envoy Gateway and AI Gateway", has the table).
type rlEnv struct {
	yaml []byte // the daemon configuration, for config.Parse
	// health is HOST:PORT, where /healthcheck answers.
	health string
	// forceStart: /healthcheck answers 200 before the first xDS snapshot
	// (FORCE_START_WITHOUT_INITIAL_CONFIG).
	forceStart bool
	// needConfig: /healthcheck answers 503 until rules are loaded
	// (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED).
	needConfig bool
	// warnings name the variables read but not acted on, and unknown ones.
	warnings []string
}

// rlPrefixes start the variables ratelimit could read: one of them that
// no table below names is warned about as unknown.
var rlPrefixes = []string{"CONFIG_", "GRPC_", "REDIS_", "RUNTIME_", "XDS_", "USE_", "PROMETHEUS_", "STATSD_",
	"MEMCACHE_", "TRACING_", "LIMIT_", "LOG_", "DEBUG_", "REDIS_PERSECOND", "STATS_", "OTEL_"}

// rlIgnored are variables Floodgate reads and does not act on, with why.
var rlIgnored = map[string]string{
	"DEBUG_HOST": "no debug listener", "DEBUG_PORT": "no debug listener",
	"GRPC_MAX_CONNECTION_AGE": "connections are not aged", "GRPC_MAX_CONNECTION_AGE_GRACE": "connections are not aged",
	"GRPC_CLIENT_TLS_SAN":                           "client certificates are checked against GRPC_CLIENT_TLS_CACERT only",
	"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL": "XDS_CLIENT_BACKOFF_* govern reconnection",
	"XDS_CLIENT_BACKOFF_RANDOM_FACTOR":              "the backoff waits a random time in [bound/2, bound]",
	"XDS_CLIENT_BACKOFF_JITTER":                     "the backoff is always jittered",
	"USE_STATSD":                                    "no statsd: USE_PROMETHEUS serves the metrics", "STATSD_HOST": "no statsd", "STATSD_PORT": "no statsd",
	"USE_DOG_STATSD": "no statsd", "USE_DOG_STATSD_MOGRIFIERS": "no statsd", "EXTRA_TAGS": "no statsd",
	"STATS_FLUSH_INTERVAL": "Prometheus is scraped, not flushed", "DISABLE_STATS": "USE_PROMETHEUS=false serves no metrics",
	"PROMETHEUS_MAPPER_YAML":                  "the ratelimit_service_* names and labels are built in",
	"RUNTIME_IGNOREDOTFILES":                  "files starting with a dot are always skipped",
	"RUNTIME_WATCH_ROOT":                      "the configuration directory itself is watched",
	"EXPIRATION_JITTER_MAX_SECONDS":           "keys expire with their window",
	"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "a refused request never spends quota",
	"REDIS_POOL_SIZE":                         "store.redis.max_in_flight bounds calls", "REDIS_PIPELINE_WINDOW": "decisions are batched by store.redis.max_in_flight",
	"REDIS_PIPELINE_LIMIT": "decisions are batched by store.redis.max_in_flight", "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION": "/readyz pings Redis",
	"REDIS_POOL_ON_EMPTY_BEHAVIOR": "calls wait for a free connection",
	"TRACING_ENABLED":              "no tracing", "TRACING_SERVICE_NAME": "no tracing", "TRACING_SERVICE_NAMESPACE": "no tracing",
	"TRACING_SERVICE_INSTANCE_ID": "no tracing", "TRACING_EXPORTER_PROTOCOL": "no tracing", "TRACING_SAMPLING_RATE": "no tracing",
	"OTEL_EXPORTER_OTLP_ENDPOINT": "no tracing",
	"MEMCACHE_HOST_PORT":          "no memcache backend", "MEMCACHE_MAX_IDLE_CONNS": "no memcache backend", "MEMCACHE_SRV": "no memcache backend",
	"MEMCACHE_SRV_REFRESH": "no memcache backend", "MEMCACHE_TLS": "no memcache backend", "MEMCACHE_TLS_CLIENT_CERT": "no memcache backend",
	"MEMCACHE_TLS_CLIENT_KEY": "no memcache backend", "MEMCACHE_TLS_CACERT": "no memcache backend",
	"MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION": "no memcache backend",
	"REDIS_PERSECOND_SOCKET_TYPE":             "REDIS_PERSECOND is not supported", "REDIS_PERSECOND_TYPE": "REDIS_PERSECOND is not supported",
	"REDIS_PERSECOND_URL": "REDIS_PERSECOND is not supported", "REDIS_PERSECOND_POOL_SIZE": "REDIS_PERSECOND is not supported",
	"REDIS_PERSECOND_AUTH": "REDIS_PERSECOND is not supported", "REDIS_PERSECOND_TLS": "REDIS_PERSECOND is not supported",
	"REDIS_PERSECOND_SENTINEL_AUTH": "REDIS_PERSECOND is not supported", "REDIS_PERSECOND_PIPELINE_WINDOW": "REDIS_PERSECOND is not supported",
	"REDIS_PERSECOND_PIPELINE_LIMIT": "REDIS_PERSECOND is not supported", "REDIS_PERSECOND_TIMEOUT": "REDIS_PERSECOND is not supported",
	"REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR": "REDIS_PERSECOND is not supported",
}

// rlRefused are variables whose value, when it asks for something
// Floodgate does not do, stops the start: serving different answers
// quietly would be worse.
var rlRefused = map[string]func(string) bool{
	"GRPC_UDS":            func(v string) bool { return v != "" },
	"BACKEND_TYPE":        func(v string) bool { return !strings.EqualFold(v, "redis") && v != "" },
	"REDIS_PERSECOND":     truthy,
	"SHADOW_MODE":         truthy,
	"QUOTA_MODE":          truthy,
	"MERGE_DOMAIN_CONFIG": truthy,
	// The daemon sends ratelimit's default header names only.
	"LIMIT_LIMIT_HEADER":                   func(v string) bool { return v != "" && v != "RateLimit-Limit" },
	"LIMIT_REMAINING_HEADER":               func(v string) bool { return v != "" && v != "RateLimit-Remaining" },
	"LIMIT_RESET_HEADER":                   func(v string) bool { return v != "" && v != "RateLimit-Reset" },
	"REDIS_TLS_CLIENT_CERT":                func(v string) bool { return v != "" },
	"REDIS_TLS_CLIENT_KEY":                 func(v string) bool { return v != "" },
	"REDIS_TLS_CACERT":                     func(v string) bool { return v != "" },
	"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION": truthy,
}

// rlRead are the variables the mapping acts on.
var rlRead = []string{"HOST", "PORT", "GRPC_HOST", "GRPC_PORT", "GRPC_SERVER_USE_TLS", "GRPC_SERVER_TLS_CERT", "GRPC_SERVER_TLS_KEY",
	"GRPC_CLIENT_TLS_CACERT", "GRPC_SERVER_TLS_CA_CERT", "LOG_LEVEL", "LOG_FORMAT", "CONFIG_TYPE", "FORCE_START_WITHOUT_INITIAL_CONFIG",
	"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "CONFIG_GRPC_XDS_NODE_ID", "CONFIG_GRPC_XDS_NODE_METADATA",
	"CONFIG_GRPC_XDS_SERVER_URL", "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "CONFIG_GRPC_XDS_SERVER_USE_TLS",
	"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
	"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "XDS_CLIENT_BACKOFF_MAX_INTERVAL",
	"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "USE_PROMETHEUS", "PROMETHEUS_ADDR", "PROMETHEUS_PATH", "RUNTIME_ROOT",
	"RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY", "LOCAL_CACHE_SIZE_IN_BYTES", "NEAR_LIMIT_RATIO", "CACHE_KEY_PREFIX",
	"REDIS_SOCKET_TYPE", "REDIS_TYPE", "REDIS_URL", "REDIS_AUTH", "REDIS_SENTINEL_AUTH", "REDIS_TLS", "REDIS_TIMEOUT",
	"RESPONSE_DYNAMIC_METADATA", "LIMIT_RESPONSE_HEADERS_ENABLED"}

func truthy(v string) bool { b, _ := strconv.ParseBool(v); return b }

// envReader reads variables with ratelimit's defaults and collects the
// first malformed value.
type envReader struct {
	lookup func(string) (string, bool)
	err    error
}

func (r *envReader) str(name, def string) string {
	if v, ok := r.lookup(name); ok && v != "" {
		return v
	}
	return def
}

func (r *envReader) flag(name string, def bool) bool {
	v, ok := r.lookup(name)
	if !ok || v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("%s=%q: want true or false", name, v)
	}
	return b
}

// pairs reads "k1=v1,k2=v2" (sep "=") or "k1:v1,k2:v2" (sep ":").
func (r *envReader) pairs(name, sep string) map[string]string {
	v := r.str(name, "")
	if v == "" {
		return nil
	}
	m := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(kv, sep)
		if !ok && r.err == nil {
			r.err = fmt.Errorf("%s: %q is not key%svalue", name, kv, sep)
		}
		m[strings.TrimSpace(k)] = strings.TrimSpace(val)
	}
	return m
}

// ratelimitEnv maps ratelimit's variables (environ lists every name set)
// to a daemon configuration. Errors: a malformed value, or one asking
// for what Floodgate does not do (rlRefused).
func ratelimitEnv(lookup func(string) (string, bool), environ []string) (*rlEnv, error) {
	r := &envReader{lookup: lookup}
	out := &rlEnv{}
	warnings, err := scanEnv(environ)
	if err != nil {
		return nil, err
	}
	out.warnings = warnings
	rls, err := rlsFromEnv(r)
	if err != nil {
		return nil, err
	}
	out.forceStart = r.flag("FORCE_START_WITHOUT_INITIAL_CONFIG", false)
	out.needConfig = r.flag("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", false)
	out.health = net.JoinHostPort(r.str("HOST", "0.0.0.0"), r.str("PORT", "8080"))
	admin := map[string]any{"listen": "off"}
	if r.flag("USE_PROMETHEUS", false) {
		admin["listen"] = r.str("PROMETHEUS_ADDR", ":9090")
		if p := r.str("PROMETHEUS_PATH", "/metrics"); p != "/metrics" {
			return nil, fmt.Errorf("PROMETHEUS_PATH=%q: metrics are served at /metrics only", p)
		}
	}
	store, err := redisFromEnv(r)
	if err != nil {
		return nil, err
	}
	cfg := map[string]any{
		"envoy_rls": rls, "admin": admin, "store": store,
		"log": map[string]any{"level": logLevel(r.str("LOG_LEVEL", "WARN")), "format": strings.ToLower(r.str("LOG_FORMAT", "text"))},
	}
	if r.err != nil {
		return nil, r.err
	}
	if err := rlsGuarded(r, rls); err != nil {
		return nil, err
	}
	if out.yaml, err = yaml.Marshal(cfg); err != nil {
		return nil, err
	}
	return out, nil
}

// scanEnv refuses a variable asking for what Floodgate does not do, and
// warns about the ones it ignores and the unknown ones of ratelimit's
// prefixes.
func scanEnv(environ []string) (warnings []string, err error) {
	for _, kv := range environ {
		name, val, _ := strings.Cut(kv, "=")
		if refuse, ok := rlRefused[name]; ok && refuse(val) {
			return nil, fmt.Errorf("%s=%s is not supported (docs/ENVOY.md, \"Envoy Gateway and AI Gateway\")", name, val)
		}
		switch why, ignored := rlIgnored[name]; {
		case ignored && !(name == "USE_STATSD" && !truthy(val)):
			warnings = append(warnings, fmt.Sprintf("%s is ignored: %s", name, why))
		case !ignored && !slices.Contains(rlRead, name) && rlRefused[name] == nil && hasAnyPrefix(name, rlPrefixes):
			warnings = append(warnings, fmt.Sprintf("%s is not a variable Floodgate knows: ignored", name))
		}
	}
	return warnings, nil
}

// rlsFromEnv is the envoy_rls block: the gRPC listener and its TLS, the
// rules' source (files or xDS), and ratelimit's response options.
func rlsFromEnv(r *envReader) (map[string]any, error) {
	rls := map[string]any{"listen": net.JoinHostPort(r.str("GRPC_HOST", "0.0.0.0"), r.str("GRPC_PORT", "8081"))}
	if v := r.str("NEAR_LIMIT_RATIO", ""); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("NEAR_LIMIT_RATIO=%q: not a number", v)
		}
		rls["near_limit_ratio"] = f
	}
	if v := r.str("FLOODGATE_RLS_POST_CHARGE", ""); v != "" {
		// Floodgate's own: the domains whose hits all count, "*" for all
		// (envoy_rls.post_charge), for Envoy Gateway's cost.response.
		var domains []string
		for _, d := range strings.Split(v, ",") {
			domains = append(domains, strings.TrimSpace(d))
		}
		rls["post_charge"] = domains
	}
	rls["dynamic_metadata"] = r.flag("RESPONSE_DYNAMIC_METADATA", false)
	rls["limit_headers"] = r.flag("LIMIT_RESPONSE_HEADERS_ENABLED", false)
	if r.flag("GRPC_SERVER_USE_TLS", false) {
		t := map[string]any{"cert_file": r.str("GRPC_SERVER_TLS_CERT", ""), "key_file": r.str("GRPC_SERVER_TLS_KEY", "")}
		// Envoy Gateway names its CA GRPC_SERVER_TLS_CA_CERT, which
		// ratelimit does not read; Floodgate asks Envoy for the client
		// certificate it presents (signed by that CA), so only Envoy
		// spends quota.
		if ca := r.str("GRPC_CLIENT_TLS_CACERT", r.str("GRPC_SERVER_TLS_CA_CERT", "")); ca != "" {
			t["client_ca_file"] = ca
		}
		rls["tls"] = t
	}
	switch ct := r.str("CONFIG_TYPE", "FILE"); strings.ToUpper(ct) {
	case "FILE":
		rls["config"] = filepath.Join(r.str("RUNTIME_ROOT", "/srv/runtime_data/current"), r.str("RUNTIME_SUBDIRECTORY", ""),
			r.str("RUNTIME_APPDIRECTORY", "config"))
	case "GRPC_XDS_SOTW":
		rls["xds"] = xdsFromEnv(r)
	default:
		return nil, fmt.Errorf("CONFIG_TYPE=%q: want FILE or GRPC_XDS_SOTW", ct)
	}
	return rls, nil
}

// rlsGuarded refuses a gRPC port on the network that asks clients for no
// certificate (envoy_rls.unauthenticated), unless
// FLOODGATE_RLS_UNAUTHENTICATED=true says a mesh or NetworkPolicy guards
// it. Envoy Gateway's Deployment asks Envoy for its certificate.
func rlsGuarded(r *envReader, rls map[string]any) error {
	if r.flag("FLOODGATE_RLS_UNAUTHENTICATED", false) {
		rls["unauthenticated"] = true
		return nil
	}
	host := r.str("GRPC_HOST", "0.0.0.0")
	if config.Loopback(net.JoinHostPort(host, "0")) {
		return nil
	}
	if t, ok := rls["tls"].(map[string]any); ok && t["client_ca_file"] != nil {
		return nil
	}
	return fmt.Errorf("GRPC_HOST=%s asks clients for no certificate: anyone reaching the port spends any descriptor's quota; "+
		"set GRPC_SERVER_USE_TLS with GRPC_CLIENT_TLS_CACERT (mutual TLS, as Envoy Gateway does), GRPC_HOST=127.0.0.1, "+
		"or FLOODGATE_RLS_UNAUTHENTICATED=true where a mesh or NetworkPolicy guards the port", host)
}

func hasAnyPrefix(s string, ps []string) bool {
	return slices.ContainsFunc(ps, func(p string) bool { return strings.HasPrefix(s, p) })
}

func xdsFromEnv(r *envReader) map[string]any {
	x := map[string]any{
		"server":  r.str("CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000"),
		"node_id": r.str("CONFIG_GRPC_XDS_NODE_ID", "default"),
		// ratelimit's defaults: 10s, then at most 60s.
		"backoff_initial": r.str("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "10s"),
		"backoff_max":     r.str("XDS_CLIENT_BACKOFF_MAX_INTERVAL", "60s"),
	}
	if md := r.pairs("CONFIG_GRPC_XDS_NODE_METADATA", "="); md != nil {
		x["node_metadata"] = md
	}
	if h := r.pairs("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", ":"); h != nil {
		x["headers"] = h
	}
	if v := r.str("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", ""); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil && r.err == nil {
			r.err = fmt.Errorf("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES=%q: not a number", v)
		}
		x["max_message_bytes"] = n
	}
	if r.flag("CONFIG_GRPC_XDS_SERVER_USE_TLS", false) {
		t := map[string]any{}
		for k, name := range map[string]string{"ca_file": "CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "cert_file": "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
			"key_file": "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "server_name": "CONFIG_GRPC_XDS_SERVER_TLS_SAN"} {
			if v := r.str(name, ""); v != "" {
				t[k] = v
			}
		}
		x["tls"] = t
	}
	return x
}

// redisFromEnv is the store: ratelimit always counts in Redis.
func redisFromEnv(r *envReader) (map[string]any, error) {
	addr := r.str("REDIS_URL", "/var/run/nutcracker/ratelimit.sock")
	user, pass, hasUser := strings.Cut(r.str("REDIS_AUTH", ""), ":")
	if !hasUser {
		user, pass = "", user
	}
	useTLS := r.flag("REDIS_TLS", false)
	redis := map[string]any{}
	if v := r.str("REDIS_TIMEOUT", ""); v != "" {
		redis["timeout"] = v
	}
	if p := r.str("CACHE_KEY_PREFIX", ""); p != "" {
		redis["prefix"] = p
	}
	if n, _ := strconv.Atoi(r.str("LOCAL_CACHE_SIZE_IN_BYTES", "0")); n == 0 {
		redis["near_cache"] = 0 // ratelimit's local cache of refused keys is off by default
	}
	socket := strings.ToLower(r.str("REDIS_SOCKET_TYPE", "unix"))
	switch typ := strings.ToUpper(r.str("REDIS_TYPE", "SINGLE")); {
	case typ == "SINGLE":
		u := &url.URL{Scheme: "redis", Host: addr}
		switch {
		case socket == "unix" && !strings.HasPrefix(addr, "/"):
			// ratelimit would dial a socket file of that name and fail.
			return nil, fmt.Errorf("REDIS_URL=%q is not a socket path, and REDIS_SOCKET_TYPE is unix (ratelimit's default): set REDIS_SOCKET_TYPE=tcp for host:port", addr)
		case socket == "unix":
			u = &url.URL{Scheme: "unix", Path: addr}
		case socket != "tcp":
			return nil, fmt.Errorf("REDIS_SOCKET_TYPE=%q: want tcp or unix", socket)
		case useTLS:
			u.Scheme = "rediss"
		}
		if pass != "" || user != "" {
			u.User = url.UserPassword(user, pass)
		}
		redis["url"] = u.String()
	case useTLS:
		return nil, fmt.Errorf("REDIS_TLS with REDIS_TYPE=%s is not supported: TLS is for a single Redis", typ)
	case typ == "CLUSTER":
		redis["cluster"] = strings.Split(addr, ",")
	case typ == "SENTINEL":
		parts := strings.Split(addr, ",")
		if len(parts) < 2 {
			return nil, fmt.Errorf("REDIS_URL: REDIS_TYPE=SENTINEL wants <master name>,<sentinel>[,<sentinel>…]")
		}
		redis["sentinel"] = map[string]any{"master": parts[0], "addrs": parts[1:], "password": r.str("REDIS_SENTINEL_AUTH", "")}
	default:
		return nil, fmt.Errorf("REDIS_TYPE=%q: want SINGLE, CLUSTER or SENTINEL", typ)
	}
	if _, single := redis["url"]; !single && (user != "" || pass != "") {
		redis["username"], redis["password"] = user, pass
	}
	return map[string]any{"type": config.StoreRedis, "redis": redis}, nil
}

// logLevel maps ratelimit's logrus levels to slog's.
func logLevel(l string) string {
	switch strings.ToLower(l) {
	case "trace", "debug":
		return "debug"
	case "info":
		return "info"
	case "warn", "warning":
		return "warn"
	default: // error, fatal, panic
		return "error"
	}
}
