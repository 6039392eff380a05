package httplimit_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/testkit"
)

// TestAPIKeyHeaders: APIKey reads the named headers in order,
// "Authorization" standing for its Bearer token, whatever the other names.
func TestAPIKeyHeaders(t *testing.T) {
	get := func(hdr ...string) *http.Request {
		r, _ := http.NewRequest("GET", "/", nil)
		for i := 0; i < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		return r
	}
	sum := sha256.Sum256([]byte("s3cret")) // the key is the secret's SHA-256 prefix, as tier.Hash.ID
	secret := hex.EncodeToString(sum[:8])
	for name, tc := range map[string]struct {
		part httplimit.KeyPart
		req  *http.Request
		want string
	}{
		"named header":            {httplimit.APIKey("X-API-Key"), get("X-API-Key", "s3cret"), secret},
		"named header, bearer":    {httplimit.APIKey("X-API-Key"), get("Authorization", "Bearer s3cret"), ""},
		"either, bearer":          {httplimit.APIKey("X-API-Key", "Authorization"), get("Authorization", "Bearer s3cret"), secret},
		"either, header first":    {httplimit.APIKey("X-API-Key", "Authorization"), get("X-API-Key", "s3cret", "Authorization", "Bearer other"), secret},
		"either, other scheme":    {httplimit.APIKey("X-API-Key", "authorization"), get("Authorization", "Basic czNjcmV0"), ""},
		"default is bearer":       {httplimit.APIKey(), get("Authorization", "bearer s3cret"), secret},
		"authorization is bearer": {httplimit.APIKey("Authorization"), get("Authorization", "s3cret"), ""},
		"none":                    {httplimit.APIKey("X-API-Key", "Authorization"), get(), ""},
	} {
		if got := tc.part(tc.req, httplimit.Info{}); got != tc.want {
			t.Errorf("%s: key %q, want %q", name, got, tc.want)
		}
	}
}

// TestMissingKey: a request without the key shares the "-" partition by
// default, and is refused with 401 before any limit under RefuseMissing.
func TestMissingKey(t *testing.T) {
	rule := func(m httplimit.MissingKey) httplimit.Rule {
		return httplimit.Rule{Pattern: "/",
			Key:     []httplimit.KeyPart{httplimit.APIKey("X-API-Key", "Authorization")},
			Missing: m,
			Rule: engine.Rule{
				Policies: []floodgate.Policy{policy("api", floodgate.FixedWindow, 1, time.Minute)},
			}}
	}
	shared := serve(t, httplimit.Config{Rules: []httplimit.Rule{rule(httplimit.ShareMissing)}}, ok)
	if a, b := do(t, "GET", shared.URL), do(t, "GET", shared.URL); a.StatusCode != 200 || b.StatusCode != 429 {
		t.Fatalf("ShareMissing: %d then %d, want 200 then 429 (one shared partition)", a.StatusCode, b.StatusCode)
	}
	if r := do(t, "GET", shared.URL, "Authorization", "Bearer k1"); r.StatusCode != 200 {
		t.Fatalf("ShareMissing, with a key: %d, want 200 (a partition of its own)", r.StatusCode)
	}

	refusing := serve(t, httplimit.Config{Rules: []httplimit.Rule{rule(httplimit.RefuseMissing)}}, ok)
	for range 3 {
		r, body := testkit.Do(t, "GET", refusing.URL, "")
		var p struct{ Status int }
		json.Unmarshal([]byte(body), &p)
		if r.StatusCode != 401 || p.Status != 401 || r.Header.Get("Cache-Control") != "no-store" ||
			r.Header.Get("Content-Type") != "application/problem+json" || r.Header.Get("RateLimit") != "" {
			t.Fatalf("RefuseMissing: %d %v, want 401 problem+json, no-store, no limit spent or shown", r.StatusCode, r.Header)
		}
	}
	if a, b := do(t, "GET", refusing.URL, "X-API-Key", "k1"), do(t, "GET", refusing.URL, "X-API-Key", "k1"); a.StatusCode != 200 || b.StatusCode != 429 {
		t.Fatalf("RefuseMissing, with a key: %d then %d, want 200 then 429", a.StatusCode, b.StatusCode)
	}
	st := testkit.Memory(t)
	if _, err := httplimit.New(httplimit.Config{Store: st, Rules: []httplimit.Rule{rule(7)}}); err == nil {
		t.Fatal("Missing 7: New accepted it")
	}
}

// The host and method key parts, as the daemon's "{host}" and "{method}"
// use them (K1).
func TestHostAndMethodKeys(t *testing.T) {
	for _, c := range []struct{ host, want string }{
		{"API.Example.com:8443", "api.example.com"},
		{"example.com", "example.com"},
		{"[2001:DB8::1]:443", "[2001:db8::1]"},
		{"[::1]", "[::1]"},
	} {
		r := httptest.NewRequest("Patch", "http://x/", nil) // methods match without case, so key so too
		r.Host = c.host
		if got := httplimit.Host()(r, httplimit.Info{}); got != c.want {
			t.Errorf("Host() of %q = %q, want %q", c.host, got, c.want)
		}
		if got := httplimit.Method()(r, httplimit.Info{}); got != "PATCH" {
			t.Errorf("Method() = %q, want PATCH", got)
		}
	}
}
