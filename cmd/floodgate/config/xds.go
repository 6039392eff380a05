package config

import (
	"net"
	"time"
)

// XDS is envoy_rls.xds: an xDS management server (Envoy Gateway's, say)
// that pushes envoyproxy/ratelimit's rules as
// ratelimit.config.ratelimit.v3.RateLimitConfig resources over ADS,
// state of the world. Its domains join those of envoy_rls.config in one
// tree (a domain in both is refused).
type XDS struct {
	// Server is the management server's host:port. Required.
	Server string `yaml:"server"`
	// NodeID is the node the server keys its snapshots by; default
	// "default", as envoyproxy/ratelimit's CONFIG_GRPC_XDS_NODE_ID.
	NodeID string `yaml:"node_id"`
	// NodeMetadata is sent as the node's metadata (string values).
	NodeMetadata map[string]string `yaml:"node_metadata"`
	// Headers are gRPC metadata sent on the stream.
	Headers map[string]string `yaml:"headers"`
	// TLS, when set, dials the server over TLS.
	TLS *XDSTLS `yaml:"tls"`
	// BackoffInitial and BackoffMax bound the jittered exponential wait
	// between reconnections; defaults 1s and 60s.
	BackoffInitial Duration `yaml:"backoff_initial"`
	BackoffMax     Duration `yaml:"backoff_max"`
	// MaxMessageBytes bounds one response; default gRPC's 4 MiB.
	MaxMessageBytes int `yaml:"max_message_bytes"`
}

// XDSTLS is the client side of TLS to the management server; a
// certificate and key make it mutual TLS.
type XDSTLS struct {
	// CAFile verifies the server; default the system's roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the client's certificate, given together.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name verified in the server's certificate;
	// default Server's host.
	ServerName string `yaml:"server_name"`
}

// Defaults of XDS.
const (
	DefaultXDSNodeID         = "default"
	DefaultXDSBackoffInitial = time.Second
	DefaultXDSBackoffMax     = time.Minute
)

func (v *validator) xds(x *XDS) {
	const f = "envoy_rls.xds"
	if x.Server == "" {
		v.fail(f+".server", "required: the management server's host:port")
	} else if _, _, err := net.SplitHostPort(x.Server); err != nil {
		v.fail(f+".server", "want host:port, got %q", x.Server)
	}
	if x.NodeID == "" {
		x.NodeID = DefaultXDSNodeID
	}
	if x.BackoffInitial == 0 {
		x.BackoffInitial = Duration(DefaultXDSBackoffInitial)
	}
	if x.BackoffMax == 0 {
		x.BackoffMax = Duration(DefaultXDSBackoffMax)
	}
	if x.BackoffInitial < 0 || x.BackoffMax < x.BackoffInitial {
		v.fail(f, "backoff_initial must be positive and at most backoff_max")
	}
	if x.MaxMessageBytes < 0 {
		v.fail(f+".max_message_bytes", "must not be negative")
	}
	if t := x.TLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		v.fail(f+".tls", "cert_file and key_file go together")
	}
}
