package server

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
)

// callersConfig is baseConfig with two API callers: "login-app" may check
// the login rule only, on keys of 192.0.2.*; "ops" may do everything.
const callersConfig = baseConfig + `
listeners: {allowed_hosts: [floodgate.internal]}
`

func withCallers(t *testing.T) *fixture {
	t.Setenv("FG_TEST_LOGIN_SECRET", "login-app-secret-0123456789")
	file := filepath.Join(t.TempDir(), "ops.secret")
	if err := os.WriteFile(file, []byte("ops-secret-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := strings.Replace(callersConfig, "api:\n  listen: \"127.0.0.1:0\"\n", `api:
  listen: "127.0.0.1:0"
  callers:
    - {name: login-app, secret: "${FG_TEST_LOGIN_SECRET}", scopes: [check], rules: [login], key_prefixes: ["192.0.2."]}
    - {name: ops, secret_file: `+file+`, scopes: [check, read, reset], rules: ["*"]}
`, 1)
	return start(t, yaml)
}

func apiDo(t *testing.T, f *fixture, method, path, body, secret string) (*http.Response, string) {
	t.Helper()
	var hdr []string
	if secret != "" {
		hdr = []string{"Authorization", "Bearer " + secret}
	}
	return testkit.Do(t, method, f.url(FaceAPI, path), body, hdr...)
}

// TestAPICallers: with callers configured, a check without a secret is
// 401 and one outside the caller's rules or key prefixes is 403, so a
// caller cannot spend the gateway's login quota of another client (the
// lockout); its own rule and keys pass; scopes gate peek and reset.
func TestAPICallers(t *testing.T) {
	f := withCallers(t)
	const victim = `{"key":"127.0.0.1|POST /login","rule":"login"}`
	if resp, _ := apiDo(t, f, "POST", "/v1/check", victim, ""); resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("check without a secret: %d", resp.StatusCode)
	}
	if resp, _ := apiDo(t, f, "POST", "/v1/check", victim, "wrong-secret-0123456789"); resp.StatusCode != 401 {
		t.Fatalf("check with a wrong secret: %d", resp.StatusCode)
	}
	for _, body := range []string{victim, `{"key":"192.0.2.1","rule":"tenant"}`, `{"key":"192.0.2.1","policies":["login"]}`} {
		if resp, b := apiDo(t, f, "POST", "/v1/check", body, "login-app-secret-0123456789"); resp.StatusCode != 403 {
			t.Fatalf("login-app checks %s: %d %s, want 403", body, resp.StatusCode, b)
		}
	}
	resp, b := apiDo(t, f, "POST", "/v1/check", `[{"key":"192.0.2.1","rule":"login"},{"key":"acme","rule":"tenant"}]`, "login-app-secret-0123456789")
	if resp.StatusCode != 200 || !strings.Contains(b, `"remaining":2`) || !strings.Contains(b, `"status":403`) {
		t.Fatalf("batch: %d %s, want the first decided and the second 403", resp.StatusCode, b)
	}
	// Nothing was spent on the victim's key: its three logins pass.
	for i := range 3 {
		if resp, _ := testkit.Do(t, "POST", f.url(FaceGateway, "/login"), ""); resp.StatusCode != 200 {
			t.Fatalf("victim's login %d: %d", i+1, resp.StatusCode)
		}
	}
	if resp, _ := apiDo(t, f, "GET", "/v1/limits/192.0.2.1?rule=login&form=partition", "", "login-app-secret-0123456789"); resp.StatusCode != 403 {
		t.Fatalf("peek without the read scope: %d", resp.StatusCode)
	}
	if resp, b := apiDo(t, f, "GET", "/v1/limits/192.0.2.1?rule=login&form=partition", "", "ops-secret-0123456789abcdef"); resp.StatusCode != 200 || !strings.Contains(b, `"remaining":2`) {
		t.Fatalf("peek by ops: %d %s", resp.StatusCode, b)
	}
	if resp, _ := apiDo(t, f, "DELETE", "/v1/limits/192.0.2.1?rule=login&form=partition", "", "ops-secret-0123456789abcdef"); resp.StatusCode != 200 {
		t.Fatalf("reset by ops: %d", resp.StatusCode)
	}
	if resp, _ := apiDo(t, f, "DELETE", "/v1/limits/192.0.2.1?rule=login&form=partition", "", "admin-secret"); resp.StatusCode != 200 {
		t.Fatalf("reset with the admin token: %d", resp.StatusCode)
	}
}

