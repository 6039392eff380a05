package server

import (
	"errors"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
)

// grpcOptions are the bounds every gRPC listener of the daemon is built
// with (grpc.NewServer(grpcOptions(l)...)), so memory per connection and
// per call stays bounded whatever clients send: listeners.max_header_bytes
// caps a call's metadata (grpc-go's default is 16 MiB), grpc.max_message_bytes
// its request, grpc.max_concurrent_streams the calls per connection, and
// fixed 64 KiB flow-control windows (which turn off grpc-go's window growth
// up to 16 MiB) the data a stream may buffer. The connection count is
// listen's (listeners.max_connections). Every gRPC listener of the daemon
// uses it; scripts/listener-bounds.sh measures what they cost.
func grpcOptions(l config.Listeners) []grpc.ServerOption {
	g := l.GRPC
	const window = 64 << 10
	return []grpc.ServerOption{
		grpc.MaxHeaderListSize(uint32(l.MaxHeaderBytes)),
		grpc.MaxRecvMsgSize(g.MaxMessageBytes),
		grpc.MaxConcurrentStreams(uint32(g.MaxConcurrentStreams)),
		grpc.InitialWindowSize(window),
		grpc.InitialConnWindowSize(window),
		// A connection reads through 8 KiB (default 32 KiB, held for the
		// connection's life); its write buffer comes from a pool only
		// while it writes, grpc-go's default since SharedWriteBuffer was
		// deprecated.
		grpc.ReadBufferSize(8 << 10),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle:     l.IdleTimeout.D(),
			MaxConnectionAge:      g.MaxConnectionAge.D(),
			MaxConnectionAgeGrace: g.MaxConnectionAgeGrace.D(),
			Time:                  g.KeepaliveTime.D(),
			Timeout:               g.KeepaliveTimeout.D(),
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             g.MinPingInterval.D(),
			PermitWithoutStream: true,
		}),
	}
}

// grpcFace is a running gRPC listener of the daemon: a server built with
// grpcOptions, grpc.health.v1 reporting on the face's service, and server
// reflection.
type grpcFace struct {
	g      *grpc.Server
	health *health.Server
}

// serveGRPC serves face on ln, register adding its service (named service
// in the health reports), the server built with grpcOptions and extra; an
// error of Serve ends the daemon (s.errc).
func (s *Server) serveGRPC(face Face, service string, ln net.Listener, register func(*grpc.Server), extra ...grpc.ServerOption) *grpcFace {
	f := &grpcFace{g: grpc.NewServer(append(grpcOptions(s.start.Listeners), extra...)...), health: health.NewServer()}
	register(f.g)
	healthpb.RegisterHealthServer(f.g, f.health)
	f.health.SetServingStatus(service, healthpb.HealthCheckResponse_SERVING)
	reflection.Register(f.g)
	s.addrs[face] = ln.Addr().String()
	go func() {
		if err := f.g.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.errc <- err
		}
	}()
	s.logger.Info("listening", "faces", "["+string(face)+"]", "addr", ln.Addr().String())
	return f
}
