package engine_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/memorystore"
)

// keyLengths is a memorystore.Store that records the longest key it was
// asked about.
type keyLengths struct {
	*memorystore.Store
	mu      sync.Mutex
	longest int
}

func (k *keyLengths) Take(ctx context.Context, key string, cost floodgate.Cost, ps []floodgate.Policy, rs []floodgate.Result) error {
	k.mu.Lock()
	k.longest = max(k.longest, len(key))
	k.mu.Unlock()
	return k.Store.Take(ctx, key, cost, ps, rs)
}

// TestLongKeysBounded: a 10 KB partition key reaches the store as at most
// MaxKeyBytes, two long keys that differ only at their end keep their own
// counters, and peek and reset find the counter of a long key.
func TestLongKeysBounded(t *testing.T) {
	mem := testkit.Memory(t)
	st := &keyLengths{Store: mem}
	eng, err := engine.New(engine.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	c, err := eng.Compile(engine.Rule{Name: "r", Policies: []floodgate.Policy{{Name: "p", Algorithm: floodgate.FixedWindow, Quota: 1, Window: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	long := strings.Repeat("k", 10_000)
	for _, key := range []string{long + "a", long + "b"} {
		if out := c.Decide(ctx, engine.Request{Key: key, Cost: floodgate.Cost{Requests: 1}}); out.Verdict != engine.Allowed {
			t.Fatalf("first request of a long key: %v", out.Verdict)
		}
	}
	if st.longest > engine.MaxKeyBytes {
		t.Fatalf("the store was asked about a %d-byte key", st.longest)
	}
	if out := c.Peek(ctx, long+"a"); out.Verdict != engine.Denied {
		t.Fatalf("peek of the spent long key: %v", out.Verdict)
	}
	if err := c.Reset(ctx, long+"a"); err != nil {
		t.Fatal(err)
	}
	if out := c.Decide(ctx, engine.Request{Key: long + "a", Cost: floodgate.Cost{Requests: 1}}); out.Verdict != engine.Allowed {
		t.Fatalf("after reset: %v", out.Verdict)
	}
}

// TestBoundKeyNoCollision: a key sent as another long key's digest is
// hashed again, so it cannot share that key's counter.
func TestBoundKeyNoCollision(t *testing.T) {
	long := strings.Repeat("k", 10_000)
	digest := engine.BoundKey(long)
	if got := engine.BoundKey(digest); got == digest {
		t.Fatalf("the digest %q sent as a key maps to itself", digest)
	}
	if got := engine.BoundKey("user-42"); got != "user-42" {
		t.Fatalf("a short key changed: %q", got)
	}
}