// TestAPILoopbackWithoutCallers: with no callers, an API configured on
// every interface listens on loopback only.
func TestAPILoopbackWithoutCallers(t *testing.T) {
	f := start(t, "api: {listen: ':0'}\nadmin: {listen: 'off'}\npolicies: {a: {quota: 2, window: 1m}}\nrules: [{name: r, match: /, policies: a}]\n")
	if host, _, _ := net.SplitHostPort(f.srv.Addr(FaceAPI)); host != "127.0.0.1" {
		t.Fatalf("API on %s, want loopback", f.srv.Addr(FaceAPI))
	}
	// A reload that removes every caller keeps a listener bound for
	// callers: each request is held to loopback as well.
	h := f.srv.guardAPI(config.ScopeCheck, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	for addr, want := range map[string]int{"192.0.2.2:4000": 403, "127.0.0.1:4000": 200, "[::1]:4000": 200} {
		req := httptest.NewRequest("POST", "/v1/check", strings.NewReader(`{"key":"k","rule":"r"}`))
		req.RemoteAddr = addr
		rec := httptest.NewRecorder()
		h(rec, req)
		if rec.Code != want {
			t.Errorf("check from %s without callers: %d, want %d", addr, rec.Code, want)
		}
	}
}

// TestAdminBehindToken: with admin.token set, every admin endpoint but the
// probes needs it; admin.read_token opens the read-only ones and no more.
func TestAdminBehindToken(t *testing.T) {
	f := start(t, strings.Replace(baseConfig, "token: admin-secret", "token: admin-secret\n  read_token: reader-secret", 1))
	admin := func(method, path, token string) int {
		t.Helper()
		var hdr []string
		if token != "" {
			hdr = []string{"Authorization", "Bearer " + token}
		}
		resp, _ := testkit.Do(t, method, f.url(FaceAdmin, path), `{"policies":["api"],"factor":0.5,"duration":"1m"}`, hdr...)
		return resp.StatusCode
	}
	read := []string{"/dashboard/", "/dashboard/data.json", "/v1/admin/top", "/v1/admin/alerts", "/v1/admin/reductions", "/metrics"}
	for _, p := range read {
		if got := admin("GET", p, ""); got != 401 {
			t.Errorf("GET %s without a token: %d, want 401", p, got)
		}
		if got := admin("GET", p, "reader-secret"); got != 200 {
			t.Errorf("GET %s with the read token: %d, want 200", p, got)
		}
	}
	for _, p := range []string{"/healthz", "/readyz", "/healthz/store"} {
		if got := admin("GET", p, ""); got != 200 {
			t.Errorf("probe %s: %d", p, got)
		}
	}
	if got := admin("POST", "/v1/admin/reduce", "reader-secret"); got != 403 {
		t.Errorf("reduce with the read token: %d, want 403", got)
	}
	if got := admin("POST", "/-/reload", "reader-secret"); got != 403 {
		t.Errorf("reload with the read token: %d, want 403", got)
	}
	if got := admin("POST", "/v1/admin/reduce", "admin-secret"); got != 200 {
		t.Errorf("reduce with the admin token: %d", got)
	}
}

// TestAdminWithoutTokenLoopbackReads: with no admin.token, the counts of
// /metrics answer anyone, while the dashboard and the admin reads (key
// fingerprints) answer loopback clients only, on whatever address the
// admin listener has; the start log says so.
func TestAdminWithoutTokenLoopbackReads(t *testing.T) {
	var logs testkit.Buffer
	f := start(t, "api: {listen: ':0'}\nadmin: {listen: ':0'}\npolicies: {a: {quota: 2, window: 1m}}\nrules: [{name: r, match: /, policies: a}]\n",
		WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if !strings.Contains(logs.String(), "admin.listen faces the network and admin.token is unset") {
		t.Errorf("no warning at start of an admin listener on :0 without a token:\n%s", logs.String())
	}
	mux := http.NewServeMux()
	f.srv.route(mux, FaceAdmin, f.srv.Addr(FaceAdmin))
	for _, c := range []struct {
		path   string
		remote string
		want   int
	}{
		{"/metrics", "192.0.2.2:4000", 200},
		{"/dashboard/", "192.0.2.2:4000", 403},
		{"/v1/admin/top", "192.0.2.2:4000", 403},
		{"/dashboard/", "127.0.0.1:4000", 200},
		{"/v1/admin/top", "[::1]:4000", 200},
		{"/healthz", "192.0.2.2:4000", 200},
	} {
		req := httptest.NewRequest("GET", c.path, nil)
		req.Host, req.RemoteAddr = "127.0.0.1", c.remote
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("GET %s from %s without admin.token: %d, want %d (%s)", c.path, c.remote, rec.Code, c.want, rec.Body)
		}
	}
}

// TestHostAllowList: a DNS-rebinding request (Host and Origin the
// attacker's name) is refused on the API and the admin listener; IP
// literals, localhost and listeners.allowed_hosts pass.
func TestHostAllowList(t *testing.T) {
	f := start(t, baseConfig+"listeners: {allowed_hosts: [floodgate.internal, '*.svc.cluster.local']}\n")
	for _, c := range []struct {
		face Face
		path string
	}{{FaceAPI, "/v1/check"}, {FaceAdmin, "/dashboard/data.json"}} {
		method := "POST"
		if c.face == FaceAdmin {
			method = "GET"
		}
		for host, want := range map[string]int{
			"rebind.attacker.example": 421, "127.0.0.1": 0, "localhost:1234": 0,
			"floodgate.internal": 0, "fg.ns.svc.cluster.local": 0, "svc.cluster.local.attacker.example": 421,
		} {
			req, _ := http.NewRequest(method, f.url(c.face, c.path), strings.NewReader(`{"key":"k","rule":"login"}`))
			req.Host = host
			req.Header.Set("Origin", "http://"+host)
			req.Header.Set("Authorization", "Bearer admin-secret")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if (want == 421) != (resp.StatusCode == 421) {
				t.Errorf("%s %s with Host %s: %d", method, c.path, host, resp.StatusCode)
			}
		}
	}
}

// TestGatewayDripUploadCut: a client dripping a request body to the
// gateway is cut off at gateway.upload_timeout.
func TestGatewayDripUploadCut(t *testing.T) {
	f := start(t, strings.Replace(baseConfig, "timeout: 2s", "timeout: 2s\n  upload_timeout: 300ms", 1))
	c, err := net.Dial("tcp", f.srv.Addr(FaceGateway))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
	cut := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, c); cut <- err }()
	for i := 0; ; i++ {
		select {
		case <-cut:
			return
		case <-time.After(50 * time.Millisecond):
		}
		if i > 200 { // 10 s, far past the 300 ms bound
			t.Fatal("drip upload still connected")
		}
		c.Write([]byte("x"))
	}
}

