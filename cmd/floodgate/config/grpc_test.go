package config

import (
	"strings"
	"testing"
	"time"
)

// TestGRPCBounds: listeners.grpc has its documented defaults, takes
// values within range and names the field of one out of range.
func TestGRPCBounds(t *testing.T) {
	parse := func(grpc string) (*Config, error) {
		return Parse("f.yaml", []byte("api: {listen: ':1'}\nlisteners: {grpc: {"+grpc+"}}\n"))
	}
	c, err := parse("")
	if err != nil {
		t.Fatal(err)
	}
	want := GRPC{MaxMessageBytes: 128 << 10, MaxConcurrentStreams: 100, MaxConnectionAge: Duration(30 * time.Minute),
		MaxConnectionAgeGrace: Duration(30 * time.Second), KeepaliveTime: Duration(2 * time.Minute),
		KeepaliveTimeout: Duration(20 * time.Second), MinPingInterval: Duration(10 * time.Second)}
	if c.Listeners.GRPC != want {
		t.Errorf("defaults %+v, want %+v", c.Listeners.GRPC, want)
	}
	c, err = parse("max_message_bytes: 4096, max_concurrent_streams: 1, max_connection_age: 0s")
	if err != nil {
		t.Fatal(err)
	}
	if g := c.Listeners.GRPC; g.MaxMessageBytes != 4096 || g.MaxConcurrentStreams != 1 || g.MaxConnectionAge != 0 {
		t.Errorf("set: %+v", g)
	}
	for field, msg := range map[string]string{
		"max_message_bytes: 100":        "listeners.grpc.max_message_bytes: must be within 4096..16777216, got 100",
		"max_concurrent_streams: 0":     "listeners.grpc.max_concurrent_streams: must be within 1..1048576, got 0",
		"keepalive_time: -1s":           "listeners.grpc.keepalive_time: must not be negative",
		"max_connection_age: -1m":       "listeners.grpc.max_connection_age: must not be negative",
		"max_message_byts: 5000":        "listeners.grpc.max_message_byts: unknown field",
		"min_ping_interval: -2s":        "listeners.grpc.min_ping_interval: must not be negative",
		"keepalive_timeout: -1s":        "listeners.grpc.keepalive_timeout: must not be negative",
		"max_connection_age_grace: -1s": "listeners.grpc.max_connection_age_grace: must not be negative",
	} {
		if _, err := parse(field); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %q", field, err, msg)
		}
	}
}
