package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
)

// envOf is a lookup over a list of NAME=value, as os.Environ gives.
func envOf(kv []string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for _, e := range kv {
			if n, v, _ := strings.Cut(e, "="); n == name {
				return v, true
			}
		}
		return "", false
	}
}

func parseEnv(t *testing.T, kv []string) (*rlEnv, *config.Config) {
	t.Helper()
	env, err := ratelimitEnv(envOf(kv), kv)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("(env)", env.yaml)
	if err != nil {
		t.Fatalf("%v\n%s", err, env.yaml)
	}
	return env, cfg
}

// TestRatelimitEnvEnvoyGateway: Envoy Gateway's variables (its defaults:
// ports 8080, 8081 and :19001) make the daemon configuration ratelimit
// would run.
func TestRatelimitEnvEnvoyGateway(t *testing.T) {
	certs := t.TempDir()
	for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
		os.WriteFile(filepath.Join(certs, f), nil, 0o600)
	}
	kv := egEnv(certs, "envoy-gateway:18001", "redis.redis.svc:6379", "", [3]string{"", "", ":19001"})
	kv = slices.DeleteFunc(kv, func(e string) bool {
		return strings.HasPrefix(e, "HOST=") || strings.HasPrefix(e, "PORT=") || strings.HasPrefix(e, "GRPC_HOST=") ||
			strings.HasPrefix(e, "GRPC_PORT=") || strings.HasPrefix(e, "CACHE_KEY_PREFIX=") || strings.HasPrefix(e, "XDS_CLIENT_BACKOFF")
	})
	kv = append(kv, "REDIS_AUTH=user:p@ss", "REDIS_TYPO=1", "KUBERNETES_SERVICE_HOST=10.0.0.1")
	env, cfg := parseEnv(t, kv)
	e := cfg.EnvoyRLS
	if e.Listen != "0.0.0.0:8081" || env.health != "0.0.0.0:8080" || !env.forceStart || env.needConfig {
		t.Errorf("listen %q, health %q, force %v, need %v", e.Listen, env.health, env.forceStart, env.needConfig)
	}
	if e.Config != "" || e.XDS == nil || e.XDS.Server != "envoy-gateway:18001" || e.XDS.NodeID != egNode ||
		e.XDS.BackoffInitial.D().String() != "10s" || e.XDS.BackoffMax.D().String() != "1m0s" {
		t.Errorf("xds %+v, config %q", e.XDS, e.Config)
	}
	if x := e.XDS.TLS; x == nil || x.CAFile != certs+"/ca.crt" || x.CertFile != certs+"/tls.crt" || x.KeyFile != certs+"/tls.key" {
		t.Errorf("xds tls %+v", x)
	}
	if e.TLS == nil || e.TLS.CertFile != certs+"/tls.crt" || e.TLS.ClientCAFile != certs+"/ca.crt" {
		t.Errorf("grpc tls %+v (GRPC_SERVER_TLS_CA_CERT: Envoy's client certificate is asked for)", e.TLS)
	}
	if r := cfg.Store.Redis; cfg.Store.Type != "redis" || r.URL != "redis://user:p%40ss@redis.redis.svc:6379" || r.NearCache != 0 {
		t.Errorf("store %+v", cfg.Store)
	}
	if cfg.Admin.Listen != ":19001" || cfg.Log.Level != slog.LevelInfo {
		t.Errorf("admin %q, log %v", cfg.Admin.Listen, cfg.Log.Level)
	}
	want := []string{"RUNTIME_IGNOREDOTFILES is ignored", "RUNTIME_WATCH_ROOT is ignored",
		"PROMETHEUS_MAPPER_YAML is ignored", "REDIS_TYPO is not a variable Floodgate knows"}
	got := strings.Join(env.warnings, "\n")
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("warnings lack %q:\n%s", w, got)
		}
	}
	if len(env.warnings) != len(want) {
		t.Errorf("%d warnings, want %d (USE_STATSD=false and KUBERNETES_* say nothing):\n%s", len(env.warnings), len(want), got)
	}
}

