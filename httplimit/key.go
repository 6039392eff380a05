package httplimit

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/floodgate/floodgate/pattern"
	"github.com/floodgate/floodgate/secret"
)

// Info is what the middleware knows of a request when a KeyPart runs.
type Info struct {
	Rule     string // the matched rule's name
	Route    string // the matched rule's pattern, e.g. "POST /login"
	ClientIP string // the client address key (see package clientip), "" if unknown
}

// KeyPart returns one part of a partition key (REQUIREMENTS K1); "" means
// the request lacks it. A rule's key joins its parts with "|"; what an
// absent part does is the rule's choice (Rule.Missing).
type KeyPart func(r *http.Request, info Info) string

// ClientIP keys by the client address, believing forwarding headers only
// from trusted proxies (K2).
func ClientIP() KeyPart { return func(_ *http.Request, in Info) string { return in.ClientIP } }

// Route keys by the matched rule's pattern, so separate routes get separate
// counters (K4).
func Route() KeyPart { return func(_ *http.Request, in Info) string { return in.Route } }

// Method keys by the request method, upper-cased: patterns match methods
// without regard to case, so "post" must not be a partition of its own.
func Method() KeyPart {
	return func(r *http.Request, _ Info) string { return strings.ToUpper(r.Method) }
}

// Host keys by the request's host, lower-cased and without a port.
func Host() KeyPart {
	return func(r *http.Request, _ Info) string { return strings.ToLower(pattern.HostOnly(r.Host)) }
}

// Header keys by a request header's value, as sent.
func Header(name string) KeyPart {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request, _ Info) string { return r.Header.Get(name) }
}

// APIKey keys by the API key in the first of the named headers that
// carries one: "Authorization" stands for the token of its Bearer scheme
// (RFC 6750), any other name for the header's whole value. So
// APIKey("X-API-Key") reads only X-API-Key, APIKey("X-API-Key",
// "Authorization") also takes a Bearer token, and APIKey() is
// APIKey("Authorization"). The key is the first 16 hex digits of the
// secret's SHA-256 (as tier.Hash.ID), never the secret itself, so stores,
// logs and metrics never hold it. A request with no key gets "" (see
// Rule.Missing).
func APIKey(headers ...string) KeyPart {
	if len(headers) == 0 {
		headers = []string{"Authorization"}
	}
	names := make([]string, len(headers))
	for i, h := range headers {
		names[i] = http.CanonicalHeaderKey(h)
	}
	return func(r *http.Request, _ Info) string {
		for _, name := range names {
			v := r.Header.Get(name)
			if name == "Authorization" {
				v, _ = BearerToken(r)
			}
			if v != "" {
				return secret.ID(v)
			}
		}
		return ""
	}
}

// BearerToken returns the token of an "Authorization: Bearer <token>"
// header; the scheme name is case-insensitive (RFC 9110 §11.1).
func BearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimLeft(token, " ")
	return token, token != ""
}

// FromContext keys by a value the application put in the request context,
// such as the authenticated user or tenant ID; fn returns "" when absent.
func FromContext(fn func(ctx context.Context) string) KeyPart {
	return func(r *http.Request, _ Info) string { return fn(r.Context()) }
}

// Literal is a fixed part, e.g. to share one partition across routes.
func Literal(s string) KeyPart { return func(*http.Request, Info) string { return s } }

// fingerprintSecret keys Fingerprint: random per process unless
// SetFingerprintSecret gives the deployment's.
var fingerprintSecret atomic.Pointer[[]byte]

func init() {
	secret := make([]byte, 32)
	rand.Read(secret)
	fingerprintSecret.Store(&secret)
}

// SetFingerprintSecret keys every later Fingerprint of the process with
// secret; replicas given the same secret agree on fingerprints. Without
// it, a random secret drawn at start keys them.
func SetFingerprintSecret(secret []byte) {
	secret = append([]byte(nil), secret...)
	fingerprintSecret.Store(&secret)
}

// Fingerprint returns the first 16 hex digits of the HMAC-SHA-256 of s
// under the process's fingerprint secret: enough to tell keys apart in
// logs, alerts and metrics without revealing them. Being keyed, it cannot
// be reversed by hashing every candidate, such as all 2^32 IPv4
// addresses, without the secret.
func Fingerprint(s string) string {
	mac := hmac.New(sha256.New, *fingerprintSecret.Load())
	mac.Write([]byte(s))
	return hex.EncodeToString(mac.Sum(nil)[:8])
}

// buildKey joins the parts' values into r's partition key, "-" standing
// for an absent part; missing reports whether any part was absent.
func buildKey(parts []KeyPart, r *http.Request, in Info) (key string, missing bool) {
	if len(parts) == 1 {
		if v := parts[0](r, in); v != "" {
			return v, false
		}
		return "-", true
	}
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('|')
		}
		v := p(r, in)
		if v == "" {
			v, missing = "-", true
		}
		b.WriteString(v)
	}
	return b.String(), missing
}
