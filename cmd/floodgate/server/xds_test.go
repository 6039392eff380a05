package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
	"google.golang.org/grpc/credentials/insecure"
)

const xdsNodeID = "floodgate-test"

// xdsFixture is go-control-plane's own management server on loopback,
// recording what the daemon sends back for each response it got.
type xdsFixture struct {
	cache cachev3.SnapshotCache
	addr  string
	mu    sync.Mutex
	sent  map[string]string // response nonce -> version it carried
	reqs  chan *discoverygrpc.DiscoveryRequest
	stop  func()
}

func newXDSServer(t testing.TB) *xdsFixture { return newXDSServerAt(t, "127.0.0.1:0") }

// newXDSServerAt serves on addr; stop ends it before the test does.
func newXDSServerAt(t testing.TB, addr string) *xdsFixture {
	t.Helper()
	x := &xdsFixture{cache: cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil), sent: map[string]string{},
		reqs: make(chan *discoverygrpc.DiscoveryRequest, 100)}
	cb := serverv3.CallbackFuncs{
		StreamRequestFunc: func(_ int64, r *discoverygrpc.DiscoveryRequest) error {
			x.reqs <- r
			return nil
		},
		StreamResponseFunc: func(_ context.Context, _ int64, _ *discoverygrpc.DiscoveryRequest, r *discoverygrpc.DiscoveryResponse) {
			x.mu.Lock()
			x.sent[r.Nonce] = r.VersionInfo
			x.mu.Unlock()
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := grpc.NewServer()
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, serverv3.NewServer(ctx, x.cache, cb))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	x.addr = ln.Addr().String()
	go g.Serve(ln)
	x.stop = func() { g.Stop(); cancel() }
	t.Cleanup(x.stop)
	return x
}

// push makes configs the node's snapshot at version.
func (x *xdsFixture) push(t testing.TB, version string, configs ...*rlconfv3.RateLimitConfig) {
	t.Helper()
	rs := make([]types.Resource, len(configs))
	for i, c := range configs {
		rs[i] = c
	}
	snap, err := cachev3.NewSnapshot(version, map[resourcev3.Type][]types.Resource{resourcev3.RateLimitConfigType: rs})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.cache.SetSnapshot(context.Background(), xdsNodeID, snap); err != nil {
		t.Fatal(err)
	}
}

// answer waits for the daemon's answer to the response that carried
// version: its ACK or NACK, as the server received it.
func (x *xdsFixture) answer(t testing.TB, version string) *discoverygrpc.DiscoveryRequest {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case r := <-x.reqs:
			x.mu.Lock()
			v, ok := x.sent[r.ResponseNonce]
			x.mu.Unlock()
			if ok && v == version {
				if r.TypeUrl != resourcev3.RateLimitConfigType || r.Node.GetId() != xdsNodeID {
					t.Errorf("request for %s from node %q", r.TypeUrl, r.Node.GetId())
				}
				return r
			}
		case <-timeout:
			t.Fatalf("no answer to version %s", version)
		}
	}
}

func rlConfig(name, domain string, descs ...*rlconfv3.RateLimitDescriptor) *rlconfv3.RateLimitConfig {
	return &rlconfv3.RateLimitConfig{Name: name, Domain: domain, Descriptors: descs}
}

func perHour(key string, n uint32) *rlconfv3.RateLimitDescriptor {
	return &rlconfv3.RateLimitDescriptor{Key: key, RateLimit: &rlconfv3.RateLimitPolicy{Unit: rlconfv3.RateLimitUnit_HOUR, RequestsPerUnit: n}}
}

const xdsDaemon = `
envoy_rls:
  listen: "127.0.0.1:0"
  xds: {server: %q, node_id: ` + xdsNodeID + `, backoff_initial: 50ms, backoff_max: 200ms}
admin: {listen: "127.0.0.1:0"}
log: {level: error}
`

func rlsClient(t testing.TB, addr string) rlsv3.RateLimitServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

