package config

import "time"

// Defaults of the listeners.grpc section.
const (
	DefaultGRPCMaxMessageBytes  = 128 << 10 // 64 descriptors of 1 KiB and their framing
	DefaultGRPCMaxStreams       = 100
	DefaultGRPCMaxConnectionAge = 30 * time.Minute
	DefaultGRPCAgeGrace         = 30 * time.Second
	DefaultGRPCKeepaliveTime    = 2 * time.Minute
	DefaultGRPCKeepaliveTimeout = 20 * time.Second
	DefaultGRPCMinPingInterval  = 10 * time.Second
)

// GRPC bounds every gRPC listener (envoy_rls) beside the bounds all
// listeners share: listeners.max_header_bytes caps a call's metadata
// (the HTTP/2 header list), listeners.max_connections its connections
// and listeners.idle_timeout closes a connection without calls that long.
type GRPC struct {
	// MaxMessageBytes bounds one request message; default 131072
	// (128 KiB). A larger one fails with RESOURCE_EXHAUSTED.
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// MaxConcurrentStreams is the most calls in flight on one
	// connection, 1..1048576; default 100.
	MaxConcurrentStreams int `yaml:"max_concurrent_streams"`
	// MaxConnectionAge sends GOAWAY to a connection that old, so clients
	// reconnect and spread over replicas; default 30m, 0 for never.
	MaxConnectionAge Duration `yaml:"max_connection_age"`
	// MaxConnectionAgeGrace lets calls in flight finish after that GOAWAY
	// before the connection is closed; default 30s.
	MaxConnectionAgeGrace Duration `yaml:"max_connection_age_grace"`
	// KeepaliveTime pings a connection quiet that long; default 2m.
	KeepaliveTime Duration `yaml:"keepalive_time"`
	// KeepaliveTimeout closes a connection whose ping is not answered
	// within it; default 20s.
	KeepaliveTimeout Duration `yaml:"keepalive_timeout"`
	// MinPingInterval is the shortest interval between a client's
	// keepalive pings; a client pinging more often is sent GOAWAY.
	// Default 10s.
	MinPingInterval Duration `yaml:"min_ping_interval"`
}

func (v *validator) grpc() {
	g := &v.cfg.Listeners.GRPC
	const f = "listeners.grpc."
	if !v.has(f + "max_message_bytes") {
		g.MaxMessageBytes = DefaultGRPCMaxMessageBytes
	} else if g.MaxMessageBytes < 4096 || g.MaxMessageBytes > 16<<20 {
		v.fail(f+"max_message_bytes", "must be within 4096..16777216, got %d", g.MaxMessageBytes)
	}
	if !v.has(f + "max_concurrent_streams") {
		g.MaxConcurrentStreams = DefaultGRPCMaxStreams
	} else if g.MaxConcurrentStreams < 1 || g.MaxConcurrentStreams > 1<<20 {
		v.fail(f+"max_concurrent_streams", "must be within 1..1048576, got %d", g.MaxConcurrentStreams)
	}
	for _, d := range []struct {
		name string
		d    *Duration
		def  time.Duration
	}{
		{"max_connection_age", &g.MaxConnectionAge, DefaultGRPCMaxConnectionAge},
		{"max_connection_age_grace", &g.MaxConnectionAgeGrace, DefaultGRPCAgeGrace},
		{"keepalive_time", &g.KeepaliveTime, DefaultGRPCKeepaliveTime},
		{"keepalive_timeout", &g.KeepaliveTimeout, DefaultGRPCKeepaliveTimeout},
		{"min_ping_interval", &g.MinPingInterval, DefaultGRPCMinPingInterval},
	} {
		switch {
		case !v.has(f + d.name):
			*d.d = Duration(d.def)
		case *d.d < 0:
			v.fail(f+d.name, "must not be negative")
		}
	}
}
