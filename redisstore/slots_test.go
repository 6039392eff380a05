package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
)

func TestSlotsAreLeases(t *testing.T) {
	for name, rdb := range map[string]redis.UniversalClient{"standalone": standaloneClient(t), "cluster": clusterClient(t)} {
		t.Run(name, func(t *testing.T) {
			st := newTestStore(t, rdb)
			ctx := context.Background()
			p := floodgate.Concurrency{Name: "inflight", Max: 2}

			rel1, free, ok, err := st.Acquire(ctx, "client", p, time.Minute)
			if err != nil || !ok || free != 1 {
				t.Fatalf("first slot: ok=%v free=%d err=%v", ok, free, err)
			}
			// The second holder crashes: its lease is short and never released.
			_, free, ok, err = st.Acquire(ctx, "client", p, 150*time.Millisecond)
			if err != nil || !ok || free != 0 {
				t.Fatalf("second slot: ok=%v free=%d err=%v", ok, free, err)
			}
			if _, _, ok, err = st.Acquire(ctx, "client", p, time.Minute); err != nil || ok {
				t.Fatalf("third slot of two: ok=%v err=%v", ok, err)
			}
			rel1()
			rel1() // a second release is harmless
			rel3, free, ok, err := st.Acquire(ctx, "client", p, time.Minute)
			if err != nil || !ok || free != 0 {
				t.Fatalf("after a release: ok=%v free=%d err=%v", ok, free, err)
			}
			// Once the crashed holder's lease ends, its slot is free again.
			time.Sleep(200 * time.Millisecond)
			rel4, free, ok, err := st.Acquire(ctx, "client", p, time.Minute)
			if err != nil || !ok || free != 0 {
				t.Fatalf("after the lease ended: ok=%v free=%d err=%v", ok, free, err)
			}
			if n := checkTTLs(t, rdb, st.prefix, false); n != 1 {
				t.Fatalf("%d keys under the store's prefix, want the one slot set (with a TTL)", n)
			}
			rel3()
			rel4()
			if n := checkTTLs(t, rdb, st.prefix, false); n != 0 {
				t.Fatalf("%d keys left after every slot was released", n)
			}
		})
	}
}
