package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
)

// egNode is the node ID Envoy Gateway gives its rate limit Deployment.
const egNode = "envoy-ratelimit"

// writeCerts writes a CA and a certificate it signs for 127.0.0.1, for
// server and client use alike, as Envoy Gateway's envoy-rate-limit
// Secret holds them: ca.crt, tls.crt, tls.key.
func writeCerts(t *testing.T, dir string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "envoy-ratelimit"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caCert, _ := x509.ParseCertificate(caDER)
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	for name, block := range map[string]*pem.Block{"ca.crt": {Type: "CERTIFICATE", Bytes: caDER},
		"tls.crt": {Type: "CERTIFICATE", Bytes: der}, "tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// tlsConfig is the certificates of dir as a server requiring client
// certificates (server true) or as a client.
func tlsConfig(t *testing.T, dir string, server bool) *tls.Config {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pemCA, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	pool.AppendCertsFromPEM(pemCA)
	if server {
		return &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool}
}

// egXDS is go-control-plane's management server over mutual TLS, as
// Envoy Gateway serves rate limit rules; acks receives the version of
// every ACK and the message of every NACK.
type egXDS struct {
	cache cachev3.SnapshotCache
	addr  string
	acks  chan string
}

func newEGXDS(t *testing.T, certs string) *egXDS {
	x := &egXDS{cache: cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil), acks: make(chan string, 16)}
	cb := serverv3.CallbackFuncs{StreamRequestFunc: func(_ int64, r *discoverygrpc.DiscoveryRequest) error {
		switch {
		case r.ResponseNonce == "":
		case r.ErrorDetail != nil:
			x.acks <- "NACK " + r.ErrorDetail.Message
		default:
			x.acks <- r.VersionInfo
		}
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(tlsConfig(t, certs, true))))
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, serverv3.NewServer(ctx, x.cache, cb))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	x.addr = ln.Addr().String()
	go g.Serve(ln)
	t.Cleanup(func() { g.Stop(); cancel() })
	return x
}

func (x *egXDS) push(t *testing.T, version string, perMinute uint32) {
	t.Helper()
	// Envoy Gateway sends one config per listener, named as its domain.
	c := &rlconfv3.RateLimitConfig{Name: "default/eg/http", Domain: "default/eg/http", Descriptors: []*rlconfv3.RateLimitDescriptor{{
		Key: "rule-0-match-0", Value: "rule-0-match-0",
		RateLimit: &rlconfv3.RateLimitPolicy{Unit: rlconfv3.RateLimitUnit_MINUTE, RequestsPerUnit: perMinute}}}}
	snap, err := cachev3.NewSnapshot(version, map[resourcev3.Type][]types.Resource{resourcev3.RateLimitConfigType: {c}})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.cache.SetSnapshot(context.Background(), egNode, snap); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-x.acks:
		if got != version {
			t.Fatalf("push %s: the daemon answered %q", version, got)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("push %s: no ACK in 20s", version)
	}
}

// egEnv is the environment Envoy Gateway's rate limit Deployment sets
// (internal/infrastructure/kubernetes/ratelimit), with the ports and
// paths a test can use.
func egEnv(certs, xds, redis, prefix string, ports [3]string) []string {
	return []string{
		"RUNTIME_ROOT=/data", "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_IGNOREDOTFILES=true", "RUNTIME_WATCH_ROOT=false",
		"LOG_LEVEL=info", "USE_STATSD=false", "CONFIG_TYPE=GRPC_XDS_SOTW",
		"CONFIG_GRPC_XDS_SERVER_URL=" + xds, "CONFIG_GRPC_XDS_NODE_ID=" + egNode,
		"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=" + certs + "/tls.crt", "GRPC_SERVER_TLS_KEY=" + certs + "/tls.key",
		"GRPC_SERVER_TLS_CA_CERT=" + certs + "/ca.crt",
		"CONFIG_GRPC_XDS_SERVER_USE_TLS=true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT=" + certs + "/tls.crt",
		"CONFIG_GRPC_XDS_CLIENT_TLS_KEY=" + certs + "/tls.key", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT=" + certs + "/ca.crt",
		"FORCE_START_WITHOUT_INITIAL_CONFIG=true", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + redis,
		"USE_PROMETHEUS=true", "PROMETHEUS_ADDR=" + ports[2], "PROMETHEUS_MAPPER_YAML=/etc/statsd-exporter/conf.yaml",
		// Not Envoy Gateway's: loopback addresses a test may listen on,
		// its own key prefix in the shared Redis, and a short backoff.
		"HOST=127.0.0.1", "PORT=" + portOf(ports[0]), "GRPC_HOST=127.0.0.1", "GRPC_PORT=" + portOf(ports[1]),
		"CACHE_KEY_PREFIX=" + prefix, "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL=100ms",
	}
}

