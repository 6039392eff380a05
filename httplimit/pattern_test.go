package httplimit

import (
	"net/http"
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
		// Tomcat, Jetty and Spring drop ";params" before resolving "..",
		// and IIS reads "\" as "/": those spellings reach /login there.
		{"POST /login", "POST", "/x/..;/login", true},
		{"POST /login", "POST", "/x/..;a/login", true},
		{"POST /login", "POST", "/x\\..\\login", true},
		{"POST /login", "POST", "/x%5c..%5clogin", true},
		{"/static/", "GET", "/static/..;/login", false},
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
		{"/my%20file", "GET", "/my%20file", true},
		{"/my%20file", "GET", "/MY%20FILE/", true},
		{"/my%20file", "GET", "/my%2520file", false},
		{"/a%3Fb", "GET", "/a%3fb", true},
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
	for _, s := range []string{"login", "get /x", "/a/{x}y", "/{rest...}/more", "/{$}/x", "/a//b", "FOO BAR BAZ /", "GET  /a b", "GET example.com /x",
		"/x?y=1", "/x#f", "/a/{}", "/a/{...}", "/{x}/{x}", "/{x}/{x...}", "/{1x}", "/a%2Fb", "/a%zz", "/%2E%2E/x"} {
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
		r := httptest.NewRequest("Patch", "http://x/", nil) // methods match without case, so key so too
		r.Host = c.host
		if got := Host()(r, Info{}); got != c.want {
			t.Errorf("Host() of %q = %q, want %q", c.host, got, c.want)
		}
		if got := Method()(r, Info{}); got != "PATCH" {
			t.Errorf("Method() = %q, want PATCH", got)
		}
	}
}

func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"/", "POST /login", true},
		{"/", "/", true},
		{"api.example.com/", "/x", false},
		{"POST /login", "POST /login", true},
		{"POST /login", "/login", false},
		{"/login", "POST /login", true},
		{"GET /items/{id}", "HEAD /items/42", true},
		{"HEAD /items/{id}", "GET /items/42", false},
		{"/api/", "/api/v1/users", true},
		{"/api/", "/api/{$}", true},
		{"/api/", "/api", false},
		{"/api/{rest...}", "/api/", true},
		{"/items/{id}", "/items/42", true},
		{"/items/42", "/items/{id}", false},
		{"/items/{id}", "/items/{id}/", false},
		{"/a/{$}", "/a/", false},
		{"/a/{$}", "/a/{$}", true},
		{"/a", "/a/{$}", true},
		{"/a", "/A", true},
		{"/a", "/b", false},
		{"bad", "/", false},
	} {
		if got := Covers(tc.a, tc.b); got != tc.want {
			t.Errorf("Covers(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestCoversSound: whenever Covers says a covers b, every request of a
// sample that b matches, a matches too.
func TestCoversSound(t *testing.T) {
	patterns := []string{"/", "/login", "POST /login", "GET /login", "/api/", "/api/{$}", "/api/{id}",
		"/api/{id}/", "/api/{rest...}", "GET /api/v1", "/api/v1", "/API/V1/", "h.example/", "h.example/api/", "/{x}", "/{x}/{y}"}
	var reqs []*http.Request
	for _, m := range []string{"GET", "HEAD", "POST"} {
		for _, host := range []string{"h.example", "other.example"} {
			for _, p := range []string{"/", "/login", "/login/", "/api", "/api/", "/api/v1", "/api/v1/", "/api/v1/x", "/x/y", "/x/y/z"} {
				r := httptest.NewRequest(m, "http://"+host+p, nil)
				reqs = append(reqs, r)
			}
		}
	}
	for _, a := range patterns {
		pa, _ := parsePattern(a)
		for _, b := range patterns {
			if !Covers(a, b) {
				continue
			}
			pb, _ := parsePattern(b)
			for _, r := range reqs {
				if pb.match(r) && !pa.match(r) {
					t.Errorf("Covers(%q, %q), but %s %s%s matches only %q", a, b, r.Method, r.Host, r.URL.Path, b)
				}
			}
		}
	}
}

// FuzzPattern: parsing any string either fails or gives a pattern that
// matches requests without panicking, and a valid pattern covers itself.
func FuzzPattern(f *testing.F) {
	for _, s := range []string{"/", "POST /login", "GET api.example.com/items/{id}", "/files/{path...}", "/{$}", "/my%20file", "/a%2Fb", "/{x}/{x}", "GET  /a"} {
		f.Add(s, "/items/42;x/../a%2Fb")
	}
	f.Fuzz(func(t *testing.T, pattern, path string) {
		p, err := parsePattern(pattern)
		if err != nil {
			return
		}
		if !p.covers(p) {
			t.Fatalf("%q does not cover itself", pattern)
		}
		r := httptest.NewRequest("GET", "/", nil)
		r.URL.Path = path
		p.match(r)
	})
}
