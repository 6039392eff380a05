package config

import (
	"strings"
	"testing"
	"time"
)

const rlqsPolicies = "policies:\n  api: {algorithm: fixed-window, quota: 1000, window: 1s}\n  bytes: {quota: 1000, window: 1s, unit: content-bytes}\n"

func TestRLQS(t *testing.T) {
	c, err := Parse("f.yaml", []byte(rlqsPolicies+"rlqs:\n  listen: 127.0.0.1:0\n  domains:\n    envoy:\n      - {match: {name: '*'}, policy: api}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.RLQS.Rules == nil || strings.Join(c.RLQS.Rules.Domains(), ",") != "envoy" || c.RLQS.Interval != 0 {
		t.Fatalf("rlqs = %+v", c.RLQS)
	}
	c, err = Parse("f.yaml", []byte(rlqsPolicies+"rlqs:\n  listen: 127.0.0.1:0\n  interval: 50ms\n  ttl: 1s\n  domains: {envoy: [{policy: api}]}\n"))
	if err != nil || c.RLQS.Interval.D() != 50*time.Millisecond || c.RLQS.TTL.D() != time.Second {
		t.Fatalf("rlqs = %+v, %v", c.RLQS, err)
	}
}

// TestRLQSErrors: every mistake is reported at its file and line.
func TestRLQSErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"network without mTLS", "rlqs:\n  listen: ':8084'\n  domains: {envoy: [{policy: api}]}\n",
			"f.yaml:5: rlqs.listen: :8084 is not a loopback address: a lease spends quota, so anyone reaching it could; listen on 127.0.0.1 or set listeners.tls.client_ca_file (mutual TLS)"},
		{"shared listener", "api: {listen: '127.0.0.1:9000'}\nrlqs:\n  listen: 127.0.0.1:9000\n  domains: {envoy: [{policy: api}]}\n",
			"f.yaml:6: rlqs.listen: 127.0.0.1:9000 is another face's address; gRPC needs a listener of its own"},
		{"unknown policy", "rlqs:\n  listen: 127.0.0.1:0\n  domains:\n    envoy:\n      - {match: {name: a}, policy: nope}\n",
			`f.yaml:8: rlqs.domains.envoy[0].policy: no policy named "nope" in the policies section`},
		{"bytes policy", "rlqs:\n  listen: 127.0.0.1:0\n  domains:\n    envoy:\n      - policy: bytes\n",
			`f.yaml:8: rlqs.domains.envoy[0].policy: policy "bytes" counts content-bytes; RLQS reports count requests`},
		{"no policy", "rlqs:\n  listen: 127.0.0.1:0\n  domains:\n    envoy:\n      - match: {name: a}\n",
			"f.yaml:8: rlqs.domains.envoy[0]: policy is required: a name from the policies section"},
		{"no domains", "rlqs:\n  listen: 127.0.0.1:0\n",
			"f.yaml:4: rlqs.domains: required: at least one domain with its rules"},
		{"short interval", "rlqs:\n  listen: 127.0.0.1:0\n  interval: 1us\n  domains: {envoy: [{policy: api}]}\n",
			"f.yaml:6: rlqs.interval: must be at least 1ms, got 1µs"},
		{"slack", "rlqs:\n  listen: 127.0.0.1:0\n  slack: 2\n  domains: {envoy: [{policy: api}]}\n",
			"f.yaml:6: rlqs.slack: must be within 0..1 (intervals), got 2"},
		{"unknown field", "rlqs:\n  listen: 127.0.0.1:0\n  domain: envoy\n",
			"f.yaml:6: rlqs.domain: unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(rlqsPolicies+tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
		})
	}
}