func askRLS(t testing.TB, c rlsv3.RateLimitServiceClient, domain, key, value string) *rlsv3.RateLimitResponse_DescriptorStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*commonv3.RateLimitDescriptor{
		{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: key, Value: value}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Statuses[0]
}

// TestXDSSnapshots: snapshots from go-control-plane's server are ACKed
// and applied, a bad one NACKed with its error while the rules in force
// keep deciding, a change keeps the counters of the limits it keeps, and
// a removed domain stops limiting (docs/ENVOY.md, rules over xDS).
func TestXDSSnapshots(t *testing.T) {
	x := newXDSServer(t)
	f := start(t, fmt.Sprintf(xdsDaemon, x.addr))
	c := rlsClient(t, f.srv.Addr(FaceEnvoyRLS))
	if f.srv.RLSReady() {
		t.Error("ready before any snapshot")
	}
	if st := askRLS(t, c, "edge", "user", "a"); st.Code != rlsv3.RateLimitResponse_OK || st.CurrentLimit != nil {
		t.Errorf("before any snapshot: %v, want OK without a limit", st)
	}

	x.push(t, "v1", rlConfig("edge-config", "edge", perHour("user", 3)), rlConfig("gone-config", "gone", perHour("k", 1)))
	if r := x.answer(t, "v1"); r.ErrorDetail != nil || r.VersionInfo != "v1" {
		t.Fatalf("v1: want an ACK of v1, got version %q error %v", r.VersionInfo, r.ErrorDetail)
	}
	if !f.srv.RLSReady() {
		t.Error("not ready after v1")
	}
	for i, want := range []uint32{2, 1} {
		if st := askRLS(t, c, "edge", "user", "a"); st.Code != rlsv3.RateLimitResponse_OK || st.LimitRemaining != want {
			t.Fatalf("v1 request %d: %v, want OK remaining %d", i, st, want)
		}
	}
	if st := askRLS(t, c, "gone", "k", "x"); st.Code != rlsv3.RateLimitResponse_OK || st.CurrentLimit.GetRequestsPerUnit() != 1 {
		t.Fatalf("v1 gone: %v", st)
	}

	// Bad: a unit Floodgate cannot read, then a domain given twice.
	bad := rlConfig("edge-config", "edge", &rlconfv3.RateLimitDescriptor{Key: "user", RateLimit: &rlconfv3.RateLimitPolicy{RequestsPerUnit: 5}})
	x.push(t, "v2", bad)
	r := x.answer(t, "v2")
	if r.ErrorDetail == nil || r.VersionInfo != "v1" || !strings.Contains(r.ErrorDetail.Message, "xds:edge-config") || !strings.Contains(r.ErrorDetail.Message, "unit") {
		t.Fatalf("v2: want a NACK naming the resource and its unit, keeping v1; got version %q error %v", r.VersionInfo, r.ErrorDetail)
	}
	x.push(t, "v2b", rlConfig("a", "edge", perHour("user", 9)), rlConfig("b", "edge", perHour("user", 9)))
	if r := x.answer(t, "v2b"); r.ErrorDetail == nil || !strings.Contains(r.ErrorDetail.Message, `domain "edge"`) || r.VersionInfo != "v1" {
		t.Fatalf("v2b: want a NACK of the duplicate domain, got version %q error %v", r.VersionInfo, r.ErrorDetail)
	}
	if st := askRLS(t, c, "edge", "user", "a"); st.Code != rlsv3.RateLimitResponse_OK || st.LimitRemaining != 0 || st.CurrentLimit.GetRequestsPerUnit() != 3 {
		t.Fatalf("after the NACKs, v1 decides: %v, want OK remaining 0 of 3", st)
	}

	// Changed: edge's limit kept at a new quota (its 3 spent hits stay),
	// gone removed, a new domain added.
	x.push(t, "v3", rlConfig("edge-config", "edge", perHour("user", 5)), rlConfig("new-config", "new", perHour("k", 2)))
	if r := x.answer(t, "v3"); r.ErrorDetail != nil || r.VersionInfo != "v3" {
		t.Fatalf("v3: version %q error %v", r.VersionInfo, r.ErrorDetail)
	}
	if st := askRLS(t, c, "edge", "user", "a"); st.Code != rlsv3.RateLimitResponse_OK || st.LimitRemaining != 1 || st.CurrentLimit.GetRequestsPerUnit() != 5 {
		t.Errorf("v3 edge: %v, want OK remaining 1 of 5 (3 spent under v1 count)", st)
	}
	if st := askRLS(t, c, "gone", "k", "x"); st.Code != rlsv3.RateLimitResponse_OK || st.CurrentLimit != nil {
		t.Errorf("v3 removed domain: %v, want OK without a limit", st)
	}
	if st := askRLS(t, c, "new", "k", "x"); st.CurrentLimit.GetRequestsPerUnit() != 2 || st.LimitRemaining != 1 {
		t.Errorf("v3 new domain: %v", st)
	}
}

