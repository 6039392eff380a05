package memorystore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
)

// TestDispatchFailsLoudly: the store decides every algorithm of
// floodgate.Algorithms(); one it lacks fails its construction by name,
// and a policy of such an algorithm is refused by Take with
// ErrInvalidPolicy instead of running as another algorithm.
func TestDispatchFailsLoudly(t *testing.T) {
	if err := checkAlgorithms(floodgate.Algorithms()); err != nil {
		t.Fatal(err)
	}
	unknown := floodgate.Algorithm(len(floodgate.Algorithms()) + 1)
	err := checkAlgorithms(append(floodgate.Algorithms(), unknown))
	if want := "memorystore: no decision for algorithm " + unknown.String() + ": add it to decide's switch (memorystore/store.go)"; err == nil || err.Error() != want {
		t.Errorf("an algorithm past the last: %v, want %q", err, want)
	}
	s, err := New(WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []floodgate.Algorithm{0, unknown} {
		p := []floodgate.Policy{{Name: "p", Algorithm: a, Quota: 1, Window: time.Second}}
		for range 2 { // a new key, then one the store holds
			err := s.Take(context.Background(), "k", floodgate.Cost{Requests: 1}, p, make([]floodgate.Result, 1))
			if !errors.Is(err, floodgate.ErrInvalidPolicy) {
				t.Errorf("algorithm %v: Take = %v, want ErrInvalidPolicy", a, err)
			}
		}
	}
}

// TestHeldKeyDoesNotAllocate: a Take on a key the store holds allocates
// nothing, for every algorithm that keeps a State (a log grows), on the
// one-policy path and the general one: the dispatch must not make the
// result escape.
func TestHeldKeyDoesNotAllocate(t *testing.T) {
	s, err := New(WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, a := range floodgate.Algorithms() {
		if a == floodgate.SlidingWindowLog {
			continue
		}
		one := []floodgate.Policy{{Name: "p", Algorithm: a, Quota: 1_000_000, Window: time.Hour}}
		two := append(one, floodgate.Policy{Name: "q", Algorithm: a, Quota: 1_000_000, Window: time.Minute})
		for _, ps := range [][]floodgate.Policy{one, two} {
			key := a.String() + string(rune('0'+len(ps)))
			r := make([]floodgate.Result, len(ps))
			s.Take(ctx, key, floodgate.Cost{Requests: 1}, ps, r)
			if n := testing.AllocsPerRun(100, func() { s.Take(ctx, key, floodgate.Cost{Requests: 1}, ps, r) }); n != 0 {
				t.Errorf("%v, %d policies: %v allocations per Take", a, len(ps), n)
			}
		}
	}
}
