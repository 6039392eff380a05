package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/header"
)

// baseConfig has every face on loopback ports the system picks; %s is the
// upstream URL.
const baseConfig = `
gateway:
  listen: "127.0.0.1:0"
  upstream: %q
  timeout: 2s
api:
  listen: "127.0.0.1:0"
forward_auth:
  listen: "127.0.0.1:0"
admin:
  listen: "127.0.0.1:0"
  token: admin-secret
trusted_proxies: ["10.0.0.0/8"]
log: {level: error}
policies:
  login: {algorithm: fixed-window, quota: 3, window: 1h}
  api: {algorithm: sliding-window-log, quota: 5, window: 1h}
  big: {algorithm: gcra, quota: 1000, window: 1s, burst: 10}
rules:
  - {match: "GET /healthz", skip: true}
  - name: login
    match: "POST /login"
    key: "{ip}|{route}"
    policies: [login]
  - name: api
    match: "/api/"
    key: "{api_key}"
    policies: [api]
  - name: tenant
    match: "/t/"
    key: "{tenant}"
    policies: [login]
`

type fixture struct {
	srv      *Server
	upstream *httptest.Server
	file     string
	hits     chan *http.Request
}

func (f *fixture) url(face Face, path string) string { return "http://" + f.srv.Addr(face) + path }

// start runs a Server on the given YAML (with %s for the upstream URL,
// when present) and an upstream that records what it receives.
func start(t testing.TB, yaml string, opts ...Option) *fixture {
	t.Helper()
	f := &fixture{hits: make(chan *http.Request, 100)}
	f.upstream = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case f.hits <- r.Clone(context.Background()):
		default:
		}
		w.Header().Set("X-Upstream", "yes")
		if c := r.Header.Get("X-Test-Cost"); c != "" { // what an upstream reports it spent
			w.Header().Set("X-Tokens-Used", c)
		}
		fmt.Fprintf(w, "upstream %s %s", r.Method, r.URL.Path)
	}))
	t.Cleanup(f.upstream.Close)
	if strings.Contains(yaml, "%q") {
		yaml = fmt.Sprintf(yaml, f.upstream.URL)
	}
	f.file = filepath.Join(t.TempDir(), "floodgate.yaml")
	if err := os.WriteFile(f.file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(f.file)
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]Option{WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	f.srv, err = New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		f.srv.Shutdown(ctx)
	})
	return f
}

func TestGatewayLimitsAndHeaders(t *testing.T) {
	f := start(t, baseConfig)
	for i := 1; i <= 3; i++ {
		resp, body := testkit.Do(t, "POST", f.url(FaceGateway, "/login"), "")
		if resp.StatusCode != 200 || body != "upstream POST /login" || resp.Header.Get("X-Upstream") != "yes" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
		if got, want := resp.Header.Get("X-Ratelimit-Remaining"), fmt.Sprint(3-i); got != want {
			t.Errorf("request %d: X-RateLimit-Remaining = %q, want %q", i, got, want)
		}
		if got := resp.Header.Get("Ratelimit-Policy"); got != `"login";q=3;w=3600` {
			t.Errorf("RateLimit-Policy = %q", got)
		}
		// r is what is left, cut to what q/w allows before the window ends.
		var r, tw int
		got := resp.Header.Get("Ratelimit")
		if _, err := fmt.Sscanf(got, `"login";r=%d;t=%d`, &r, &tw); err != nil || r > 3-i || tw > 3600 {
			t.Errorf("RateLimit = %q", got)
		}
	}
	resp, body := testkit.Do(t, "POST", f.url(FaceGateway, "/login"), "")
	if resp.StatusCode != 429 {
		t.Fatalf("4th login: %d", resp.StatusCode)
	}
	var p header.Problem
	if err := json.Unmarshal([]byte(body), &p); err != nil || p.Status != 429 || len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "login" {
		t.Errorf("429 body = %s (%v)", body, err)
	}
	if ra := resp.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("429 without Retry-After: %q", ra)
	}
	// Another route has its own counters; a skipped path gets no fields.
	if resp, _ := testkit.Do(t, "GET", f.url(FaceGateway, "/login"), ""); resp.StatusCode != 200 || resp.Header.Get("Ratelimit") != "" {
		t.Errorf("GET /login (no rule): %d %q", resp.StatusCode, resp.Header.Get("Ratelimit"))
	}
	if resp, _ := testkit.Do(t, "GET", f.url(FaceGateway, "/healthz"), ""); resp.StatusCode != 200 || resp.Header.Get("X-Ratelimit-Limit") != "" {
		t.Errorf("skipped /healthz: %d, X-RateLimit-Limit %q", resp.StatusCode, resp.Header.Get("X-Ratelimit-Limit"))
	}
}

func TestGatewayForwardedHeaders(t *testing.T) {
	f := start(t, baseConfig)
	// The test client is 127.0.0.1, not a trusted proxy: its own
	// X-Forwarded-For and X-Real-IP are dropped.
	resp, _ := testkit.Do(t, "GET", f.url(FaceGateway, "/x"), "", "X-Forwarded-For", "6.6.6.6", "X-Real-IP", "6.6.6.6", "X-Forwarded-Host", "evil")
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	r := <-f.hits
	if got := r.Header.Get("X-Forwarded-For"); got != "127.0.0.1" {
		t.Errorf("X-Forwarded-For = %q, want the peer only", got)
	}
	if got := r.Header.Get("X-Real-Ip"); got != "127.0.0.1" {
		t.Errorf("X-Real-IP = %q", got)
	}
	if got := r.Header.Get("X-Forwarded-Host"); got != f.srv.Addr(FaceGateway) {
		t.Errorf("X-Forwarded-Host = %q, want %q", got, f.srv.Addr(FaceGateway))
	}
	if got := r.Header.Get("X-Forwarded-Proto"); got != "http" {
		t.Errorf("X-Forwarded-Proto = %q", got)
	}
}