func portOf(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }

func httpStatus(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRatelimitEntrypoint: the binary run as /bin/ratelimit with only
// Envoy Gateway's environment answers /healthcheck before any rules
// (force start), takes rules from an xDS server over mutual TLS, answers
// ShouldRateLimit over mutual TLS (a client without a certificate is
// refused), serves ratelimit's metrics, and stops on SIGTERM.
func TestRatelimitEntrypoint(t *testing.T) {
	redisAddr := testkit.Env(t, "FLOODGATE_TEST_REDIS")
	certs := t.TempDir()
	writeCerts(t, certs)
	x := newEGXDS(t, certs)
	ports := [3]string{freePort(t), freePort(t), freePort(t)}
	bin := filepath.Join(t.TempDir(), "ratelimit")
	if err := os.Symlink(binary, bin); err != nil {
		t.Fatal(err)
	}
	out := &testkit.Buffer{}
	cmd := exec.Command(bin)
	cmd.Env = egEnv(certs, x.addr, redisAddr, "fg-eg-"+t.Name()+time.Now().Format("150405.000")+":", ports)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	}()
	waitPort(t, ports[0], out)
	if code, body := httpStatus(t, "http://"+ports[0]+"/healthcheck"); code != 200 || body != "OK" {
		t.Fatalf("/healthcheck before any snapshot with FORCE_START_WITHOUT_INITIAL_CONFIG: %d %q", code, body)
	}
	x.push(t, "1", 2)

	conn, err := grpc.NewClient(ports[1], grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig(t, certs, false))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := rlsv3.NewRateLimitServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := &rlsv3.RateLimitRequest{Domain: "default/eg/http", Descriptors: []*commonv3.RateLimitDescriptor{
		{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "rule-0-match-0", Value: "rule-0-match-0"}}}}}
	anon := tlsConfig(t, certs, false)
	anon.Certificates = nil
	if conn, err := grpc.NewClient(ports[1], grpc.WithTransportCredentials(credentials.NewTLS(anon))); err != nil {
		t.Fatal(err)
	} else {
		if _, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, req); err == nil {
			t.Error("a client without a certificate was answered")
		}
		conn.Close()
	}
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		resp, err := c.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatalf("request %d: %v; output:\n%s", i, err, out)
		}
		if resp.OverallCode != want || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 2 {
			t.Fatalf("request %d: %v, want %v under 2 a minute", i, resp, want)
		}
	}
	_, metrics := httpStatus(t, "http://"+ports[2]+"/metrics")
	for _, line := range []string{
		`ratelimit_service_rate_limit_total_hits{domain="default/eg/http",key1="rule-0-match-0_rule-0-match-0",key2=""} 3`,
		`ratelimit_service_rate_limit_within_limit{domain="default/eg/http",key1="rule-0-match-0_rule-0-match-0",key2=""} 2`,
		`ratelimit_service_rate_limit_over_limit{domain="default/eg/http",key1="rule-0-match-0_rule-0-match-0",key2=""} 1`,
		`ratelimit_service_rate_limit_near_limit{domain="default/eg/http",key1="rule-0-match-0_rule-0-match-0",key2=""} 1`,
		`ratelimit_service_config_load_success 1`,
	} {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("metrics lack %q", line)
		}
	}
	if !strings.Contains(out.String(), "PROMETHEUS_MAPPER_YAML is ignored") {
		t.Errorf("no warning about PROMETHEUS_MAPPER_YAML; output:\n%s", out)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v; output:\n%s", err, out)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("still running 20s after SIGTERM")
	}
}
