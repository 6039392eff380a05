package redisstore

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/testkit"
)

// redisNode runs scripts/redis-node.sh (found through
// FLOODGATE_TEST_REDIS_NODE) and returns its trimmed output.
func redisNode(t testing.TB, args ...string) string {
	t.Helper()
	script := testkit.Env(t, "FLOODGATE_TEST_REDIS_NODE")
	out, err := exec.Command(script, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-node.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestClusterFailover stops the master that owns a key while decisions
// run; once its replica is promoted, decisions continue (the function
// library reached it by replication, or a reload brings it), and no key is
// left without a TTL.
// The stopped node is restarted and the Cluster is healthy again at the end.
func TestClusterFailover(t *testing.T) {
	rdb := clusterClient(t)
	redisNode(t, "wait-cluster", "30")
	s := newTestStore(t, rdb, WithTimeout(200*time.Millisecond))
	const key = "failover"
	port := redisNode(t, "master-of-slot", strconv.Itoa(int(slot(key))))
	ps := []floodgate.Policy{
		{Name: "log", Algorithm: floodgate.SlidingWindowLog, Quota: 1_000_000, Window: time.Minute},
		{Name: "fw", Algorithm: floodgate.FixedWindow, Quota: 1_000_000, Window: time.Minute},
		{Name: "tb", Algorithm: floodgate.TokenBucket, Quota: 100_000, Window: time.Hour}, // full again 36 ms per call later
	}
	res := make([]floodgate.Result, len(ps))
	ctx := context.Background()
	take := func() error { return s.Take(ctx, key, one, ps, res) }
	for range 20 {
		if err := take(); err != nil || !res[0].Allowed {
			t.Fatalf("before the failover: %+v, %v", res, err)
		}
	}

	t.Cleanup(func() {
		redisNode(t, "start", port)
		redisNode(t, "wait-cluster", "60")
	})
	stopped := time.Now()
	redisNode(t, "stop", port)

	failures := 0
	for {
		err := take()
		if err == nil {
			break
		}
		failures++
		if time.Since(stopped) > 30*time.Second {
			t.Fatalf("no decision 30 s after stopping master %s: %v", port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("decisions resumed %v after master %s stopped (%d failed calls meanwhile)",
		time.Since(stopped).Round(time.Millisecond), port, failures)
	for range 20 {
		if err := take(); err != nil || !res[0].Allowed {
			t.Fatalf("after the failover: %+v, %v", res, err)
		}
	}
	if newPort := redisNode(t, "master-of-slot", strconv.Itoa(int(slot(key)))); newPort == port {
		t.Fatalf("slot still served by the stopped master %s", port)
	}
	if n := checkTTLs(t, rdb, s.prefix, false); n != len(ps) {
		t.Errorf("found %d keys after the failover, want %d", n, len(ps))
	}
}
