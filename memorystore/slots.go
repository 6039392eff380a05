package memorystore

import (
	"context"
	"time"

	"github.com/floodgate/floodgate"
)

// Acquire implements floodgate.Slots: in-flight slots counted per key and
// policy. The lease is not needed in one process, where release always runs
// (the middleware defers it, so it also runs on panic).
func (s *Store) Acquire(ctx context.Context, key string, c floodgate.Concurrency, lease time.Duration) (func(), int64, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, false, err
	}
	sk := slotKey{key, c.Name}
	sh, _ := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.slots == nil {
		sh.slots = make(map[slotKey]int64)
	}
	n := sh.slots[sk]
	if n >= c.Max {
		return nil, 0, false, nil
	}
	sh.slots[sk] = n + 1
	released := false
	release := func() {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		if released {
			return
		}
		released = true
		if sh.slots[sk] <= 1 {
			delete(sh.slots, sk)
		} else {
			sh.slots[sk]--
		}
	}
	return release, c.Max - n - 1, true, nil
}

type slotKey struct{ key, policy string }
