package memorystore_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/memorystore"
	"github.com/floodgate/floodgate/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) floodgate.Store {
		st := memorystore.New(memorystore.WithClock(now))
		t.Cleanup(func() { st.Close() })
		return st
	})
}

// TestPanicUnlocks: a policy that was never validated can make an
// algorithm panic (here by dividing by a zero window); net/http recovers
// such panics, so the key's shard must not stay locked.
func TestPanicUnlocks(t *testing.T) {
	s := memorystore.New(memorystore.WithSweepInterval(0))
	defer s.Close()
	ctx := context.Background()
	res := make([]floodgate.Result, 1)
	bad := []floodgate.Policy{{Name: "bad", Algorithm: floodgate.GCRA, Quota: 1}}
	panicked := func() (p any) {
		defer func() { p = recover() }()
		s.Take(ctx, "k", 1, bad, res)
		return nil
	}()
	if panicked == nil {
		t.Fatal("a zero window did not panic; this test no longer tests anything")
	}
	done := make(chan error, 1)
	go func() {
		done <- s.Take(ctx, "k", 1, []floodgate.Policy{{Name: "ok", Algorithm: floodgate.GCRA, Quota: 1, Window: time.Second}}, res)
	}()
	select {
	case err := <-done:
		if err != nil || !res[0].Allowed {
			t.Fatalf("after the panic: %+v, %v", res[0], err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the shard stayed locked after a panic")
	}
}
