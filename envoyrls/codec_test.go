package envoyrls

import (
	"context"
	"net"
	"testing"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/internal/testkit"
)

// codecServer serves svc on a loopback server built with opts, beside
// grpc.health.v1, and returns a connection to it.
func codecServer(t *testing.T, svc *Service, opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(opts...)
	svc.Register(g)
	healthpb.RegisterHealthServer(g, health.NewServer())
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestServerCodec: with ServerCodec, the service answers, an interceptor
// sees the call, and the server's other services keep grpc's codec;
// without it, the service's calls fail with Internal.
func TestServerCodec(t *testing.T) {
	f := &fixture{}
	f.now.Store(start.UnixNano())
	f.serve(t, testkit.Memory(t), Options{})
	svc, err := NewService(f.rules.Load, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	count := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		seen = append(seen, info.FullMethod)
		return h(ctx, req)
	}
	conn := codecServer(t, svc, ServerCodec(), grpc.UnaryInterceptor(count))
	ask := &rlsv3.RateLimitRequest{Domain: "shop", Descriptors: []*commonv3.RateLimitDescriptor{desc("client=alice")}}
	resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(context.Background(), ask)
	if err != nil || resp.OverallCode != ok || len(resp.Statuses) != 1 || resp.Statuses[0].LimitRemaining != 2 || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 3 {
		t.Fatalf("answer %v, error %v; want OK, 2 left of 3 an hour", resp, err)
	}
	h, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health %v, error %v; want SERVING", h, err)
	}
	if len(seen) != 2 || seen[0] != rlsv3.RateLimitService_ShouldRateLimit_FullMethodName {
		t.Fatalf("the interceptor saw %v, want ShouldRateLimit then Check", seen)
	}

	plain := codecServer(t, svc)
	_, err = rlsv3.NewRateLimitServiceClient(plain).ShouldRateLimit(context.Background(), ask)
	if status.Code(err) != codes.Internal {
		t.Fatalf("without ServerCodec: error %v, want Internal", err)
	}
}