// TestRatelimitEnvStores: ratelimit's Redis types and files.
func TestRatelimitEnvStores(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "rl", "config"), 0o755)
	os.WriteFile(filepath.Join(dir, "rl", "config", "a.yaml"), []byte("domain: d\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]\n"), 0o644)
	files := []string{"RUNTIME_ROOT=" + dir, "RUNTIME_SUBDIRECTORY=rl", "GRPC_HOST=127.0.0.1"}
	_, cfg := parseEnv(t, append(files, "REDIS_SOCKET_TYPE=tcp", "REDIS_TYPE=cluster", "REDIS_URL=a:1,b:2", "REDIS_AUTH=pw", "LOCAL_CACHE_SIZE_IN_BYTES=1000"))
	if r := cfg.Store.Redis; !slices.Equal(r.Cluster, []string{"a:1", "b:2"}) || r.Password != "pw" || r.Username != "" || r.NearCache == 0 {
		t.Errorf("cluster: %+v", r)
	}
	if cfg.EnvoyRLS.Config != filepath.Join(dir, "rl", "config") || len(cfg.EnvoyRLS.Limits.Domains) != 1 {
		t.Errorf("files: %q", cfg.EnvoyRLS.Config)
	}
	if cfg.EnvoyRLS.DynamicMetadata || cfg.EnvoyRLS.LimitHeaders || cfg.EnvoyRLS.PostCharge != nil {
		t.Errorf("dynamic metadata %v, limit headers %v, post-charge %q without their variables", cfg.EnvoyRLS.DynamicMetadata, cfg.EnvoyRLS.LimitHeaders, cfg.EnvoyRLS.PostCharge)
	}
	_, cfg = parseEnv(t, append(files, "FLOODGATE_RLS_POST_CHARGE=default/eg/http, tokens-default"))
	if !slices.Equal(cfg.EnvoyRLS.PostCharge, []string{"default/eg/http", "tokens-default"}) {
		t.Errorf("FLOODGATE_RLS_POST_CHARGE: envoy_rls.post_charge %q", cfg.EnvoyRLS.PostCharge)
	}
	_, cfg = parseEnv(t, append(files, "RESPONSE_DYNAMIC_METADATA=true", "LIMIT_RESPONSE_HEADERS_ENABLED=true", "LIMIT_RESET_HEADER=RateLimit-Reset"))
	if !cfg.EnvoyRLS.DynamicMetadata || !cfg.EnvoyRLS.LimitHeaders {
		t.Errorf("RESPONSE_DYNAMIC_METADATA, LIMIT_RESPONSE_HEADERS_ENABLED: dynamic metadata %v, limit headers %v", cfg.EnvoyRLS.DynamicMetadata, cfg.EnvoyRLS.LimitHeaders)
	}
	_, cfg = parseEnv(t, append(files, "REDIS_SOCKET_TYPE=tcp", "REDIS_TYPE=SENTINEL", "REDIS_URL=mymaster,s1:26379,s2:26379", "REDIS_SENTINEL_AUTH=sp"))
	if s := cfg.Store.Redis.Sentinel; s == nil || s.Master != "mymaster" || !slices.Equal(s.Addrs, []string{"s1:26379", "s2:26379"}) || s.Password != "sp" {
		t.Errorf("sentinel: %+v", s)
	}
	_, cfg = parseEnv(t, append(files, "REDIS_URL=/run/redis.sock", "REDIS_TLS=false"))
	if cfg.Store.Redis.URL != "unix:///run/redis.sock" {
		t.Errorf("unix socket (ratelimit's default type): %q", cfg.Store.Redis.URL)
	}
	_, cfg = parseEnv(t, append(files, "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=r:6380", "REDIS_TLS=true", "LOG_LEVEL=trace"))
	if cfg.Store.Redis.URL != "rediss://r:6380" || cfg.Log.Level != slog.LevelDebug {
		t.Errorf("tls: %q, log %v", cfg.Store.Redis.URL, cfg.Log.Level)
	}
}

