package config

import (
	"path/filepath"
	"slices"

	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/envoyrls"
)

// EnvoyRLS is the face answering Envoy's rate limit service
// (envoy.service.ratelimit.v3) over gRPC, with grpc.health.v1 and server
// reflection beside it (docs/ENVOY.md).
type EnvoyRLS struct {
	// Listen is the gRPC address, e.g. "127.0.0.1:8083"; it cannot be
	// shared with another face. Required. Anyone reaching it spends any
	// descriptor's quota, so beyond loopback it needs a client CA
	// (tls.client_ca_file, else listeners.tls.client_ca_file) or
	// Unauthenticated.
	Listen string `yaml:"listen"`
	// Unauthenticated serves a network address to clients without a
	// certificate, as envoyproxy/ratelimit does: for a port that a mesh's
	// mutual TLS or a NetworkPolicy already guards. Default false.
	Unauthenticated bool `yaml:"unauthenticated"`
	// Config is a file, or a directory of *.yaml and *.yml files, in
	// envoyproxy/ratelimit's format; a relative path is read from the
	// configuration file's directory. Reloaded with this file, and when
	// a file in it changes. Required unless xds is set.
	Config string `yaml:"config"`
	// Headers selects the fields sent in response_headers_to_add: none
	// (default: envoyproxy/ratelimit sends none), draft11, legacy or
	// both.
	Headers engine.HeaderStyle `yaml:"headers"`
	// MaxDescriptors is the most descriptors in one request; default 64.
	MaxDescriptors int `yaml:"max_descriptors"`
	// MaxKeyLength bounds a descriptor's domain, keys and values
	// together, in bytes; default 1024.
	MaxKeyLength int `yaml:"max_key_length"`
	// DynamicMetadata puts envoyproxy/ratelimit's dynamic_metadata in
	// every response, as its RESPONSE_DYNAMIC_METADATA=true does
	// (envoyrls.Options.DynamicMetadata); default false.
	DynamicMetadata bool `yaml:"dynamic_metadata"`
	// LimitHeaders sends envoyproxy/ratelimit's RateLimit-Limit,
	// RateLimit-Remaining and RateLimit-Reset headers, as its
	// LIMIT_RESPONSE_HEADERS_ENABLED=true does (envoyrls.LimitHeaders);
	// it excludes headers other than none. Default false.
	LimitHeaders bool `yaml:"limit_headers"`
	// NearLimitRatio is the share of a limit past which hits count as
	// ratelimit_service_rate_limit_near_limit; default 0.8, as
	// envoyproxy/ratelimit's NEAR_LIMIT_RATIO.
	NearLimitRatio float64 `yaml:"near_limit_ratio"`
	// PostCharge names the domains whose every limit is post-charged
	// (envoyrls.Config.PostCharge), "*" for all: each hit is counted,
	// refused or not, so that the cost Envoy reports when a stream ends
	// (apply_on_stream_done; Envoy Gateway's cost.response) is never
	// dropped. For rules over xDS, whose protos cannot say it per limit.
	PostCharge []string `yaml:"post_charge"`
	// TLS, when set, serves this face over TLS with its own certificate
	// instead of listeners.tls (gRPC clients and scrapers differ).
	TLS *TLS `yaml:"tls"`
	// XDS, when set, receives rules from an xDS management server too
	// (xds.go); Config may then be left out.
	XDS *XDS `yaml:"xds"`

	// Limits is what Config holds, read by Load.
	Limits *envoyrls.Config `yaml:"-"`
}

// ConfigPath is Config resolved against the directory of file.
func (e *EnvoyRLS) ConfigPath(file string) string {
	if filepath.IsAbs(e.Config) || file == "" {
		return e.Config
	}
	return filepath.Join(filepath.Dir(file), e.Config)
}

func (v *validator) envoyRLS() {
	e := v.cfg.EnvoyRLS
	if e == nil {
		return
	}
	if v.listen("envoy_rls.listen", e.Listen) {
		c := v.cfg
		others := []string{c.Admin.Listen}
		if c.Gateway != nil {
			others = append(others, c.Gateway.Listen)
		}
		if c.API != nil {
			others = append(others, c.API.Listen)
		}
		if c.ForwardAuth != nil {
			others = append(others, c.ForwardAuth.Listen)
		}
		for _, o := range others {
			if o != Off && o != "" && sameAddr(e.Listen, o) {
				v.fail("envoy_rls.listen", "%s is another face's address; gRPC needs a listener of its own", e.Listen)
			}
		}
	}
	if !v.has("envoy_rls.headers") {
		e.Headers = engine.None
	}
	if e.LimitHeaders && e.Headers != engine.None {
		v.fail("envoy_rls.limit_headers", "sends envoyproxy/ratelimit's headers instead of envoy_rls.headers: set headers to none")
	}
	if e.MaxDescriptors < 0 || e.MaxKeyLength < 0 {
		v.fail("envoy_rls", "max_descriptors and max_key_length must not be negative")
	}
	if e.NearLimitRatio < 0 || e.NearLimitRatio > 1 {
		v.fail("envoy_rls.near_limit_ratio", "want a ratio in (0, 1], got %v", e.NearLimitRatio)
	}
	if slices.Contains(e.PostCharge, "") {
		v.fail("envoy_rls.post_charge", "an empty domain; \"*\" names every domain")
	}
	if e.TLS != nil {
		v.tlsFiles(e.TLS)
	}
	v.rlsExposed(e)
	if e.XDS != nil {
		v.xds(e.XDS)
	}
	if e.Config == "" && e.XDS != nil {
		return
	}
	if e.Config == "" {
		v.fail("envoy_rls.config", "required: a file or directory in envoyproxy/ratelimit's format")
		return
	}
	limits, err := envoyrls.Load(e.ConfigPath(v.cfg.File))
	if err != nil {
		v.fail("envoy_rls.config", "%v", err)
		return
	}
	e.Limits = limits
}

// rlsExposed refuses a network address that asks clients for no
// certificate, unless the file says the port is guarded otherwise: a
// ShouldRateLimit spends the quota of whatever descriptors it names.
func (v *validator) rlsExposed(e *EnvoyRLS) {
	t := e.TLS
	if t == nil {
		t = v.cfg.Listeners.TLS
	}
	if e.Unauthenticated || t != nil && t.ClientCAFile != "" || Loopback(e.Listen) {
		return
	}
	v.fail("envoy_rls.listen", "%s is not a loopback address and asks clients for no certificate: anyone reaching it spends any descriptor's quota; "+
		"listen on 127.0.0.1, set envoy_rls.tls.client_ca_file (mutual TLS), or set envoy_rls.unauthenticated: true where a mesh or NetworkPolicy guards the port", e.Listen)
}
