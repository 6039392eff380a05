// Command rlsnop is Envoy's rate limit service answering OK to every
// request without deciding anything: the floor a gRPC rate limit service
// pays on this machine for the call alone (grpc-go, the protobufs, the
// connection), against which scripts/bench-rls.sh's figures are read.
//
// With -redis, each call first waits for one Redis round trip (PING)
// through rueidis, which pipelines the commands of concurrent calls over
// its few connections: the floor of a service that sends Redis one command
// per call, with nothing for Redis to decide.
//
//	rlsnop -addr 127.0.0.1:18070 [-redis 127.0.0.1:6379]
package main

import (
	"context"
	"flag"
	"log"
	"net"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/rueidis"
	"google.golang.org/grpc"
)

type nop struct {
	rlsv3.UnimplementedRateLimitServiceServer
	redis rueidis.Client // nil without -redis
}

// ShouldRateLimit answers OK with one status per descriptor, as a real
// service that admits everything would, after a PING with -redis.
func (n nop) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if n.redis != nil {
		if err := n.redis.Do(ctx, n.redis.B().Ping().Build()).Error(); err != nil {
			return nil, err
		}
	}
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}
	for range req.Descriptors {
		resp.Statuses = append(resp.Statuses, &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK})
	}
	return resp, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:18070", "listen address")
	redisAddr := flag.String("redis", "", "a Redis address: wait for one PING per call")
	flag.Parse()
	var n nop
	if *redisAddr != "" {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{*redisAddr}, DisableCache: true})
		if err != nil {
			log.Fatal(err)
		}
		n.redis = c
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	g := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(g, n)
	log.Fatal(g.Serve(ln))
}