func TestSetForwardedFromTrustedProxy(t *testing.T) {
	f := start(t, baseConfig)
	st := f.srv.state.Load()
	req := httptest.NewRequest("GET", "http://gw/x", nil)
	req.RemoteAddr = "10.1.2.3:5555"
	req.Header.Set("X-Forwarded-For", "203.0.113.9, 10.9.9.9")
	req.Header.Set("X-Forwarded-Proto", "https")
	rec := httptest.NewRecorder()
	st.gateway.ServeHTTP(rec, req)
	r := <-f.hits
	if got := r.Header.Get("X-Forwarded-For"); got != "203.0.113.9, 10.9.9.9, 10.1.2.3" {
		t.Errorf("X-Forwarded-For = %q, want the chain with the peer appended", got)
	}
	if got := r.Header.Get("X-Real-Ip"); got != "203.0.113.9" {
		t.Errorf("X-Real-IP = %q, want the first untrusted hop", got)
	}
	if got := r.Header.Get("X-Forwarded-Proto"); got != "https" {
		t.Errorf("X-Forwarded-Proto = %q, want the trusted proxy's", got)
	}
}

func TestGatewayStreamsBodies(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, "data: second\n\n")
	}))
	defer up.Close()
	defer close(release)
	f := start(t, fmt.Sprintf(baseConfig, up.URL))
	resp, err := http.Get(f.url(FaceGateway, "/stream"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: first\n" {
		t.Fatalf("first event = %q, %v (not streamed?)", line, err)
	}
}

