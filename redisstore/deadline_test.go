package redisstore

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/testkit"
)

// TestCallerDeadlineIsNotAStoreFailure (REQUIREMENTS S3: a store failure,
// and only that, is logged, counted and answered by the failure mode): a
// lone call runs inline with the caller's deadline on its socket
// (ContextTimeoutEnabled), which can fail it a moment before the caller's
// context says it has ended. That is the caller running out of time: Take
// returns context.DeadlineExceeded, not ErrStoreUnavailable, and a Limiter
// counts no store error, keeps its breaker (threshold 1) closed and logs
// nothing; on a Cluster, the master's own breaker (5 failed calls) stays
// closed too; the next call is decided.
func TestCallerDeadlineIsNotAStoreFailure(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		rdb := redis.NewClient(&redis.Options{Addr: testkit.Env(t, "FLOODGATE_TEST_REDIS"), ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { rdb.Close() })
		callerDeadline(t, rdb)
	})
	t.Run("cluster", func(t *testing.T) {
		addrs := strings.Split(testkit.Env(t, "FLOODGATE_TEST_REDIS_CLUSTER"), ",")
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { rdb.Close() })
		callerDeadline(t, rdb)
	})
}

func callerDeadline(t *testing.T, rdb redis.UniversalClient) {
	ping(t, rdb)
	s := newTestStore(t, rdb)
	if !s.inline {
		t.Fatal("the store does not run a lone call inline")
	}
	var logs testkit.Buffer
	br := floodgate.NewBreaker(floodgate.BreakerConfig{Threshold: 1})
	l, err := floodgate.NewLimiter(s, countingPolicy, floodgate.WithBreaker(br), floodgate.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 * floodgate.DefaultBreakerThreshold {
		_, err := l.Take(testkit.Late{Context: context.Background()}, "late", 1)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, floodgate.ErrStoreUnavailable) {
			t.Fatalf("Take past the caller's deadline: %v, want the caller's context.DeadlineExceeded", err)
		}
	}
	if n := l.StoreErrors(); n != 0 {
		t.Errorf("%d store errors counted for the caller's deadline", n)
	}
	if st := br.State(); st != floodgate.BreakerClosed {
		t.Errorf("breaker %v after the caller's deadline, want closed", st)
	}
	if logs.String() != "" {
		t.Errorf("logged: %s", logs.String())
	}
	d, err := l.Take(context.Background(), "late", 1)
	if err != nil || !d.Allowed {
		t.Fatalf("the next call: %+v, %v", d, err)
	}
}
