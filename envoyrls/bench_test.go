package envoyrls

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/redisstore"
)

// benchLimits is scripts/bench-rls.sh's configuration: one key-only
// descriptor whose quota is never reached.
const benchLimits = `domain: bench
descriptors:
  - key: client
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
`

// benchService is a Service on store deciding benchLimits.
func benchService(b *testing.B, store floodgate.Store) *Service {
	b.Helper()
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bench.yaml"), []byte(benchLimits), 0o644); err != nil {
		b.Fatal(err)
	}
	eng, err := engine.New(engine.Config{Store: store})
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	r, err := Compile(eng, cfg, floodgate.FailClosed)
	if err != nil {
		b.Fatal(err)
	}
	svc, err := NewService(func() *Rules { return r }, Options{Fields: engine.Fields{Style: engine.None}})
	if err != nil {
		b.Fatal(err)
	}
	return svc
}

// benchStores runs fn on the memory store and on Redis at
// $FLOODGATE_TEST_REDIS.
func benchStores(b *testing.B, fn func(b *testing.B, store floodgate.Store)) {
	b.Run("memory", func(b *testing.B) { fn(b, testkit.Memory(b)) })
	b.Run("redis", func(b *testing.B) {
		c := redis.NewClient(&redis.Options{Addr: testkit.Env(b, "FLOODGATE_TEST_REDIS")})
		b.Cleanup(func() { c.Close() })
		s, err := redisstore.New(c, redisstore.WithPrefix(fmt.Sprintf("fgrlsbench:%d:", time.Now().UnixNano())))
		if err != nil {
			b.Fatal(err)
		}
		fn(b, s)
	})
}

// BenchmarkGRPC is the service over loopback gRPC, client and server in
// one process, 64 calls in flight on 4 connections over 1,000 keys, with
// the daemon's options and its 64 stream workers: scripts/bench-rls.sh's
// load, for profiles (-cpuprofile, -memprofile).
func BenchmarkGRPC(b *testing.B) {
	benchStores(b, func(b *testing.B, store floodgate.Store) {
		benchGRPC(b, store, append(daemonOptions(), grpc.NumStreamWorkers(64))...)
	})
}

// daemonOptions are the options the daemon builds its gRPC servers with
// that bear on speed (cmd/floodgate/server/grpc.go).
func daemonOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.InitialWindowSize(64 << 10), grpc.InitialConnWindowSize(64 << 10), grpc.ReadBufferSize(8 << 10)}
}

// BenchmarkGRPCOptions is BenchmarkGRPC on the memory store with the
// daemon's options and one more grpc-go server option each.
func BenchmarkGRPCOptions(b *testing.B) {
	for _, o := range []struct {
		name string
		opts []grpc.ServerOption
	}{
		{"daemon", nil},
		{"NumStreamWorkers=64", []grpc.ServerOption{grpc.NumStreamWorkers(64)}},
		{"ReadBufferSize=32K", []grpc.ServerOption{grpc.ReadBufferSize(32 << 10)}},
		{"WriteBufferSize=8K", []grpc.ServerOption{grpc.WriteBufferSize(8 << 10)}},
		{"MaxConcurrentStreams=16", []grpc.ServerOption{grpc.MaxConcurrentStreams(16)}},
	} {
		b.Run(o.name, func(b *testing.B) { benchGRPC(b, testkit.Memory(b), append(daemonOptions(), o.opts...)...) })
	}
}

func benchGRPC(b *testing.B, store floodgate.Store, opts ...grpc.ServerOption) {
	{
		svc := benchService(b, store)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		g := grpc.NewServer(append(opts, ServerCodec())...)
		svc.Register(g)
		go g.Serve(ln)
		b.Cleanup(g.Stop)
		clients := make([]rlsv3.RateLimitServiceClient, 4)
		for i := range clients {
			conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { conn.Close() })
			clients[i] = rlsv3.NewRateLimitServiceClient(conn)
		}
		var next atomic.Int64
		b.SetParallelism(64 / max(1, runtimeProcs()))
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n := next.Add(1)
				req := benchRequest(int(n % 1000))
				resp, err := clients[n%4].ShouldRateLimit(context.Background(), req)
				if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
					b.Errorf("answer %v, error %v", resp, err)
					return
				}
			}
		})
	}
}

func benchRequest(key int) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*commonv3.RateLimitDescriptor{
		{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "client", Value: "k" + strconv.Itoa(key)}}}}}
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
