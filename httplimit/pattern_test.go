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
	for _, s := range []string{"login", "get /x", "/a/{x}y", "/{rest...}/more", "/{$}/x", "/a//b"} {
		if _, err := parsePattern(s); err == nil {
			t.Errorf("%q parsed, want an error", s)
		}
	}
}
