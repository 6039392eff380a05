package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Defaults of the listeners section.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second // every listener but the gateway's
	DefaultWriteTimeout      = 30 * time.Second // every listener but the gateway's
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxConnections    = 10_000
	DefaultUploadTimeout     = 60 * time.Second // the gateway's ReadTimeout
	DefaultGatewayWrite      = 5 * time.Minute  // the gateway's WriteTimeout
	DefaultRefusalInterval   = 10 * time.Second
)

// Scopes a caller of the decision API may hold.
const (
	ScopeCheck = "check" // POST /v1/check
	ScopeRead  = "read"  // GET /v1/limits/{key}
	ScopeReset = "reset" // DELETE /v1/limits/{key}
)

// Caller is one client of the decision API.
type Caller struct {
	// Name labels the caller in logs; required, unique.
	Name string `yaml:"name"`
	// The secret, sent as "Authorization: Bearer <secret>": exactly one of
	// Secret (write "${ENV}"), SecretFile (a file holding it; surrounding
	// white space is dropped) and SecretSHA256 (its SHA-256 in hex, as
	// `printf %s "$SECRET" | sha256sum` prints it). Only the hash is kept.
	Secret       string `yaml:"secret"`
	SecretFile   string `yaml:"secret_file"`
	SecretSHA256 string `yaml:"secret_sha256"`
	// Scopes are what it may do: check, read, reset; default [check].
	Scopes []string `yaml:"scopes"`
	// Rules are the rule names it may check, peek at and reset; ["*"] for
	// any rule and any list of policies. Required.
	Rules []string `yaml:"rules"`
	// KeyPrefixes, when set, are the only starts of keys it may use, e.g.
	// "tenant-a:"; every key otherwise.
	KeyPrefixes []string `yaml:"key_prefixes"`

	hash [sha256.Size]byte
}

// Hash returns the SHA-256 of the caller's secret.
func (c *Caller) Hash() [sha256.Size]byte { return c.hash }

// Listeners bounds every listener (gateway, API, forward-auth, admin,
// envoy_rls).
type Listeners struct {
	// ReadHeaderTimeout bounds reading a request's headers; default 10s.
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request on the API, forward-auth
	// and admin listeners; default 30s (the gateway: gateway.upload_timeout).
	ReadTimeout Duration `yaml:"read_timeout"`
	// WriteTimeout bounds writing a response on the API, forward-auth and
	// admin listeners; default 30s (the gateway: gateway.write_timeout).
	WriteTimeout Duration `yaml:"write_timeout"`
	// IdleTimeout closes a keep-alive connection idle that long; default 2m.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// MaxHeaderBytes bounds a request's header block; default 65536.
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// MaxConnections is the most open connections per listener. At the
	// cap an HTTP listener closes its connection idle longest for a new
	// one; when all are busy, more wait to be accepted. Default 10,000.
	MaxConnections int `yaml:"max_connections"`
	// AllowedHosts are the Host values the API, forward-auth and admin
	// listeners answer besides IP addresses, "localhost" and their listen
	// host (against DNS rebinding); ["*"] for any.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// TLS, when set, serves every listener over TLS.
	TLS *TLS `yaml:"tls"`
	// GRPC bounds the gRPC listeners further (grpc.go).
	GRPC GRPC `yaml:"grpc"`
}

// TLS is a listener's certificate, reloaded when its files change.
type TLS struct {
	CertFile string `yaml:"cert_file"` // PEM chain; required
	KeyFile  string `yaml:"key_file"`  // PEM private key; required
	// ClientCAFile, when set, asks every client for a certificate signed
	// by one of these CAs (mutual TLS).
	ClientCAFile string `yaml:"client_ca_file"`
}