// TestXDSAndFilesOneTree: the files' domains and the snapshot's decide
// side by side; a snapshot bringing a domain the files define is NACKed,
// and a file reload keeps the snapshot's domains.
func TestXDSAndFilesOneTree(t *testing.T) {
	x := newXDSServer(t)
	limits := filepath.Join(t.TempDir(), "files.yaml")
	writeLimits := func(quota int) {
		y := fmt.Sprintf("domain: files\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: %d}\n", quota)
		if err := os.WriteFile(limits, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeLimits(4)
	f := start(t, fmt.Sprintf(`
envoy_rls:
  listen: "127.0.0.1:0"
  config: %q
  xds: {server: %q, node_id: `+xdsNodeID+`, backoff_initial: 50ms, backoff_max: 200ms}
admin: {listen: "127.0.0.1:0"}
log: {level: error}
`, limits, x.addr))
	c := rlsClient(t, f.srv.Addr(FaceEnvoyRLS))
	x.push(t, "1", rlConfig("edge", "edge", perHour("user", 3)))
	x.answer(t, "1")
	if a, b := askRLS(t, c, "files", "k", "v"), askRLS(t, c, "edge", "user", "a"); a.CurrentLimit.GetRequestsPerUnit() != 4 || b.CurrentLimit.GetRequestsPerUnit() != 3 {
		t.Fatalf("files %v, xds %v", a, b)
	}
	x.push(t, "2", rlConfig("edge", "edge", perHour("user", 3)), rlConfig("clash", "files", perHour("k", 1)))
	if r := x.answer(t, "2"); r.ErrorDetail == nil || !strings.Contains(r.ErrorDetail.Message, `domain "files"`) {
		t.Fatalf("a domain of the files over xDS: %v, want a NACK naming it", r.ErrorDetail)
	}
	writeLimits(6)
	if err := f.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if a, b := askRLS(t, c, "files", "k", "v"), askRLS(t, c, "edge", "user", "a"); a.CurrentLimit.GetRequestsPerUnit() != 6 || b.LimitRemaining != 1 {
		t.Errorf("after a file reload: files %v, xds %v (want 6 a hour; 1 of 3 left)", a, b)
	}
}

// TestXDSReconnect: when the management server goes away the rules in
// force keep deciding, and the daemon reconnects (backoff 50ms..200ms
// here) and takes the snapshot of the server that comes back.
func TestXDSReconnect(t *testing.T) {
	x := newXDSServer(t)
	f := start(t, fmt.Sprintf(xdsDaemon, x.addr))
	c := rlsClient(t, f.srv.Addr(FaceEnvoyRLS))
	x.push(t, "a1", rlConfig("edge", "edge", perHour("user", 7)))
	x.answer(t, "a1")
	x.stop()
	if st := askRLS(t, c, "edge", "user", "a"); st.CurrentLimit.GetRequestsPerUnit() != 7 || st.LimitRemaining != 6 {
		t.Fatalf("server gone: %v, want the rules in force (6 of 7 left)", st)
	}
	y := newXDSServerAt(t, x.addr)
	y.push(t, "b1", rlConfig("edge", "edge", perHour("user", 9)))
	if r := y.answer(t, "b1"); r.ErrorDetail != nil {
		t.Fatalf("after reconnecting: %v", r.ErrorDetail)
	}
	if st := askRLS(t, c, "edge", "user", "a"); st.CurrentLimit.GetRequestsPerUnit() != 9 || st.LimitRemaining != 7 {
		t.Errorf("after reconnecting: %v, want 7 of 9 left (2 spent)", st)
	}
}

// TestBackoff: each wait is within [bound/2, bound], the bound doubles
// up to max, and reset starts again from initial.
func TestBackoff(t *testing.T) {
	b := backoff{initial: 100 * time.Millisecond, max: time.Second}
	for i, bound := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		bound *= time.Millisecond
		if d := b.next(); d < bound/2 || d > bound {
			t.Errorf("wait %d: %v, want within [%v, %v]", i, d, bound/2, bound)
		}
	}
	b.reset()
	if d := b.next(); d < 50*time.Millisecond || d > 100*time.Millisecond {
		t.Errorf("after reset: %v", d)
	}
}

// TestXDSSnapshotUnderLoad: while a gRPC load runs, each snapshot change
// applies with no failed request and no answer without a limit in
// between. The time a change takes is measured by BenchmarkXDSApply; the
// bound here is only a generous guard.
func TestXDSSnapshotUnderLoad(t *testing.T) {
	x := newXDSServer(t)
	f := start(t, fmt.Sprintf(xdsDaemon, x.addr))
	c := rlsClient(t, f.srv.Addr(FaceEnvoyRLS))
	x.push(t, "q0", rlConfig("edge", "edge", perHour("user", 1_000_000)))
	x.answer(t, "q0")

	var seen atomic.Uint32 // the last requests_per_unit answered
	var total, failed, unlimited atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
				resp, err := c.ShouldRateLimit(rctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*commonv3.RateLimitDescriptor{
					{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "user", Value: fmt.Sprintf("w%d-%d", w, i%50)}}}}})
				rcancel()
				total.Add(1)
				switch {
				case err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK:
					failed.Add(1)
				case resp.Statuses[0].CurrentLimit == nil:
					unlimited.Add(1)
				default:
					seen.Store(resp.Statuses[0].CurrentLimit.RequestsPerUnit)
				}
			}
		}()
	}
	for i := 1; i <= 5; i++ {
		quota := uint32(1_000_000 + i)
		pushed := time.Now()
		x.push(t, fmt.Sprintf("q%d", i), rlConfig("edge", "edge", perHour("user", quota)))
		for seen.Load() != quota {
			if time.Since(pushed) > 30*time.Second {
				t.Fatalf("snapshot q%d not in force after 30s", i)
			}
			time.Sleep(time.Millisecond)
		}
		t.Logf("q%d in force after %v", i, time.Since(pushed))
	}
	cancel()
	wg.Wait()
	if total.Load() == 0 || failed.Load() != 0 || unlimited.Load() != 0 {
		t.Errorf("%d requests: %d failed, %d answered without a limit; want none", total.Load(), failed.Load(), unlimited.Load())
	}
}

// BenchmarkXDSApply measures a snapshot change: from SetSnapshot on the
// management server to the first ShouldRateLimit answered by the new
// limit, and the ACK the server receives for it (scripts/bench-xds.sh).
func BenchmarkXDSApply(b *testing.B) {
	x := newXDSServer(b)
	f := start(b, fmt.Sprintf(xdsDaemon, x.addr))
	c := rlsClient(b, f.srv.Addr(FaceEnvoyRLS))
	for i := 0; b.Loop(); i++ {
		quota, version := uint32(1000+i), fmt.Sprint(i)
		pushed := time.Now()
		x.push(b, version, rlConfig("edge", "edge", perHour("user", quota)))
		for askRLS(b, c, "edge", "user", "a").CurrentLimit.GetRequestsPerUnit() != quota {
			if time.Since(pushed) > 30*time.Second {
				b.Fatalf("version %s not in force after 30s", version)
			}
		}
		if r := x.answer(b, version); r.ErrorDetail != nil {
			b.Fatalf("version %s NACKed: %v", version, r.ErrorDetail)
		}
	}
}
