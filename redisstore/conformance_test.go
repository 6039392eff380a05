package redisstore

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/storetest"
)

func runConformance(t *testing.T, rdb redis.UniversalClient) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) floodgate.Store {
		return newTestStore(t, rdb, WithClock(now))
	})
}

func TestConformanceStandalone(t *testing.T) { runConformance(t, standaloneClient(t)) }
func TestConformanceCluster(t *testing.T)    { runConformance(t, clusterClient(t)) }
func TestConformanceSentinel(t *testing.T)   { runConformance(t, sentinelClient(t)) }

// The slot suite, leases included: a Redis store is shared across
// processes, so a crashed holder's slot must free itself.
func TestSlotsConformanceStandalone(t *testing.T) {
	rdb := standaloneClient(t)
	storetest.RunSlots(t, func(t *testing.T) floodgate.Slots { return newTestStore(t, rdb) }, true)
}

func TestSlotsConformanceCluster(t *testing.T) {
	rdb := clusterClient(t)
	storetest.RunSlots(t, func(t *testing.T) floodgate.Slots { return newTestStore(t, rdb) }, true)
}

// The slot suite through EVALSHA of the script, for a Redis user that may
// neither load nor call functions: slots ride on the same code.
func TestSlotsConformanceScript(t *testing.T) {
	storetest.RunSlots(t, func(t *testing.T) floodgate.Slots {
		s := newTestStore(t, aclClient(t, "-function", "-fcall"))
		t.Cleanup(func() {
			if !s.noFunctions.Load() {
				t.Error("the store still calls FCALL for a user without FUNCTION")
			}
		})
		return s
	}, true)
}
