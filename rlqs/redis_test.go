package rlqs_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/rlqs"
	"github.com/floodgate/floodgate/rlqs/rlqsclient"
)

// TestServersShareOneRedis: two servers on one Redis, two clients on each,
// all four far over a quota of 2,000 (a token bucket refilling 2,000 an
// hour, so the test's second adds about one): together they admit the
// quota and no more, and each client gets a part.
func TestServersShareOneRedis(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testkit.Env(t, "FLOODGATE_TEST_REDIS")})
	t.Cleanup(func() { rdb.Close() })
	prefix := fmt.Sprintf("fg-rlqs-test-%d:", time.Now().UnixNano())
	p := floodgate.Policy{Name: "api", Algorithm: floodgate.TokenBucket, Quota: 2000, Window: time.Hour}
	const interval = 20 * time.Millisecond
	var clients []*rlqsclient.Client
	for range 2 {
		store, err := redisstore.New(rdb, redisstore.WithPrefix(prefix), redisstore.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		srv, err := rlqs.NewServer(store, rules(t, p), rlqs.Options{Interval: interval})
		if err != nil {
			t.Fatal(err)
		}
		conn := serve(t, srv)
		for range 2 {
			c, err := rlqsclient.New(conn, rlqsclient.Settings{Domain: "envoy", Interval: interval, NoAssignment: deny()}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			clients = append(clients, c)
		}
	}
	got := make([]int, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			for range 40 {
				got[i] += spend(c, 50)
				time.Sleep(interval)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := c.Sync(ctx)
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for _, n := range got {
		total += n
	}
	t.Logf("admitted %v = %d", got, total)
	// The refill over the test's few seconds adds a token or two.
	if total > 2005 || total < 1900 {
		t.Fatalf("admitted %v = %d in all; want the quota of 2,000", got, total)
	}
	for i, n := range got {
		if n < 200 {
			t.Fatalf("client %d admitted %d of %v", i, n, got)
		}
	}
}