func TestGatewayUpstreamDown(t *testing.T) {
	// Nothing serves port 1 (tcpmux) on a test machine. A port freed by closing a test
	// server of our own could be taken meanwhile by another package's
	// test server, as happened once.
	f := start(t, fmt.Sprintf(baseConfig, "http://127.0.0.1:1"))
	resp, body := testkit.Do(t, "POST", f.url(FaceGateway, "/login"), "")
	if resp.StatusCode != 502 || resp.Header.Get("Content-Type") != header.ProblemContentType {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if !strings.Contains(body, `"detail":"the upstream server did not answer: it refused the connection or cannot be reached"`) {
		t.Errorf("body = %s", body)
	}
	if resp.Header.Get("X-Ratelimit-Remaining") != "2" {
		t.Errorf("the rate-limit fields should still be there: %v", resp.Header)
	}
}

func TestGatewayUpstreamTimeout(t *testing.T) {
	block := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer up.Close()
	defer close(block)
	yaml := strings.Replace(fmt.Sprintf(baseConfig, up.URL), "timeout: 2s", "timeout: 100ms", 1)
	f := start(t, yaml)
	resp, body := testkit.Do(t, "GET", f.url(FaceGateway, "/slow"), "")
	if resp.StatusCode != 504 || !strings.Contains(body, "did not answer in time") {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}

func check(t *testing.T, f *fixture, body string) (*http.Response, map[string]any) {
	t.Helper()
	resp, b := testkit.Do(t, "POST", f.url(FaceAPI, "/v1/check"), body)
	var m map[string]any
	if err := json.Unmarshal([]byte(b), &m); err != nil {
		t.Fatalf("body %q: %v", b, err)
	}
	return resp, m
}

func TestAPICheck(t *testing.T) {
	f := start(t, baseConfig)
	for i := 1; i <= 5; i++ {
		resp, m := check(t, f, `{"key":"user-1","rule":"api"}`)
		if resp.StatusCode != 200 || m["allowed"] != true || m["remaining"] != float64(5-i) || m["policy"] != "api" || m["limit"] != float64(5) {
			t.Fatalf("check %d: %d %v", i, resp.StatusCode, m)
		}
		if got := resp.Header.Get("Ratelimit-Policy"); got != `"api";q=5;w=3600` {
			t.Errorf("RateLimit-Policy = %q", got)
		}
	}
	resp, m := check(t, f, `{"key":"user-1","rule":"api"}`)
	if m["allowed"] != false || m["retry_after"].(float64) < 1 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("6th check: %v, Retry-After %q", m, resp.Header.Get("Retry-After"))
	}
	results := m["results"].([]any)
	r0 := results[0].(map[string]any)
	if len(results) != 1 || r0["policy"] != "api" || r0["allowed"] != false || r0["window"] != float64(3600) || r0["unit"] != "requests" {
		t.Errorf("results = %v", results)
	}
	// Policies by name, with a cost; another key has its own counters.
	_, m = check(t, f, `{"key":"user-2","policies":["api","big"],"cost":4}`)
	if m["allowed"] != true || len(m["results"].([]any)) != 2 {
		t.Errorf("policies check: %v", m)
	}
	_, m = check(t, f, `{"key":"user-2","policies":["api","big"],"cost":2}`)
	if m["allowed"] != false || m["policy"] != "api" {
		t.Errorf("over quota by cost: %v", m)
	}
}

func TestAPISharesCountersWithGateway(t *testing.T) {
	f := start(t, baseConfig)
	for i := 0; i < 3; i++ {
		testkit.Do(t, "POST", f.url(FaceGateway, "/login"), "")
	}
	resp, body := testkit.Do(t, "GET", f.url(FaceAPI, "/v1/limits/127.0.0.1%7CPOST%20%2Flogin?rule=login"), "")
	if resp.StatusCode != 200 || !strings.Contains(body, `"allowed":false`) || !strings.Contains(body, `"remaining":0`) {
		t.Fatalf("peek: %d %s", resp.StatusCode, body)
	}
	if resp.Header.Get("Retry-After") != "" {
		t.Errorf("a peek carries Retry-After")
	}
	// Reset needs the admin token, then frees the client.
	if resp, _ := testkit.Do(t, "DELETE", f.url(FaceAPI, "/v1/limits/127.0.0.1%7CPOST%20%2Flogin"), ""); resp.StatusCode != 401 {
		t.Errorf("reset without token: %d", resp.StatusCode)
	}
	if resp, _ := testkit.Do(t, "DELETE", f.url(FaceAPI, "/v1/limits/127.0.0.1%7CPOST%20%2Flogin"), "", "Authorization", "Bearer wrong"); resp.StatusCode != 401 {
		t.Errorf("reset with a wrong token: %d", resp.StatusCode)
	}
	resp, body = testkit.Do(t, "DELETE", f.url(FaceAPI, "/v1/limits/127.0.0.1%7CPOST%20%2Flogin"), "", "Authorization", "Bearer admin-secret")
	if resp.StatusCode != 200 || body != `{"reset":true,"key":"127.0.0.1|POST /login","policies":["api","big","login"]}` {
		t.Errorf("reset: %d %s", resp.StatusCode, body)
	}
	if resp, _ := testkit.Do(t, "POST", f.url(FaceGateway, "/login"), ""); resp.StatusCode != 200 {
		t.Errorf("after reset: %d", resp.StatusCode)
	}
}

func TestAPIPeekSpendsNothing(t *testing.T) {
	f := start(t, baseConfig)
	for i := 0; i < 3; i++ {
		resp, body := testkit.Do(t, "GET", f.url(FaceAPI, "/v1/limits/k?policies=api"), "")
		if resp.StatusCode != 200 || !strings.Contains(body, `"remaining":5`) {
			t.Fatalf("peek %d: %s", i, body)
		}
	}
}

// TestAPIRepeatedField: a check that names a field twice is refused,
// whichever decoder reads it, however the name is cased.
func TestAPIRepeatedField(t *testing.T) {
	f := start(t, baseConfig)
	for _, body := range []string{
		`{"key":"a","key":"b","rule":"api"}`,
		`{"key":"a","rule":"api","KEY":"b"}`,
		`{"key":"a\u0041","rule":"api","rule":"api"}`,
		`[{"key":"a","rule":"api"},{"key":"b","cost":1,"cost":2,"rule":"api"}]`,
	} {
		resp, got := testkit.Do(t, "POST", f.url(FaceAPI, "/v1/check"), body)
		if resp.StatusCode != 400 || !strings.Contains(got, "appears twice in one object") {
			t.Errorf("%s: %d %s", body, resp.StatusCode, got)
		}
	}
	for name, body := range map[string]string{
		"nested arrays and objects": `{"key":"a","policies":["api","api"],"rule":""}`,
		"same name in two objects":  `[{"key":"a","rule":"api"},{"key":"a","rule":"api"}]`,
	} {
		if got := repeatedField([]byte(body)); got != "" {
			t.Errorf("%s: repeatedField = %q", name, got)
		}
	}
}

// TestAPIQueryStrict: a peek or reset with a query it does not know is
// refused, not widened to every policy of the key.
func TestAPIQueryStrict(t *testing.T) {
	f := start(t, baseConfig)
	for _, c := range []struct{ method, query, want string }{
		{"GET", "rules=login", `unknown query parameter \"rules\"`},
		{"GET", "policies=", `query parameter \"policies\" is empty`},
		{"GET", "rule=login&rule=api", `query parameter \"rule\" given 2 times`},
		{"GET", "rule=%zz", "bad query"},
		{"DELETE", "polices=api", `unknown query parameter \"polices\"`},
	} {
		resp, body := testkit.Do(t, c.method, f.url(FaceAPI, "/v1/limits/k?"+c.query), "", "Authorization", "Bearer admin-secret")
		if resp.StatusCode != 400 || !strings.Contains(body, c.want) {
			t.Errorf("%s ?%s: %d %s", c.method, c.query, resp.StatusCode, body)
		}
	}
	if resp, body := testkit.Do(t, "GET", f.url(FaceAPI, "/v1/limits/k?rule=api&form=partition"), ""); resp.StatusCode != 200 {
		t.Errorf("a good query: %d %s", resp.StatusCode, body)
	}
}

func TestAPIBatch(t *testing.T) {
	f := start(t, baseConfig)
	resp, b := testkit.Do(t, "POST", f.url(FaceAPI, "/v1/check"), `[{"key":"a","rule":"api"},{"key":"a","rule":"nope"},{"key":"b","policies":["login"],"cost":3}]`)
	var out []map[string]any
	if err := json.Unmarshal([]byte(b), &out); err != nil || resp.StatusCode != 200 || len(out) != 3 {
		t.Fatalf("%d %s %v", resp.StatusCode, b, err)
	}
	if out[0]["allowed"] != true || out[0]["remaining"] != float64(4) {
		t.Errorf("[0] = %v", out[0])
	}
	if e, ok := out[1]["error"].(map[string]any); !ok || e["status"] != float64(400) || !strings.Contains(e["detail"].(string), `unknown rule "nope"`) {
		t.Errorf("[1] = %v", out[1])
	}
	if out[2]["allowed"] != true || out[2]["remaining"] != float64(0) {
		t.Errorf("[2] = %v", out[2])
	}
	big := "[" + strings.Repeat(`{"key":"a","rule":"api"},`, 100) + `{"key":"a","rule":"api"}]`
	if resp, body := testkit.Do(t, "POST", f.url(FaceAPI, "/v1/check"), big); resp.StatusCode != 400 || !strings.Contains(body, "at most 100 checks") {
		t.Errorf("oversized batch: %d %s", resp.StatusCode, body)
	}
}

func TestAPIBadRequests(t *testing.T) {
	f := start(t, baseConfig)
	for _, tc := range []struct{ body, detail string }{
		{``, `empty body: send a JSON object such as {\"key\":\"user-42\",\"rule\":\"api\"}`},
		{`{"key":`, `body is not valid JSON: it ends too early`},
		{`{"key":"a",}`, `body is not valid JSON at byte 12: invalid character '}' looking for beginning of object key string`},
		{`{"key":"a","rule":"api","colour":"red"}`, `body: unknown field \"colour\"`},
		{`{"key":"a","rule":"api","cost":"two"}`, `field \"cost\": want a whole number, got a JSON string`},
		{`{"rule":"api"}`, `key is required: the partition key to count under, e.g. a user ID`},
		{`{"key":"a"}`, `give rule (a configured rule's name) or policies (a list of policy names)`},
		{`{"key":"a","rule":"api","policies":["api"]}`, `give rule or policies, not both`},
		{`{"key":"a","rule":"nope"}`, `unknown rule \"nope\" (rules: api, login, tenant)`},
		{`{"key":"a","policies":["nope"]}`, `unknown policy \"nope\" (defined: api, big, login)`},
		{`{"key":"a","policies":["api","api"]}`, `policy name \"api\" used twice`},
		{`{"key":"a","rule":"api","cost":0}`, `cost must be within 1..1000000 (api.max_cost), got 0; peek with GET /v1/limits/{key}`},
		{`{"key":"a","rule":"api","cost":-3}`, `cost must be within 1..1000000 (api.max_cost), got -3; peek with GET /v1/limits/{key}`},
		{`{"key":"a","rule":"api","cost":99999999999}`, `cost must be within 1..1000000 (api.max_cost), got 99999999999; peek with GET /v1/limits/{key}`},
		{`{"key":"a","rule":"api","cost":6}`, `cost exceeds quota: cost 6 requests, policy \"api\" admits at most 5 at once`},
		{`{"key":"a","rule":"api"} {}`, `body has data after its JSON value, at byte 25`},
		{`{"key":"a","rule":"api"}]garbage`, `body has data after its JSON value, at byte 24`},
		{`{"key":"a","rule":"api"}}`, `body has data after its JSON value, at byte 24`},
		{`[{"key":"a","rule":"api"}]] trailing`, `body has data after its JSON value, at byte 26`},
		{`null`, `the body must be a JSON object such as {\"key\":\"user-42\",\"rule\":\"api\"}, or an array of them; got a JSON null`},
		{`42`, `the body must be a JSON object such as {\"key\":\"user-42\",\"rule\":\"api\"}, or an array of them; got a JSON number`},
		{`[{"key":"a","rule":"api"},5]`, `check 2 of 2: a check must be a JSON object such as {\"key\":\"user-42\",\"rule\":\"api\"}; got a JSON number`},
		{`[{"key":"a","rule":"api"},null]`, `check 2 of 2: a check must be a JSON object such as {\"key\":\"user-42\",\"rule\":\"api\"}; got a JSON null`},
		{`[{"key":"a","rule":"api"},{"key":"b","rule":"api","bogus":1}]`, `check 2 of 2: unknown field \"bogus\"`},
		{"  \n {\"key\":\"a\",\"rule\":\"api\"}]", `body has data after its JSON value, at byte 28`},
		{"   {\"key\":\"a\",}", `body is not valid JSON at byte 15: invalid character '}' looking for beginning of object key string`},
		{"  ", `empty body: send a JSON object such as {\"key\":\"user-42\",\"rule\":\"api\"}`},
		{`[{"key":"a","rule":"api"},{"key":"b"]`, `body is not valid JSON at byte 37: invalid character ']' after object key:value pair`},
		{`{"key":"a","rule":"api","cost":1e2}`, `field \"cost\": want a whole number written in digits, such as 5, got 1e2`},
		{`{"key":"a","rule":"api","cost":99999999999999999999}`, `field \"cost\": 99999999999999999999 is out of range`},
		{"{\"key\":\"a\\u0000b\",\"rule\":\"api\"}", `key holds a control character or U+FFFD (invalid UTF-8); send printable text`},
		{"{\"key\":\"a\xffb\",\"rule\":\"api\"}", `key holds a control character or U+FFFD (invalid UTF-8); send printable text`},
	} {
		resp, body := testkit.Do(t, "POST", f.url(FaceAPI, "/v1/check"), tc.body)
		want := `{"title":"Bad Request","status":400,"detail":"` + tc.detail + `"}`
		if resp.StatusCode != 400 || body != want || resp.Header.Get("Content-Type") != header.ProblemContentType {
			t.Errorf("body %q:\n got %d %s\nwant 400 %s", tc.body, resp.StatusCode, body, want)
		}
	}
}

// TestCrossOriginRefused: a browser's cross-origin POST, which a page can
// send as text/plain without a preflight, cannot spend a key's quota on the
// decision API; a service's request (no Sec-Fetch-Site, no Origin) can.
func TestCrossOriginRefused(t *testing.T) {
	f := start(t, baseConfig)
	url := f.url(FaceAPI, "/v1/check")
	body := `{"key":"csrf","rule":"api"}`
	if resp, got := testkit.Do(t, "POST", url, body, "Content-Type", "text/plain", "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"); resp.StatusCode != 403 ||
		resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(got, "a cross-origin request from a browser page") {
		t.Fatalf("cross-site POST: %d %s %s, want a 403 problem", resp.StatusCode, resp.Header.Get("Content-Type"), got)
	}
	if resp, got := testkit.Do(t, "POST", url, body, "Origin", "https://evil.example"); resp.StatusCode != 403 {
		t.Fatalf("POST with a foreign Origin: %d %s, want 403", resp.StatusCode, got)
	}
	resp, got := testkit.Do(t, "POST", url, body)
	if resp.StatusCode != 200 || !strings.Contains(got, `"remaining":4`) {
		t.Fatalf("service POST after the refused ones: %d %s, want 200 with remaining 4 (nothing spent by them)", resp.StatusCode, got)
	}
	// Forward-auth is exempt: a proxy passes the browser's headers on, and
	// Traefik may keep the original method of a legitimate cross-site POST.
	auth := f.url(FaceForwardAuth, "/v1/auth")
	if resp, got := testkit.Do(t, "POST", auth, "", "Sec-Fetch-Site", "cross-site", "Origin", "https://app.example"); resp.StatusCode == 403 && strings.Contains(got, "cross-origin") {
		t.Fatalf("forward-auth refused a proxied cross-site POST: %d %s", resp.StatusCode, got)
	}
}

func TestForwardAuth(t *testing.T) {
	f := start(t, baseConfig)
	st := f.srv.state.Load()
	ask := func(nginx bool, hdr map[string]string) *httptest.ResponseRecorder {
		path := "/v1/auth"
		if nginx {
			path = "/v1/auth/nginx"
		}
		req := httptest.NewRequest("GET", path, nil)
		req.RemoteAddr = "10.0.0.5:1234"
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		f.srv.handleAuth(rec, req, nginx)
		_ = st
		return rec
	}
	traefik := map[string]string{"X-Forwarded-Method": "POST", "X-Forwarded-Uri": "/login?next=/", "X-Forwarded-For": "198.51.100.7"}
	for i := 1; i <= 3; i++ {
		rec := ask(false, traefik)
		if rec.Code != 200 || rec.Header().Get("X-Ratelimit-Remaining") != fmt.Sprint(3-i) {
			t.Fatalf("auth %d: %d %v", i, rec.Code, rec.Header())
		}
	}
	rec := ask(false, traefik)
	if rec.Code != 429 || rec.Header().Get("Retry-After") == "" || !strings.HasPrefix(rec.Header().Get("Ratelimit"), `"login";r=0;t=`) {
		t.Errorf("4th auth: %d %v", rec.Code, rec.Header())
	}
	// nginx mode: the same client, now refused with 403 and the fields.
	nginx := map[string]string{"X-Original-Method": "POST", "X-Original-URI": "/login", "X-Forwarded-For": "198.51.100.7"}
	if rec := ask(true, nginx); rec.Code != 403 || rec.Header().Get("Retry-After") == "" {
		t.Errorf("nginx mode limited: %d %v", rec.Code, rec.Header())
	}
	// Another client is its own partition.
	nginx["X-Forwarded-For"] = "198.51.100.8"
	if rec := ask(true, nginx); rec.Code != 200 {
		t.Errorf("other client: %d", rec.Code)
	}
	// {tenant} is read from a trusted proxy.
	ten := map[string]string{"X-Forwarded-Method": "GET", "X-Forwarded-Uri": "/t/x", "X-Tenant-Id": "acme", "X-Forwarded-For": "198.51.100.9"}
	for i := 0; i < 3; i++ {
		ask(false, ten)
	}
	ten["X-Forwarded-For"] = "198.51.100.10"
	if rec := ask(false, ten); rec.Code != 429 {
		t.Errorf("tenant key from a trusted proxy: %d, want the tenant's shared 429", rec.Code)
	}
	if rec := ask(false, map[string]string{"X-Forwarded-For": "1.2.3.4"}); rec.Code != 400 || !strings.Contains(rec.Body.String(), "missing X-Original-URI") {
		t.Errorf("no URI: %d %s", rec.Code, rec.Body)
	}
	// Without the method, guessing GET would skip the POST /login rule.
	if rec := ask(false, map[string]string{"X-Original-URI": "/login", "X-Original-Method": "FOO BAR"}); rec.Code != 400 || !strings.Contains(rec.Body.String(), `bad original method \"FOO BAR\"`) {
		t.Errorf("a method that is not a token: %d %s", rec.Code, rec.Body)
	}
	if rec := ask(false, map[string]string{"X-Original-URI": "/login", "X-Forwarded-For": "1.2.3.4"}); rec.Code != 400 || !strings.Contains(rec.Body.String(), "missing X-Original-Method") {
		t.Errorf("no method: %d %s", rec.Code, rec.Body)
	}
}

func TestForwardAuthRefusesUntrustedPeers(t *testing.T) {
	f := start(t, baseConfig)
	resp, body := testkit.Do(t, "GET", f.url(FaceForwardAuth, "/v1/auth"), "", "X-Forwarded-Uri", "/login", "X-Forwarded-Method", "POST")
	if resp.StatusCode != 403 || !strings.Contains(body, "trusted proxies only") {
		t.Errorf("standard mode: %d %s", resp.StatusCode, body)
	}
	resp, _ = testkit.Do(t, "GET", f.url(FaceForwardAuth, "/v1/auth/nginx"), "", "X-Original-URI", "/login")
	if resp.StatusCode != 500 {
		t.Errorf("nginx mode: %d, want 500 (403 means limited there)", resp.StatusCode)
	}
}

func TestTenantFromUntrustedPeerIsIgnored(t *testing.T) {
	f := start(t, baseConfig)
	// The client sets X-Tenant-ID itself; it is not a trusted proxy, so all
	// such requests share the "-" partition instead of choosing a tenant.
	for i := 0; i < 3; i++ {
		testkit.Do(t, "GET", f.url(FaceGateway, "/t/a"), "", "X-Tenant-ID", fmt.Sprint("t", i))
	}
	if resp, _ := testkit.Do(t, "GET", f.url(FaceGateway, "/t/a"), "", "X-Tenant-ID", "fresh"); resp.StatusCode != 429 {
		t.Errorf("a forged tenant got its own partition: %d", resp.StatusCode)
	}
}

func TestAdmin(t *testing.T) {
	failing := errors.New("connection refused")
	var mu sync.Mutex
	var pingErr error
	ping := func(context.Context) error { mu.Lock(); defer mu.Unlock(); return pingErr }
	store := testkit.Memory(t)
	f := start(t, baseConfig, WithStore(store, ping))
	if resp, body := testkit.Do(t, "GET", f.url(FaceAdmin, "/healthz"), ""); resp.StatusCode != 200 || body != `{"status":"ok"}` {
		t.Errorf("healthz: %d %s", resp.StatusCode, body)
	}
	if resp, _ := testkit.Do(t, "GET", f.url(FaceAdmin, "/readyz"), ""); resp.StatusCode != 200 {
		t.Errorf("readyz: %d", resp.StatusCode)
	}
	mu.Lock()
	pingErr = failing
	mu.Unlock()
	if resp, body := testkit.Do(t, "GET", f.url(FaceAdmin, "/readyz"), ""); resp.StatusCode != 503 || !strings.Contains(body, `"status":"not_ready"`) {
		t.Errorf("readyz with the store down: %d %s", resp.StatusCode, body)
	}
	if resp, _ := testkit.Do(t, "GET", f.url(FaceAdmin, "/metrics"), ""); resp.StatusCode != 401 {
		t.Errorf("metrics without the token: %d", resp.StatusCode)
	}
	testkit.Do(t, "POST", f.url(FaceGateway, "/login"), "")
	check(t, f, `{"key":"m","rule":"api"}`)
	resp, body := testkit.Do(t, "GET", f.url(FaceAdmin, "/metrics"), "", "Authorization", "Bearer admin-secret")
	if resp.StatusCode != 200 {
		t.Fatalf("metrics: %d", resp.StatusCode)
	}
	for _, want := range []string{
		`floodgate_decisions_total{outcome="allowed",policy="",rule="login"} 1`,
		`floodgate_api_checks_total{outcome="allowed"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestMemoryStoreMetrics: /metrics tells how full the memory store is.
func TestMemoryStoreMetrics(t *testing.T) {
	f := start(t, baseConfig)
	check(t, f, `{"key":"m1","rule":"api"}`)
	check(t, f, `{"key":"m2","rule":"api"}`)
	_, body := testkit.Do(t, "GET", f.url(FaceAdmin, "/metrics"), "", "Authorization", "Bearer admin-secret")
	for _, want := range []string{"\nfloodgate_memory_keys 2\n", "\nfloodgate_memory_evictions_total 0\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", strings.TrimSpace(want))
		}
	}
}

const reloadedConfig = `
gateway: {listen: "127.0.0.1:0", upstream: %q}
api: {listen: "127.0.0.1:0"}
forward_auth: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0", token: admin-secret}
trusted_proxies: ["10.0.0.0/8"]
log: {level: error}
policies:
  login: {algorithm: fixed-window, quota: 4, window: 1h}
rules:
  - {name: login, match: "POST /login", key: "{ip}|{route}", policies: [login]}
`

func TestReloadKeepsCounters(t *testing.T) {
	f := start(t, baseConfig)
	for i := 0; i < 3; i++ {
		testkit.Do(t, "POST", f.url(FaceGateway, "/login"), "")
	}
	if resp, _ := testkit.Do(t, "POST", f.url(FaceGateway, "/login"), ""); resp.StatusCode != 429 {
		t.Fatalf("before reload: %d", resp.StatusCode)
	}
	// A broken file is rejected and the old rules keep serving.
	os.WriteFile(f.file, []byte("policies: {login: {quota: nope}}\n"), 0o644)
	err := f.srv.Reload()
	var errs config.Errors
	if !errors.As(err, &errs) || !strings.Contains(err.Error(), `policies.login.quota: want a whole number, got "nope"`) {
		t.Fatalf("bad reload: %v", err)
	}
	if resp, _ := testkit.Do(t, "POST", f.url(FaceGateway, "/login"), ""); resp.StatusCode != 429 {
		t.Errorf("after a rejected reload: %d", resp.StatusCode)
	}
	// Quota 3 -> 4: the 3 requests already counted still count.
	os.WriteFile(f.file, []byte(fmt.Sprintf(reloadedConfig, f.upstream.URL)), 0o644)
	if err := f.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	resp, _ := testkit.Do(t, "POST", f.url(FaceGateway, "/login"), "")
	if resp.StatusCode != 200 || resp.Header.Get("X-Ratelimit-Remaining") != "0" || resp.Header.Get("X-Ratelimit-Limit") != "4" {
		t.Errorf("after reload: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, _ := testkit.Do(t, "POST", f.url(FaceGateway, "/login"), ""); resp.StatusCode != 429 {
		t.Errorf("5th after reload: %d", resp.StatusCode)
	}
	// The reload endpoint needs the token and reports a rejected file.
	if resp, _ := testkit.Do(t, "POST", f.url(FaceAdmin, "/-/reload"), ""); resp.StatusCode != 401 {
		t.Errorf("reload without token: %d", resp.StatusCode)
	}
	if resp, _ := testkit.Do(t, "POST", f.url(FaceAdmin, "/-/reload"), "", "Authorization", "Bearer admin-secret"); resp.StatusCode != 200 {
		t.Errorf("reload endpoint: %d", resp.StatusCode)
	}
}

func TestWatchReloadsOnFileChange(t *testing.T) {
	f := start(t, baseConfig)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.srv.Watch(ctx, 20*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // let the watch start
	// Editors replace files by renaming a new one over them.
	tmp := f.file + ".tmp"
	os.WriteFile(tmp, []byte(fmt.Sprintf(reloadedConfig, f.upstream.URL)), 0o644)
	os.Rename(tmp, f.file)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if p, ok := f.srv.Config().Policy("login"); ok && p.Quota == 4 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the file change was not applied within 5s")
}

func TestGracefulShutdownFinishesRequests(t *testing.T) {
	entered := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		time.Sleep(200 * time.Millisecond)
		fmt.Fprint(w, "done")
	}))
	defer up.Close()
	cfg, err := config.Parse("t.yaml", []byte(fmt.Sprintf(baseConfig, up.URL)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + srv.Addr(FaceGateway) + "/slow")
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- string(b)
	}()
	select {
	case <-entered:
	case b := <-got:
		t.Fatalf("the request ended before reaching the upstream: %q", b)
	case <-time.After(5 * time.Second):
		t.Fatal("the request did not reach the upstream")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if b := <-got; b != "done" {
		t.Errorf("in-flight request got %q", b)
	}
	if _, err := http.Get("http://" + srv.Addr(FaceGateway) + "/x"); err == nil {
		t.Error("still accepting after shutdown")
	}
}

func TestFailClosedStoreAnswers503(t *testing.T) {
	f := start(t, baseConfig, WithStore(brokenStore{}, nil))
	if resp, _ := testkit.Do(t, "POST", f.url(FaceGateway, "/login"), ""); resp.StatusCode != 503 {
		t.Errorf("gateway: %d, want 503 (fail-closed)", resp.StatusCode)
	}
	resp, body := testkit.Do(t, "POST", f.url(FaceAPI, "/v1/check"), `{"key":"a","rule":"api"}`)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(body, "unavailable (fail-closed)") {
		t.Errorf("api: %d %s", resp.StatusCode, body)
	}
}

type brokenStore struct{}

func (brokenStore) Take(context.Context, string, floodgate.Cost, []floodgate.Policy, []floodgate.Result) error {
	return fmt.Errorf("%w: dial tcp: connection refused", floodgate.ErrStoreUnavailable)
}
func (brokenStore) Reset(context.Context, string, []floodgate.Policy) error {
	return floodgate.ErrStoreUnavailable
}

func TestAppendOutcomeIsJSON(t *testing.T) {
	o := engine.NewOutcome(engine.Allowed, `"p";q=10;w=60`, engine.Item{Name: "p", Quota: 10, Window: time.Minute, Unit: "requests", Allowed: true, Remaining: 9, ResetAfter: 6 * time.Second})
	b := appendOutcome(nil, "ke\"y\n\u2028<é>", &o)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if m["key"] != "ke\"y\n\u2028<é>" || m["remaining"] != float64(9) || m["reset"] != float64(54) { // r/t capped at q/w: 9 per 54 s
		t.Errorf("%s", b)
	}
}

// FuzzParseSimple checks the fast path against encoding/json: whenever it
// accepts a body, the strict decoder accepts it too with the same result.
func FuzzParseSimple(f *testing.F) {
	for _, s := range []string{`{"key":"a","rule":"api"}`, `{"key":"a","policies":["x","y"],"cost":3}`, ` { "cost" : -1 , "key":"k" } `, `{}`, `{"key":"a\"b"}`, `{"cost":1.5}`, `{"policies":[]}`, `{"key":"é"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast CheckRequest
		if !parseSimple(b, &fast) {
			return
		}
		var strict CheckRequest
		if err := decodeStrict(b, &strict); err != nil {
			t.Fatalf("fast path accepted %q, strict decoder: %v", b, err)
		}
		fj, _ := json.Marshal(fast)
		sj, _ := json.Marshal(strict)
		if string(fj) != string(sj) {
			t.Fatalf("%q: fast %s, strict %s", b, fj, sj)
		}
	})
}

// TestRestartNeeded: what a reload cannot change is reported, the logger
// and the ops parts read at New included.
func TestRestartNeeded(t *testing.T) {
	parse := func(extra string) *config.Config {
		c, err := config.Parse("f.yaml", []byte("api: {listen: '127.0.0.1:0'}\n"+extra))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	old := parse("")
	if got := restartNeeded(old, parse("")); len(got) != 0 {
		t.Errorf("same file: %q", got)
	}
	got := restartNeeded(old, parse("log: {level: debug}\nops: {raw_keys: true}\n"))
	if want := []string{"log", "ops webhook, raw_keys, reductions or fingerprint_secret"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestDemoUpstreamSurvivesReload: with WithDemoUpstream (serve --demo) the
// gateway answers from the demo app, also after a reload of the file,
// whose gateway.upstream names the real one.
func TestDemoUpstreamSurvivesReload(t *testing.T) {
	f := start(t, baseConfig, WithDemoUpstream())
	for _, step := range []string{"start", "reload"} {
		if step == "reload" {
			if err := f.srv.Reload(); err != nil {
				t.Fatal(err)
			}
		}
		resp, body := testkit.Do(t, "GET", f.url(FaceGateway, "/anything"), "")
		if resp.StatusCode != 200 || !strings.Contains(body, `"ok":true`) || resp.Header.Get("X-Upstream") != "" {
			t.Fatalf("%s: %d %q, want the demo app's answer", step, resp.StatusCode, body)
		}
	}
}

// TestSlowBodyCutOff: a client that sends a decision request's headers
// and then drips its body, or stops, is cut off after
// listeners.read_timeout instead of holding the connection for good.
func TestSlowBodyCutOff(t *testing.T) {
	f := start(t, baseConfig+"listeners: {read_timeout: 300ms}\n")
	c, err := net.Dial("tcp", f.srv.Addr(FaceAPI))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	begun := time.Now()
	fmt.Fprint(c, "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"key\":")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	reply, err := io.ReadAll(c)
	if took := time.Since(begun); err != nil || took > 3*time.Second {
		t.Fatalf("connection still open after %v (read error %v)", took, err)
	}
	if len(reply) > 0 && !strings.HasPrefix(string(reply), "HTTP/1.1 4") {
		t.Errorf("answer to an unfinished body: %q", reply)
	}
}

// TestAPIOnlyRuleOrder: without a gateway or forward-auth, rules are
// reached by name through /v1/check, so one that an earlier rule's pattern
// covers is fine: the daemon starts and checks it.
func TestAPIOnlyRuleOrder(t *testing.T) {
	f := start(t, `api: {listen: "127.0.0.1:0"}
policies: {a: {quota: 2, window: 1m}}
rules:
  - {name: all, match: /, policies: a}
  - {name: login, match: POST /login, policies: a}
`)
	resp, m := check(t, f, `{"key":"k","rule":"login"}`)
	if resp.StatusCode != 200 || m["allowed"] != true || m["remaining"] != float64(1) {
		t.Fatalf("check of the covered rule: %d %v", resp.StatusCode, m)
	}
}

// TestGatewayCostHeader: the upstream reports the tokens an answer used;
// the gateway strips the header and settles the rule's cost with it, so
// a key past its quota is refused until the window ends.
func TestGatewayCostHeader(t *testing.T) {
	f := start(t, `
gateway: {listen: "127.0.0.1:0", upstream: %q}
log: {level: error}
policies:
  tokens: {algorithm: fixed-window, quota: 100, window: 1h}
rules:
  - {name: llm, match: "/v1/", policies: [tokens], cost: 10, cost_header: X-Tokens-Used}
`)
	for i, c := range []struct {
		cost, remaining string
		status          int
	}{
		{"60", "90", 200}, // 10 admitted, then 50 more posted: 40 left
		{"70", "30", 200}, // 10 admitted, then 60 more posted: 130 of 100
		{"1", "0", 429},   // in debt
	} {
		resp, _ := testkit.Do(t, "POST", f.url(FaceGateway, "/v1/chat"), "", "X-Test-Cost", c.cost)
		if resp.StatusCode != c.status || resp.Header.Get("X-Ratelimit-Remaining") != c.remaining {
			t.Fatalf("request %d: %d, X-RateLimit-Remaining %q; want %d, %s", i, resp.StatusCode, resp.Header.Get("X-Ratelimit-Remaining"), c.status, c.remaining)
		}
		if _, ok := resp.Header["X-Tokens-Used"]; ok {
			t.Fatalf("request %d: the client sees the upstream's cost header", i)
		}
	}
}

// TestAPISettle: a check with "reserve" answers a reservation id, which
// POST /v1/settle settles once with the actual cost: the excess counted
// past the quota, so the next check is refused; a second settle, an
// unknown id and a reserving batch are refused.
func TestAPISettle(t *testing.T) {
	f := start(t, baseConfig)
	settle := func(body string) int {
		t.Helper()
		resp, _ := testkit.Do(t, "POST", f.url(FaceAPI, "/v1/settle"), body)
		return resp.StatusCode
	}
	_, m := check(t, f, `{"key":"u1","rule":"login","reserve":true}`)
	id, _ := m["reservation"].(string)
	if m["allowed"] != true || m["remaining"] != float64(2) || len(id) != 32 {
		t.Fatalf("reserving check: %v", m)
	}
	if code := settle(`{"reservation":"` + id + `","cost":5}`); code != 204 {
		t.Fatalf("settle: %d", code)
	}
	if _, m := check(t, f, `{"key":"u1","rule":"login"}`); m["allowed"] != false || m["remaining"] != float64(0) {
		t.Fatalf("after 5 of 3: %v, want refused", m)
	}
	for body, want := range map[string]int{
		`{"reservation":"` + id + `","cost":1}`: 404, // settled already
		`{"reservation":"nope","cost":1}`:       404,
		`{"reservation":"` + id + `"}`:          400,
		`{"reservation":"x","cost":-1}`:         400,
	} {
		if code := settle(body); code != want {
			t.Errorf("settle %s: %d, want %d", body, code, want)
		}
	}
	// A refund: reserve 3 of the fresh key's 3, settle at 1: 2 back.
	_, m = check(t, f, `{"key":"u2","rule":"login","cost":3,"reserve":true}`)
	if code := settle(`{"reservation":"` + m["reservation"].(string) + `","cost":1}`); code != 204 {
		t.Fatalf("refund: %d", code)
	}
	if _, m := check(t, f, `{"key":"u2","rule":"login","cost":2}`); m["allowed"] != true || m["remaining"] != float64(0) {
		t.Fatalf("after the refund: %v, want 2 admitted", m)
	}
	if resp, _ := testkit.Do(t, "POST", f.url(FaceAPI, "/v1/check"), `[{"key":"u3","rule":"login","reserve":true}]`); resp.StatusCode != 400 {
		t.Errorf("reserving batch: %d", resp.StatusCode)
	}
}