// TestClientAddressHeadersStripped: the headers CDNs use to name the
// client do not reach the upstream from an untrusted peer.
func TestClientAddressHeadersStripped(t *testing.T) {
	f := start(t, baseConfig)
	resp, _ := testkit.Do(t, "GET", f.url(FaceGateway, "/x"), "", "CF-Connecting-IP", "6.6.6.6", "True-Client-IP", "6.6.6.6",
		"X-Client-IP", "6.6.6.6", "Forwarded", "for=6.6.6.6", "Fastly-Client-IP", "6.6.6.6",
		"X_Forwarded_For", "6.6.6.6", "X_Real_IP", "6.6.6.6", "Client-IP", "6.6.6.6", "X-Original-URL", "/6.6.6.6")
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	r := <-f.hits
	for name, v := range r.Header {
		if strings.Contains(strings.Join(v, ","), "6.6.6.6") {
			t.Errorf("%s: %q reached the upstream", name, v)
		}
	}
}

// TestMaxHeaderBytes: a request with 1 MiB of headers is refused (431)
// and not forwarded.
func TestMaxHeaderBytes(t *testing.T) {
	f := start(t, baseConfig)
	c, err := net.Dial("tcp", f.srv.Addr(FaceGateway))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The server answers once it has read 64 KiB and a little more, and
	// stops reading: the rest is written without waiting for it.
	go fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 1<<20))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 12)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "HTTP/1.1 431" {
		t.Fatalf("1 MiB of headers: %q %v, want 431", buf, err)
	}
	select {
	case <-f.hits:
		t.Fatal("forwarded")
	default:
	}
}

