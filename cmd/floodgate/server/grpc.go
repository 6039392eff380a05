package server

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

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
