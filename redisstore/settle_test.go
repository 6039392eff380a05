package redisstore

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/memorystore"
	"github.com/floodgate/floodgate/storetest"
)

// TestDifferentialSettle plays seeded random admissions, post-charges
// (past the capacity too) and refunds of earlier admissions on the Redis
// store and on the memory store, at the same test times, for every
// algorithm, and requires every result to match field for field.
func TestDifferentialSettle(t *testing.T) {
	rdb := standaloneClient(t)
	rng := rand.New(rand.NewPCG(41, 43))
	for _, a := range floodgate.Algorithms() {
		t.Run(a.String(), func(t *testing.T) {
			for round := range 6 {
				p := floodgate.Policy{Name: "p", Algorithm: a, Quota: 1 + rng.Int64N(20), Window: time.Duration(1+rng.Int64N(3000)) * time.Millisecond}
				if a == floodgate.TokenBucket || a == floodgate.GCRA {
					p.Burst = 1 + rng.Int64N(2*p.Quota)
				}
				clock := storetest.NewClock(storetest.Epoch)
				mem, err := memorystore.New(memorystore.WithClock(clock.Now))
				if err != nil {
					t.Fatal(err)
				}
				red := newTestStore(t, rdb, WithClock(clock.Now))
				var admitted []time.Time
				for i := range 120 {
					clock.Advance(time.Duration(rng.Int64N(int64(p.Window) / 4)))
					c := rng.Int64N(p.Capacity() + 1)
					cost := floodgate.Cost{Requests: c}
					switch k := rng.IntN(5); {
					case k == 0:
						cost.Kind, cost.Requests = floodgate.Post, rng.Int64N(3*p.Capacity()+1)
					case k == 1 && len(admitted) > 0:
						cost.Kind, cost.At = floodgate.Refund, admitted[rng.IntN(len(admitted))]
					}
					want, got := make([]floodgate.Result, 1), make([]floodgate.Result, 1)
					ps := []floodgate.Policy{p}
					if err := mem.Take(context.Background(), "k", cost, ps, want); err != nil {
						t.Fatal(err)
					}
					if err := red.Take(context.Background(), "k", cost, ps, got); err != nil {
						t.Fatal(err)
					}
					if got[0] != want[0] {
						t.Fatalf("round %d step %d %+v cost %+v: redis %+v, memory %+v", round, i, p, cost, got[0], want[0])
					}
					if cost.Kind == floodgate.Admit && want[0].Allowed && c > 0 {
						admitted = append(admitted, clock.Now())
					}
				}
				mem.Close()
			}
		})
	}
}
