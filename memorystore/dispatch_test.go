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
	sixth := floodgate.Algorithm(len(floodgate.Algorithms()) + 1)
	err := checkAlgorithms(append(floodgate.Algorithms(), sixth))
	if want := "memorystore: no decision for algorithm algorithm(6): add it to deciders (memorystore/store.go)"; err == nil || err.Error() != want {
		t.Errorf("a sixth algorithm: %v, want %q", err, want)
	}
	s, err := New(WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []floodgate.Algorithm{0, sixth} {
		p := []floodgate.Policy{{Name: "p", Algorithm: a, Quota: 1, Window: time.Second}}
		for range 2 { // a new key, then one the store holds
			err := s.Take(context.Background(), "k", floodgate.Cost{Requests: 1}, p, make([]floodgate.Result, 1))
			if !errors.Is(err, floodgate.ErrInvalidPolicy) {
				t.Errorf("algorithm %v: Take = %v, want ErrInvalidPolicy", a, err)
			}
		}
	}
}
