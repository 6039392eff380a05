package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestGatewayRoutes: gateway.routes send a host and a path prefix to
// upstreams of their own, each with its own timeout; other requests go
// to gateway.upstream; the rules count the same whatever the upstream.
func TestGatewayRoutes(t *testing.T) {
	upstream := func(name string, delay time.Duration) *httptest.Server {
		u := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/slow") {
				time.Sleep(delay)
			}
			fmt.Fprintf(w, "%s %s", name, r.URL.Path)
		}))
		t.Cleanup(u.Close)
		return u
	}
	apiUp, billingUp := upstream("api", 0), upstream("billing", time.Second)
	yaml := strings.Replace(baseConfig, "  timeout: 2s\n", fmt.Sprintf(`  timeout: 2s
  routes:
    - {host: API.example.com, upstream: %q}
    - {path_prefix: /billing/, upstream: %q, timeout: 100ms}
`, apiUp.URL, billingUp.URL), 1)
	f := start(t, yaml)
	get := func(method, path, host string) (int, string) {
		req, _ := http.NewRequest(method, f.url(FaceGateway, path), nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		method, path, host string
		status             int
		body               string
	}{
		{"GET", "/x", "api.example.com:8080", 200, "api /x"},
		{"GET", "/billing/invoices", "api.example.com", 200, "api /billing/invoices"}, // first match wins
		{"GET", "/billing/invoices", "other.example.com", 200, "billing /billing/invoices"},
		{"GET", "/billing", "other.example.com", 200, "upstream GET /billing"},
		{"GET", "/x", "other.example.com", 200, "upstream GET /x"},
	} {
		if status, body := get(c.method, c.path, c.host); status != c.status || body != c.body {
			t.Errorf("%s %s on %s: %d %q, want %d %q", c.method, c.path, c.host, status, body, c.status, c.body)
		}
	}
	// The billing route's own timeout (100 ms), not the gateway's (2 s).
	if status, body := get("GET", "/billing/slow", "x"); status != 504 {
		t.Errorf("slow billing: %d %q, want 504", status, body)
	}
	// The login rule (3 per hour per client) counts across upstreams.
	for i, host := range []string{"api.example.com", "x", "api.example.com"} {
		if status, _ := get("POST", "/login", host); status != 200 {
			t.Fatalf("login %d: %d", i+1, status)
		}
	}
	if status, _ := get("POST", "/login", "x"); status != 429 {
		t.Errorf("4th login: %d, want 429", status)
	}
}
