package server

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
)

// TestLimitsByIdentity: an operator finds a client's counters under a
// rule by what they have (its IP in any form, its API key itself or the
// hashed form), resets them, and a key of the wrong form is a 400 naming
// the rule's template, never a "fresh" answer about a counter nobody uses.
func TestLimitsByIdentity(t *testing.T) {
	f := start(t, baseConfig)
	peek := func(method, path string, kv ...string) (int, string) {
		kv = append(kv, "Authorization", "Bearer admin-secret")
		resp, body := testkit.Do(t, method, f.url(FaceAPI, path), "", kv...)
		return resp.StatusCode, body
	}
	// A client locked out of login, and a customer out of API quota.
	for range 3 {
		testkit.Do(t, "POST", f.url(FaceGateway, "/login"), "")
	}
	const secret = "cust-key-0123456789"
	for range 5 {
		testkit.Do(t, "GET", f.url(FaceGateway, "/api/x"), "", "X-API-Key", secret)
	}
	full := sha256.Sum256([]byte(secret))
	hashed := hex.EncodeToString(full[:8])
	for _, c := range []struct {
		name, path string
		kv         []string
	}{
		{"IPv4", "/v1/limits/127.0.0.1%7CPOST%20%2Flogin?rule=login", nil},
		{"IPv4-mapped IPv6", "/v1/limits/::ffff:127.0.0.1%7CPOST%20%2Flogin?rule=login", nil},
		{"API key in the header", "/v1/limits/-?rule=api", []string{APIKeyHeader, secret}},
		{"hashed form", "/v1/limits/" + hashed + "?rule=api", nil},
		{"full SHA-256", "/v1/limits/" + hex.EncodeToString(full[:]) + "?rule=api", nil},
	} {
		if code, body := peek("GET", c.path, c.kv...); code != 200 || !strings.Contains(body, `"remaining":0`) {
			t.Errorf("%s: %d %s, want the spent counter", c.name, code, body)
		}
	}
	for _, c := range []struct {
		name, path, want string
		kv               []string
	}{
		{"the raw API key in the URL", "/v1/limits/" + secret + "?rule=api", `counts under \"{api_key}\"`, nil},
		{"not an IP", "/v1/limits/nobody%7CPOST%20%2Flogin?rule=login", "{ip} is a client address", nil},
		{"the route left out", "/v1/limits/127.0.0.1?rule=login", `give 2 \"|\"-separated parts, got 1`, nil},
		{"another route", "/v1/limits/127.0.0.1%7CGET%20%2F?rule=login", `{route} is the rule's pattern \"POST /login\"`, nil},
		{"header and a hash", "/v1/limits/" + hashed + "?rule=api", `write the {api_key} part as \"-\"`, []string{APIKeyHeader, secret}},
		{"unknown rule", "/v1/limits/x?rule=nope", `unknown rule \"nope\"`, nil},
		{"unknown form", "/v1/limits/x?rule=api&form=hash", "form is identity", nil},
	} {
		for _, m := range []string{"GET", "DELETE"} {
			if code, body := peek(m, c.path, c.kv...); code != 400 || !strings.Contains(body, c.want) {
				t.Errorf("%s %s: %d %s, want 400 with %q", m, c.name, code, body, c.want)
			}
		}
	}
	// Reset by identity frees both clients.
	if code, body := peek("DELETE", "/v1/limits/-?rule=api", APIKeyHeader, secret); code != 200 || !strings.Contains(body, `"key":"`+hashed+`"`) {
		t.Errorf("reset by API key: %d %s", code, body)
	}
	if code, body := peek("DELETE", "/v1/limits/::ffff:127.0.0.1%7CPOST%20%2Flogin?rule=login"); code != 200 {
		t.Errorf("reset by IP: %d %s", code, body)
	}
	if resp, _ := testkit.Do(t, "GET", f.url(FaceGateway, "/api/x"), "", "X-API-Key", secret); resp.StatusCode != 200 {
		t.Errorf("the customer after the reset: %d", resp.StatusCode)
	}
	if resp, _ := testkit.Do(t, "POST", f.url(FaceGateway, "/login"), ""); resp.StatusCode != 200 {
		t.Errorf("the client after the reset: %d", resp.StatusCode)
	}
}
