// Command rlsnop is Envoy's rate limit service answering OK to every
// request without deciding anything: the floor a gRPC rate limit service
// pays on this machine for the call alone (grpc-go, the protobufs, the
// connection), against which scripts/bench-rls.sh's figures are read.
//
//	rlsnop -addr 127.0.0.1:18070
package main

import (
	"context"
	"flag"
	"log"
	"net"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

type nop struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

// ShouldRateLimit answers OK with one status per descriptor, as a real
// service that admits everything would.
func (nop) ShouldRateLimit(_ context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}
	for range req.Descriptors {
		resp.Statuses = append(resp.Statuses, &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK})
	}
	return resp, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:18070", "listen address")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	g := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(g, nop{})
	log.Fatal(g.Serve(ln))
}
