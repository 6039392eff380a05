package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
)

// TestAlgorithmsFailLoudly: the store speaks every algorithm of
// floodgate.Algorithms(); one it lacks fails its construction by name, and
// a policy of such an algorithm is refused by Take with ErrInvalidPolicy
// before any I/O (the client points at a closed port).
func TestAlgorithmsFailLoudly(t *testing.T) {
	if err := checkAlgorithms(floodgate.Algorithms()); err != nil {
		t.Fatal(err)
	}
	unknown := floodgate.Algorithm(len(floodgate.Algorithms()) + 1)
	err := checkAlgorithms(append(floodgate.Algorithms(), unknown))
	if err == nil || err.Error() != "redisstore: no decision for algorithm "+unknown.String()+": add it to wireCode (redisstore/wire.go), algorithmSuffix (redisstore/keys.go) and lua/dispatch.lua" {
		t.Errorf("an algorithm past the last: %v", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer rdb.Close()
	s, err := New(rdb, WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []floodgate.Algorithm{0, unknown} {
		p := []floodgate.Policy{{Name: "p", Algorithm: a, Quota: 1, Window: time.Second}}
		err := s.Take(context.Background(), "k", floodgate.Cost{Requests: 1}, p, make([]floodgate.Result, 1))
		if !errors.Is(err, floodgate.ErrInvalidPolicy) {
			t.Errorf("algorithm %v: Take = %v, want ErrInvalidPolicy", a, err)
		}
	}
}
