package httplimit

import (
	"net/http/httptest"
	"testing"
)

func TestPatternMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, method, target string
		want                    bool
	}{
		{"/", "GET", "/anything/at/all", true},
		{"POST /login", "POST", "/login", true},
		{"POST /login", "GET", "/login", false},
		{"POST /login", "POST", "/login/x", false},
		{"POST /login", "POST", "/login/", true},
		{"POST /login", "POST", "/LOGIN", true},
		{"POST /login", "post", "/login", true},
		{"POST /login", "POST", "/login;jsessionid=1", true},
		{"POST /login", "POST", "/login;x/y", false},
		{"POST /login", "POST", "/loginx", false},
		{"POST /login", "POST", "//login", true},
		{"POST /login", "POST", "/a/../login", true},
		{"POST /login", "POST", "/login/.", true},
		{"GET /items/{id}", "HEAD", "/items/42", true},
		{"GET /items/{id}", "GET", "/items/", false},
		{"GET /items/{id}", "GET", "/items/42/x", false},
		{"/api/", "GET", "/api/v1/users", true},
		{"/api/", "GET", "/api/", true},
		{"/api/", "GET", "/api", false},
		{"/api/", "GET", "/apix", false},
		{"/files/{path...}", "GET", "/files/a/b/c", true},
		{"/files/{path...}", "GET", "/files/", true},
		{"/{$}", "GET", "/", true},
		{"/{$}", "GET", "/x", false},
		{"/v1/{tenant}/export", "GET", "/v1/acme/export", true},
		{"/v1/{tenant}/export", "GET", "/v1/acme/import", false},
		{"api.example.com/", "GET", "http://api.example.com:8080/x", true},
		{"api.example.com/", "GET", "http://www.example.com/x", false},
	} {
		p, err := parsePattern(tc.pattern)
		if err != nil {
			t.Fatalf("%q: %v", tc.pattern, err)
		}
		r := httptest.NewRequest(tc.method, tc.target, nil)
		if got := p.match(r); got != tc.want {
			t.Errorf("%q matches %s %s = %v, want %v", tc.pattern, tc.method, tc.target, got, tc.want)
		}
	}
}

func TestPatternErrors(t *testing.T) {
	for _, s := range []string{"login", "get /x", "/a/{x}y", "/{rest...}/more", "/{$}/x", "/a//b", "FOO BAR BAZ /", "GET  /a b", "GET example.com /x"} {
		if _, err := parsePattern(s); err == nil {
			t.Errorf("%q parsed, want an error", s)
		}
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
		r := httptest.NewRequest("PATCH", "http://x/", nil)
		r.Host = c.host
		if got := Host()(r, Info{}); got != c.want {
			t.Errorf("Host() of %q = %q, want %q", c.host, got, c.want)
		}
		if got := Method()(r, Info{}); got != "PATCH" {
			t.Errorf("Method() = %q, want PATCH", got)
		}
	}
}
