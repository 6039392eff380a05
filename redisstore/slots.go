package redisstore

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"time"

	"github.com/floodgate/floodgate"
)

// Acquire implements floodgate.Slots with leases: a sorted set per key and
// cap, "<prefix>{<tag>}:<cap>:slots", whose members are holders' tokens
// scored by the end of their lease (server ms; lua/slots.lua). An acquire
// and its release are requests of the loaded code like a Take's, through
// the same batcher: one script call may carry them beside concurrent Takes
// and slots of the same server (on a Cluster, of the same hash slot).
// lease bounds how long a crashed holder keeps a slot; at least 1 ms.
//
// The release waits for its answer (at most the per-call timeout, whatever
// the context Acquire was given) and is best effort: if it fails, the lease
// ends anyway.
//
// Errors: as for Take (ErrStoreUnavailable wrapping the cause, or ctx's
// error). Under WithDurability a slot taken on the master but not confirmed
// by enough replicas fails with ErrNotReplicated and is given back.
func (s *Store) Acquire(ctx context.Context, key string, c floodgate.Concurrency, lease time.Duration) (func(), int64, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, false, err
	}
	t := tag(key, s.maxKeyLen)
	k := s.prefix + "{" + t + "}:" + c.Name + ":slots"
	tok := new(token)
	rand.Read(tok[:])
	r := s.slotRequest(t, k)
	r.encodeAcquire(c.Max, max(lease.Milliseconds(), 1), tok)
	if err := s.wait(ctx, r); err != nil {
		if errors.Is(err, ErrNotReplicated) {
			s.release(context.WithoutCancel(ctx), t, k, tok)
		}
		return nil, 0, false, err
	}
	ok, free := r.out[0] == 1, r.out[1]
	putRequest(r)
	if !ok {
		return nil, 0, false, nil
	}
	var once sync.Once
	release := func() {
		// Detached from the request, which may have ended: the wait is
		// bounded by the per-call timeout.
		once.Do(func() { s.release(context.WithoutCancel(ctx), t, k, tok) })
	}
	return release, free, true, nil
}

// release gives back tok's slot of the set k, whose tag is t. Errors are
// dropped: the slot's lease ends anyway.
func (s *Store) release(ctx context.Context, t, k string, tok *token) {
	r := s.slotRequest(t, k)
	r.encodeRelease(tok)
	if s.wait(ctx, r) == nil {
		putRequest(r)
	}
}

// slotRequest is a request of the slot set k, whose tag is t, without its
// argument yet.
func (s *Store) slotRequest(t, k string) *request {
	r := getRequest(1)
	r.keys[0] = k
	if s.grouping != groupAll {
		r.group = uint32(slot(t)) // with groupTag, refined by the tag itself in groups
	}
	return r
}