func (v *validator) security() {
	c := v.cfg
	l := &c.Listeners
	dur := func(field string, d *Duration, def time.Duration) {
		switch {
		case !v.has(field):
			*d = Duration(def)
		case *d < 0:
			v.fail(field, "must not be negative")
		}
	}
	dur("listeners.read_header_timeout", &l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	dur("listeners.read_timeout", &l.ReadTimeout, DefaultReadTimeout)
	dur("listeners.write_timeout", &l.WriteTimeout, DefaultWriteTimeout)
	dur("listeners.idle_timeout", &l.IdleTimeout, DefaultIdleTimeout)
	if g := c.Gateway; g != nil {
		dur("gateway.upload_timeout", &g.UploadTimeout, DefaultUploadTimeout)
		dur("gateway.write_timeout", &g.WriteTimeout, DefaultGatewayWrite)
	}
	dur("log.refusal_interval", &c.Log.RefusalInterval, DefaultRefusalInterval)
	if c.Log.RefusalInterval == 0 {
		c.Log.RefusalInterval = Duration(DefaultRefusalInterval)
	}
	if !v.has("listeners.max_header_bytes") {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	} else if l.MaxHeaderBytes < 4096 || l.MaxHeaderBytes > 16<<20 {
		v.fail("listeners.max_header_bytes", "must be within 4096..16777216, got %d", l.MaxHeaderBytes)
	}
	if !v.has("listeners.max_connections") {
		l.MaxConnections = DefaultMaxConnections
	} else if l.MaxConnections < 1 {
		v.fail("listeners.max_connections", "must be at least 1, got %d", l.MaxConnections)
	}
	for i, h := range l.AllowedHosts {
		if h != "*" && !validHostname(strings.TrimPrefix(h, "*.")) {
			v.fail(fmt.Sprintf("listeners.allowed_hosts[%d]", i), "%q is not a host name (or \"*\", or \"*.example.com\")", h)
		}
	}
	if t := l.TLS; t != nil {
		v.tlsFiles(t)
	}
	v.grpc()
	if c.Admin.ReadToken != "" && c.Admin.Token == "" {
		v.fail("admin.read_token", "needs admin.token too: without it every admin endpoint is open anyway")
	}
	if c.Admin.ReadToken != "" && c.Admin.ReadToken == c.Admin.Token {
		v.fail("admin.read_token", "must differ from admin.token")
	}
	if c.API != nil {
		v.callers(c.API.Callers)
	}
}

func (v *validator) tlsFiles(t *TLS) {
	for _, f := range []struct{ field, path string }{
		{"listeners.tls.cert_file", t.CertFile}, {"listeners.tls.key_file", t.KeyFile}, {"listeners.tls.client_ca_file", t.ClientCAFile},
	} {
		if f.path == "" {
			if !strings.HasSuffix(f.field, "client_ca_file") {
				v.fail(f.field, "required with listeners.tls")
			}
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			v.fail(f.field, "%v", err)
		}
	}
}

func (v *validator) callers(cs []Caller) {
	names := map[string]bool{}
	for i := range cs {
		c := &cs[i]
		f := fmt.Sprintf("api.callers[%d]", i)
		switch {
		case c.Name == "":
			v.fail(f+".name", "required: who this caller is, for logs")
		case names[c.Name]:
			v.fail(f+".name", "%q is the name of another caller", c.Name)
		}
		names[c.Name] = true
		v.secret(f, c)
		if len(c.Scopes) == 0 {
			c.Scopes = []string{ScopeCheck}
		}
		for j, s := range c.Scopes {
			if s != ScopeCheck && s != ScopeRead && s != ScopeReset {
				v.fail(fmt.Sprintf("%s.scopes[%d]", f, j), "unknown scope %q (want check, read or reset)", s)
			}
		}
		if len(c.Rules) == 0 {
			v.fail(f+".rules", "required: the rules this caller may use, or [\"*\"] for any")
		}
		for j, r := range c.Rules {
			if r != "*" && !slices.ContainsFunc(v.cfg.Rules, func(x Rule) bool { return x.Name == r }) {
				v.fail(fmt.Sprintf("%s.rules[%d]", f, j), "no rule is named %q", r)
			}
		}
		for j, p := range c.KeyPrefixes {
			if p == "" {
				v.fail(fmt.Sprintf("%s.key_prefixes[%d]", f, j), "empty prefix (leave key_prefixes out for every key)")
			}
		}
	}
}

// secret reads a caller's secret from where it is given and keeps only
// its hash.
func (v *validator) secret(f string, c *Caller) {
	n := 0
	for _, s := range []string{c.Secret, c.SecretFile, c.SecretSHA256} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		v.fail(f, "give exactly one of secret, secret_file and secret_sha256 (found %d; is an environment variable empty?)", n)
		return
	}
	secret := c.Secret
	switch {
	case c.SecretFile != "":
		b, err := os.ReadFile(c.SecretFile)
		if err != nil {
			v.fail(f+".secret_file", "%v", err)
			return
		}
		secret = strings.TrimSpace(string(b))
	case c.SecretSHA256 != "":
		h, err := hex.DecodeString(c.SecretSHA256)
		if err != nil || len(h) != sha256.Size {
			v.fail(f+".secret_sha256", "want 64 hex digits (printf %%s \"$SECRET\" | sha256sum)")
			return
		}
		copy(c.hash[:], h)
		return
	}
	if len(secret) < 16 {
		v.fail(f, "the secret is %d bytes long; use at least 16 random bytes (openssl rand -hex 32)", len(secret))
		return
	}
	c.hash = sha256.Sum256([]byte(secret))
	c.Secret = "" // kept only as its hash
}
