package pattern

import (
	"net/url"
	"testing"
)

// request is what Match reads of a request to target (a path or an
// absolute URL), as a server would see it.
type request struct{ method, host, path string }

func newRequest(t testing.TB, method, target string) request {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		t.Fatal(err)
	}
	return request{method, u.Host, u.Path}
}

func (p *Pattern) matches(r request) bool { return p.Match(r.method, r.host, r.path) }

// covers is Covers on two patterns as written; false if either is invalid.
func covers(a, b string) bool {
	pa, err := Parse(a)
	if err != nil {
		return false
	}
	pb, err := Parse(b)
	if err != nil {
		return false
	}
	return pa.Covers(pb)
}

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
		// Spring trims trailing white space; a C string ends at NUL.
		{"POST /login", "POST", "/login%20", true},
		{"POST /login", "POST", "/login%09", true},
		{"POST /login", "POST", "/login%00", true},
		{"POST /login", "POST", "/login%00.png", true},
		{"POST /login", "POST", "/login%20/", true},
		{"POST /login", "POST", "/log%00in", false},
		{"POST /api/{id}", "POST", "/api%0a/7", true},
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
		p, err := Parse(tc.pattern)
		if err != nil {
			t.Fatalf("%q: %v", tc.pattern, err)
		}
		if got := p.matches(newRequest(t, tc.method, tc.target)); got != tc.want {
			t.Errorf("%q matches %s %s = %v, want %v", tc.pattern, tc.method, tc.target, got, tc.want)
		}
	}
}

func TestPatternErrors(t *testing.T) {
	for _, s := range []string{"login", "get /x", "/a/{x}y", "/{rest...}/more", "/{$}/x", "/a//b", "FOO BAR BAZ /", "GET  /a b", "GET example.com /x",
		"/x?y=1", "/x#f", "/a/{}", "/a/{...}", "/{x}/{x}", "/{x}/{x...}", "/{1x}", "/a%2Fb", "/a%zz", "/%2E%2E/x", "/a\nb", "\x00/x", "/\x1b[31m"} {
		if _, err := Parse(s); err == nil {
			t.Errorf("%q parsed, want an error", s)
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
		if got := covers(tc.a, tc.b); got != tc.want {
			t.Errorf("Covers(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestCoversSound: whenever Covers says a covers b, every request of a
// sample that b matches, a matches too.
func TestCoversSound(t *testing.T) {
	patterns := []string{"/", "/login", "POST /login", "GET /login", "/api/", "/api/{$}", "/api/{id}",
		"/api/{id}/", "/api/{rest...}", "GET /api/v1", "/api/v1", "/API/V1/", "h.example/", "h.example/api/", "/{x}", "/{x}/{y}"}
	var reqs []request
	for _, m := range []string{"GET", "HEAD", "POST"} {
		for _, host := range []string{"h.example", "other.example"} {
			for _, p := range []string{"/", "/login", "/login/", "/api", "/api/", "/api/v1", "/api/v1/", "/api/v1/x", "/x/y", "/x/y/z"} {
				reqs = append(reqs, newRequest(t, m, "http://"+host+p))
			}
		}
	}
	for _, a := range patterns {
		pa, _ := Parse(a)
		for _, b := range patterns {
			if !covers(a, b) {
				continue
			}
			pb, _ := Parse(b)
			for _, r := range reqs {
				if pb.matches(r) && !pa.matches(r) {
					t.Errorf("Covers(%q, %q), but %s %s%s matches only %q", a, b, r.method, r.host, r.path, b)
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
		p, err := Parse(pattern)
		if err != nil {
			return
		}
		if !p.Covers(p) {
			t.Fatalf("%q does not cover itself", pattern)
		}
		p.Match("GET", "", path)
	})
}

func TestShadows(t *testing.T) {
	parse := func(ss ...string) []*Pattern {
		var out []*Pattern
		for _, s := range ss {
			p, _ := Parse(s) // nil for an invalid one, which Shadows passes over
			out = append(out, p)
		}
		return out
	}
	got := Shadows(parse("/internal/"), parse("/internal/x", "/", "POST /login", "bad", "/api/", "/api/{rest...}"))
	want := []Shadow{{Rule: 0, By: 0, Skip: true}, {Rule: 2, By: 1}, {Rule: 4, By: 1}, {Rule: 5, By: 1}}
	if len(got) != len(want) {
		t.Fatalf("Shadows = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("shadow %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	same := Shadows(nil, parse("/api/", "/api/{rest...}"))
	if len(same) != 1 || !same[0].Same || same[0].Advice() != "the two match the same requests: remove or merge one" {
		t.Errorf("same patterns: %+v", same)
	}
}
