// Command grpcservice is a Go gRPC service limited by Floodgate's
// interceptors: 10 calls a second per client address (a GCRA with bursts
// of 5), the client found in x-forwarded-for when the peer is the local
// proxy. It serves the standard health service as its example API:
//
//	go run ./examples/envoy/grpcservice -listen 127.0.0.1:7801
package main

import (
	"flag"
	"log"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clientip"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/grpclimit"
	"github.com/floodgate/floodgate/memorystore"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:7801", "gRPC address")
	flag.Parse()
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	eng, err := engine.New(engine.Config{Store: store})
	if err != nil {
		log.Fatal(err)
	}
	rule, err := eng.Compile(engine.Rule{Name: "grpc", Policies: []floodgate.Policy{
		{Name: "calls", Algorithm: floodgate.GCRA, Quota: 10, Window: time.Second, Burst: 5}}})
	if err != nil {
		log.Fatal(err)
	}
	peers, err := clientip.New(clientip.Config{TrustedProxies: []string{"127.0.0.1/32"}, Sources: []clientip.Source{clientip.XForwardedFor}})
	if err != nil {
		log.Fatal(err)
	}
	limit, err := grpclimit.New(grpclimit.Config{Rule: rule, Key: grpclimit.ByPeer(peers), Fields: engine.Fields{Style: engine.Draft11}})
	if err != nil {
		log.Fatal(err)
	}
	g := grpc.NewServer(append(bounds(), grpc.UnaryInterceptor(limit.Unary()), grpc.StreamInterceptor(limit.Stream()))...)
	healthpb.RegisterHealthServer(g, health.NewServer())
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	// At most 10,000 connections; more wait in the kernel's backlog.
	ln = &limitListener{Listener: ln, free: make(chan struct{}, 10_000)}
	log.Printf("serving on %s", ln.Addr())
	log.Fatal(g.Serve(ln))
}

// bounds keeps what one client can make the server hold small, as the
// daemon's envoy_rls listener does (docs/DEPLOY.md, "Listener bounds"):
// 64 KiB of metadata per call (grpc-go's default is 16 MiB), 64 KiB per
// message (default 4 MiB), 100 calls per connection, fixed 64 KiB
// flow-control windows, idle connections closed after 2 minutes and every
// connection recycled after 30.
func bounds() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxHeaderListSize(64 << 10),
		grpc.MaxRecvMsgSize(64 << 10),
		grpc.MaxConcurrentStreams(100),
		grpc.InitialWindowSize(64 << 10),
		grpc.InitialConnWindowSize(64 << 10),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: 2 * time.Minute, MaxConnectionAge: 30 * time.Minute, MaxConnectionAgeGrace: 30 * time.Second,
			Time: 2 * time.Minute, Timeout: 20 * time.Second,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
}

// limitListener accepts a connection only while fewer than cap(free)
// are open.
type limitListener struct {
	net.Listener
	free chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.free <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.free
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.free }}, nil
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