// TestRatelimitEnvGuarded: a gRPC port on the network without client
// certificates starts only when FLOODGATE_RLS_UNAUTHENTICATED says a mesh
// or NetworkPolicy guards it; loopback and mutual TLS need no word.
func TestRatelimitEnvGuarded(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "config"), 0o755)
	os.WriteFile(filepath.Join(dir, "config", "a.yaml"), []byte("domain: d\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]\n"), 0o644)
	base := []string{"RUNTIME_ROOT=" + dir, "RUNTIME_SUBDIRECTORY=", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=r:6379"}
	for _, host := range []string{"", "GRPC_HOST=0.0.0.0", "GRPC_HOST=10.0.0.5"} {
		kv := append(slices.Clone(base), host)
		if _, err := ratelimitEnv(envOf(kv), kv); err == nil || !strings.Contains(err.Error(), "FLOODGATE_RLS_UNAUTHENTICATED=true") {
			t.Errorf("%q without client certificates: %v, want refused", host, err)
		}
	}
	_, cfg := parseEnv(t, append(slices.Clone(base), "FLOODGATE_RLS_UNAUTHENTICATED=true"))
	if !cfg.EnvoyRLS.Unauthenticated || cfg.EnvoyRLS.Listen != "0.0.0.0:8081" {
		t.Errorf("opted in: unauthenticated %v on %s", cfg.EnvoyRLS.Unauthenticated, cfg.EnvoyRLS.Listen)
	}
	_, cfg = parseEnv(t, append(slices.Clone(base), "GRPC_HOST=127.0.0.1"))
	if cfg.EnvoyRLS.Unauthenticated {
		t.Errorf("loopback: unauthenticated set")
	}
}

// TestRatelimitEnvRefused: what Floodgate does not do stops the start
// with the variable's name, rather than answering differently.
func TestRatelimitEnvRefused(t *testing.T) {
	for _, kv := range []string{"SHADOW_MODE=true", "BACKEND_TYPE=memcache", "GRPC_UDS=/run/rl.sock", "MERGE_DOMAIN_CONFIG=true",
		"REDIS_TLS_CLIENT_CERT=/c", "LIMIT_RESET_HEADER=X-Reset", "CONFIG_TYPE=REST", "REDIS_TYPE=ring",
		"FORCE_START_WITHOUT_INITIAL_CONFIG=yes please", "PROMETHEUS_PATH=/stats", "REDIS_URL=127.0.0.1:6379"} {
		env := []string{kv, "USE_PROMETHEUS=true"}
		_, err := ratelimitEnv(envOf(env), env)
		name, _, _ := strings.Cut(kv, "=")
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want an error naming it", kv, err)
		}
	}
}

// TestRatelimitHealthcheck: /healthcheck is 503 before the first xDS
// snapshot without force start, 200 with it, and 503 once terminating.
func TestRatelimitHealthcheck(t *testing.T) {
	redis := testkit.Env(t, "FLOODGATE_TEST_REDIS")
	for _, force := range []bool{false, true} {
		kv := []string{"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "CONFIG_TYPE=GRPC_XDS_SOTW",
			"CONFIG_GRPC_XDS_SERVER_URL=127.0.0.1:1", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + redis}
		if force {
			kv = append(kv, "FORCE_START_WITHOUT_INITIAL_CONFIG=true")
		}
		env, err := ratelimitEnv(envOf(kv), kv)
		if err != nil {
			t.Fatal(err)
		}
		var logs testkit.Buffer // the xDS client logs while the test reads
		m, err := startRatelimit(env, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if line := "faces=[healthcheck] addr=" + m.healthAddr; !strings.Contains(logs.String(), line) {
			t.Errorf("start log has no %q:\n%s", line, logs.String())
		}
		want := 503
		if force {
			want = 200
		}
		if code, _ := httpStatus(t, "http://"+m.healthAddr+"/healthcheck"); code != want {
			t.Errorf("force %v, no snapshot: %d, want %d", force, code, want)
		}
		m.terminate()
		if code, _ := httpStatus(t, "http://"+m.healthAddr+"/healthcheck"); code != 503 {
			t.Errorf("force %v, terminating: %d, want 503", force, code)
		}
		if err := m.shutdown(); err != nil {
			t.Error(err)
		}
	}
}