// TestConnectionCap: a listener holds at most listeners.max_connections
// open connections; while all are busy with a request, the next waits
// until one closes.
func TestConnectionCap(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer up.Close()
	defer close(release)
	f := start(t, fmt.Sprintf("gateway: {listen: '127.0.0.1:0', upstream: %q, timeout: 1m}\nadmin: {listen: 'off'}\nlisteners: {max_connections: 2}\nlog: {level: error}\n", up.URL))
	addr := f.srv.Addr(FaceGateway)
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprint(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n") // held by the upstream
		held = append(held, c)
	}
	third, err := net.Dial("tcp", addr) // the kernel accepts; the server does not
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	fmt.Fprint(third, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, _ := third.Read(make([]byte, 1)); n != 0 {
		t.Fatal("a third connection was served while two were busy")
	}
	held[0].Close()
	release <- struct{}{} // the first request's upstream call ends
	release <- struct{}{} // the second's
	release <- struct{}{} // the third's
	third.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 12)
	if _, err := io.ReadFull(third, buf); err != nil || string(buf) != "HTTP/1.1 200" {
		t.Fatalf("after one closed: %q %v", buf, err)
	}
}

// TestIdleConnectionsShed: with every place of listeners.max_connections
// held by idle keep-alive connections and connections that never sent a
// request, a new client is served at once (not after idle_timeout, 2m,
// or read_header_timeout, 10s): the connection idle longest is closed.
// The busy ones are kept.
func TestIdleConnectionsShed(t *testing.T) {
	f := start(t, baseConfig+"listeners: {max_connections: 20}\n")
	addr := f.srv.Addr(FaceAdmin)
	get := func(c net.Conn) error {
		fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	var conns []net.Conn
	for i := range 20 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if i < 15 { // keep-alive, idle after one request; the rest silent
			if err := get(c); err != nil {
				t.Fatalf("connection %d within the cap: %v", i, err)
			}
		}
		conns = append(conns, c)
	}
	for i := range 5 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := get(c); err != nil {
			t.Fatalf("new client %d at the cap: %v", i, err)
		}
	}
	conns[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := conns[0].Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("the connection idle longest is still open: %d %v", n, err)
	}
}

// TestTLSReload: with listeners.tls every listener speaks TLS, and a
// certificate written over the old one is served without a restart; with
// client_ca_file a client without a certificate is refused.
func TestTLSReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeCert(t, certFile, keyFile, "first")
	yaml := func(extra string) string {
		return fmt.Sprintf("api: {listen: '127.0.0.1:0'}\nadmin: {listen: 'off'}\npolicies: {a: {quota: 2, window: 1m}}\nrules: [{name: r, match: /, policies: a}]\nlisteners: {tls: {cert_file: %s, key_file: %s%s}}\n", certFile, keyFile, extra)
	}
	f := start(t, yaml(""))
	serial := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", f.srv.Addr(FaceAPI), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := serial(); got != "first" {
		t.Fatalf("certificate %q", got)
	}
	writeCert(t, certFile, keyFile, "second")
	// Files are looked at once a second at most; wait for the new one
	// with a bound far above that.
	deadline := time.Now().Add(20 * time.Second)
	for serial() != "second" {
		if time.Now().After(deadline) {
			t.Fatal("the renewed certificate was not served")
		}
		time.Sleep(100 * time.Millisecond)
	}

	caFile := filepath.Join(dir, "ca.pem")
	writeCert(t, caFile, filepath.Join(dir, "ca-key.pem"), "some-ca")
	g := start(t, yaml(", client_ca_file: "+caFile))
	c, err := tls.Dial("tcp", g.srv.Addr(FaceAPI), &tls.Config{InsecureSkipVerify: true})
	if err == nil {
		// TLS 1.3 reports the refused client certificate on first read.
		_, err = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		if err == nil {
			_, err = c.Read(make([]byte, 1))
		}
		c.Close()
	}
	if err == nil {
		t.Fatal("mutual TLS let a client without a certificate in")
	}
}

// TestCallerSecretHashed: a caller given by its secret's SHA-256 is
// accepted by the secret.
func TestCallerSecretHashed(t *testing.T) {
	sum := sha256.Sum256([]byte("hashed-secret-0123456789"))
	f := start(t, fmt.Sprintf(`api:
  listen: "127.0.0.1:0"
  callers: [{name: c, secret_sha256: %s, rules: ["*"]}]
admin: {listen: 'off'}
policies: {a: {quota: 2, window: 1m}}
rules: [{name: r, match: /, policies: a}]
`, hex.EncodeToString(sum[:])))
	if resp, b := apiDo(t, f, "POST", "/v1/check", `{"key":"k","rule":"r"}`, "hashed-secret-0123456789"); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// writeCert writes a self-signed certificate for 127.0.0.1 named cn.
func writeCert(t *testing.T, certFile, keyFile, cn string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
