package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/grpclimit"
	"github.com/floodgate/floodgate/memorystore"
)

// One rule per method: Check gets 2 calls a minute per API key, every
// other method of the service 100 per peer address; the rest of the
// server is not limited.
func Example_perMethod() {
	store, err := memorystore.New()
	if err != nil {
		panic(err)
	}
	defer store.Close()
	limiter, err := grpclimit.New(grpclimit.Config{
		Store: store,
		Key:   grpclimit.ByPeer(nil),
		Rules: []grpclimit.Rule{
			{
				Method: "/grpc.health.v1.Health/Check",
				Key:    grpclimit.ByMetadata("x-api-key"), // hashed: no store or log holds the key
				Rule: engine.Rule{Name: "check", Policies: []floodgate.Policy{
					{Name: "per-minute", Algorithm: floodgate.SlidingWindowCounter, Quota: 2, Window: time.Minute},
				}},
			},
			{
				Method: "/grpc.health.v1.Health/",
				Rule: engine.Rule{Name: "health", Policies: []floodgate.Policy{
					{Name: "per-second", Algorithm: floodgate.TokenBucket, Quota: 100, Window: time.Second},
				}},
			},
		},
	})
	if err != nil {
		panic(err)
	}
	server := grpc.NewServer(grpc.UnaryInterceptor(limiter.Unary()), grpc.StreamInterceptor(limiter.Stream()))

	healthpb.RegisterHealthServer(server, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go server.Serve(ln)
	defer server.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "key-of-carol")
	for range 3 {
		_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		fmt.Println(status.Code(err))
	}
	// Output:
	// OK
	// OK
	// ResourceExhausted
}
