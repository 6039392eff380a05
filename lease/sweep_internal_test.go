package lease

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/memorystore"
	"github.com/floodgate/floodgate/storetest"
)

// TestSweep: leases idle for two intervals are forgotten once the map
// reaches its sweep size, and the size to sweep at follows what is left.
func TestSweep(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch)
	s, err := New(testkit.Memory(t, memorystore.WithClock(clock.Now)), 10*time.Millisecond, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	p := []floodgate.Policy{{Name: "p", Algorithm: floodgate.TokenBucket, Quota: 10, Window: time.Second}}
	res := make([]floodgate.Result, 1)
	take := func(key string) {
		if err := s.Take(context.Background(), key, floodgate.Cost{Requests: 1}, p, res); err != nil {
			t.Fatal(err)
		}
	}
	for i := range minSweep {
		take(fmt.Sprint("cold", i))
	}
	clock.Advance(20 * time.Millisecond)
	take("hot")
	take("hot2")
	if n := len(s.leases); n != 2 || s.sweepAt != minSweep {
		t.Fatalf("%d leases, sweep at %d: want the 2 new ones, %d", n, s.sweepAt, minSweep)
	}
}
