package config

import (
	"strings"
	"testing"
	"time"
)

// TestRoutes: gateway.routes load with the gateway's timeout as their
// default; a route matching everything, a relative prefix, a host with a
// port and a bad upstream are errors at their lines.
func TestRoutes(t *testing.T) {
	c, err := Parse("f.yaml", []byte(`gateway:
  listen: ':0'
  upstream: http://app:3000
  timeout: 7s
  routes:
    - {host: api.example.com, upstream: "http://api:80"}
    - {path_prefix: /billing/, upstream: "https://billing", timeout: 2s}
`))
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Gateway.Routes; len(r) != 2 || r[0].Timeout.D() != 7*time.Second || r[1].Timeout.D() != 2*time.Second {
		t.Errorf("routes %+v", r)
	}
	got := parseErr(t, `gateway:
  listen: ':0'
  upstream: demo
  routes:
    - {upstream: "http://a"}
    - {path_prefix: billing, upstream: "http://a"}
    - {host: "a.example:80", upstream: "ftp://a"}
`)
	for _, want := range []string{
		"f.yaml:5: gateway.routes[0]: give host, path_prefix or both",
		`f.yaml:6: gateway.routes[1].path_prefix: must start with "/", got "billing"`,
		`f.yaml:7: gateway.routes[2].host: a host name without scheme, port or path, got "a.example:80"`,
		`f.yaml:7: gateway.routes[2].upstream: want an http:// or https:// URL with a host; got "ftp://a"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q:\n%s", want, got)
		}
	}
}
