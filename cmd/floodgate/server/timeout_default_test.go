package server

import (
	"testing"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/redisstore"
)

// TestOneDefaultTimeout: the daemon's store.redis.timeout and the
// library's WithTimeout default are one figure (docs/REDIS.md, "Timeouts").
func TestOneDefaultTimeout(t *testing.T) {
	if config.DefaultRedisTimeout != redisstore.DefaultTimeout {
		t.Fatalf("daemon default %v, library default %v", config.DefaultRedisTimeout, redisstore.DefaultTimeout)
	}
}
