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
