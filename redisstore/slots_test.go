package redisstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// TestSlotRequestsInOneCall: a Take, three acquires of a cap of two and
// two releases of one token, in this order in one FCALL, answer exactly as
// if sent one by one, and leave the set holding the second token, scored
// by the end of its lease on the server's clock, the set expiring then.
// A slot request of an unknown code is an error reply.
func TestSlotRequestsInOneCall(t *testing.T) {
	rdb := standaloneClient(t)
	ctx := context.Background()
	if err := rdb.FunctionLoadReplace(ctx, library).Err(); err != nil {
		t.Fatal(err)
	}
	prefix := newPrefix(t, rdb)
	set := prefix + "{k}:inflight:slots"
	toks := [3]token{{1}, {2, 0xab}, {3}}
	slotReq := func(code byte, tok *token) *request {
		r := getRequest(1)
		r.keys[0] = set
		if code == acquireCode {
			r.encodeAcquire(2, 60000, tok)
		} else {
			r.encodeRelease(tok)
		}
		return r
	}
	fw := []floodgate.Policy{{Name: "p", Algorithm: floodgate.FixedWindow, Quota: 2, Window: time.Minute}}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixMicro() // a minute's start
	before := serverMillis(t, rdb)
	got := call(t, rdb, request1(prefix, "k", fw, now, 1),
		slotReq(acquireCode, &toks[0]), slotReq(acquireCode, &toks[1]), slotReq(acquireCode, &toks[2]),
		slotReq(releaseCode, &toks[0]), slotReq(releaseCode, &toks[0]))
	after := serverMillis(t, rdb)
	want := []int64{
		1, 1, 60_000_000, 0, 0, // the Take: one of two left, the window ends in a minute
		1, 1, 0, 0, 0, // first slot: one left
		1, 0, 0, 0, 0, // second: none left
		0, 0, 0, 0, 0, // third: refused
		1, 0, 0, 0, 0, // the first token's release
		0, 0, 0, 0, 0, // again: nothing held
	}
	if !slices.Equal(got, want) {
		t.Fatalf("reply %v, want %v", got, want)
	}
	zs, err := rdb.ZRangeWithScores(ctx, set, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(zs) != 1 || zs[0].Member != "02ab00000000000000000000" {
		t.Fatalf("set holds %v, want the second token alone", zs)
	}
	if end := int64(zs[0].Score); end < before+60000 || end > after+60000 {
		t.Errorf("lease ends at %d ms, want between %d and %d", end, before+60000, after+60000)
	}
	if exp, err := rdb.PExpireTime(ctx, set).Result(); err != nil || exp.Milliseconds() != int64(zs[0].Score) {
		t.Errorf("set expires at %v (%v), want its lease's end %d ms", exp.Milliseconds(), err, int64(zs[0].Score))
	}
	bad := slotReq(acquireCode, &toks[0])
	bad.arg[8] = 9
	cmd := evalCmd(ctx, "fcall", functionNameArg, 0, []*request{bad})
	if err := rdb.Process(ctx, cmd); err == nil || !strings.Contains(err.Error(), "unknown algorithm code 9") {
		t.Errorf("slot request of code 9: %v, want an unknown-code error", err)
	}
}

// serverMillis is the Redis server's clock in ms.
func serverMillis(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.UnixMilli()
}

// TestSlotsCapUnderLoad: 24 goroutines take and give back slots of one key
// under a cap of 3 while 4 more decide Takes of the same key, so that
// acquires, releases and Takes share script calls. The holders counted at
// once never exceed the cap, and the set Redis holds never exceeds it
// either (sampled throughout); both admissions and refusals happen; once
// every slot is given back the set is gone, and the Takes admitted equal
// the count Redis holds.
func TestSlotsCapUnderLoad(t *testing.T) {
	inline := redis.NewClient(&redis.Options{Addr: standaloneClient(t).Options().Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { inline.Close() })
	for name, rdb := range map[string]redis.UniversalClient{"standalone": standaloneClient(t), "inline": inline, "cluster": clusterClient(t)} {
		t.Run(name, func(t *testing.T) { slotsCapUnderLoad(t, rdb) })
	}
}

func slotsCapUnderLoad(t *testing.T, rdb redis.UniversalClient) {
	s := newTestStore(t, rdb, WithTimeout(10*time.Second))
	ctx := context.Background()
	c := floodgate.Concurrency{Name: "inflight", Max: 3}
	ps := countingPolicy
	set := s.prefix + "{hot}:inflight:slots"
	var held, most, admitted, refused, takes atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 28 {
		wg.Go(func() {
			res := make([]floodgate.Result, 1)
			for i := 0; i < 40; i++ {
				if w >= 24 {
					if err := s.Take(ctx, "hot", one, ps, res); err != nil {
						t.Error(err)
						return
					}
					takes.Add(1)
					continue
				}
				rel, _, ok, err := s.Acquire(ctx, "hot", c, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					refused.Add(1)
					continue
				}
				admitted.Add(1)
				n := held.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(time.Millisecond)
				held.Add(-1)
				rel()
			}
		})
	}
	sampled := make(chan int64)
	go func() {
		var top int64
		for {
			select {
			case <-stop:
				sampled <- top
				return
			default:
			}
			n, err := rdb.ZCard(ctx, set).Result()
			if err != nil {
				t.Error(err)
			}
			top = max(top, n)
			time.Sleep(200 * time.Microsecond)
		}
	}()
	wg.Wait()
	close(stop)
	if top := <-sampled; top > c.Max {
		t.Errorf("the set held %d slots at once, cap %d", top, c.Max)
	}
	if most.Load() > c.Max {
		t.Errorf("%d holders at once, cap %d", most.Load(), c.Max)
	}
	if admitted.Load()+refused.Load() != 24*40 || admitted.Load() == 0 || refused.Load() == 0 {
		t.Errorf("%d admitted, %d refused of %d: want both, adding up", admitted.Load(), refused.Load(), 24*40)
	}
	if n, err := rdb.Exists(ctx, set).Result(); err != nil || n != 0 {
		t.Errorf("the set still exists (%d, %v) after every slot was given back", n, err)
	}
	if got := counted(t, s, "hot"); got != takes.Load() || got != 4*40 {
		t.Errorf("Redis counted %d Takes, %d admitted, want %d", got, takes.Load(), 4*40)
	}
	t.Logf("%d slots admitted, %d refused, at most %d held", admitted.Load(), refused.Load(), most.Load())
}

// TestSlotsDurability: under WithDurability a slot is answered where the
// replicas confirm it (the Sentinel master and a Cluster master of the test
// services, one replica each), and where they do not (a server without a
// replica) the acquire fails with ErrNotReplicated and gives its slot back:
// the set is gone.
func TestSlotsDurability(t *testing.T) {
	ctx := context.Background()
	c := floodgate.Concurrency{Name: "d", Max: 2}
	p := startPrivateRedis(t)
	lone := redis.NewClient(&redis.Options{Addr: p.addr()})
	t.Cleanup(func() { lone.Close() })
	for _, tc := range []struct {
		name string
		rdb  redis.UniversalClient
		ok   bool
	}{
		{"standalone without a replica", lone, false},
		{"Cluster, 1 of 1 replica", clusterClient(t), true},
		{"Sentinel master, 1 of 1 replica", sentinelClient(t), true},
	} {
		s := newTestStore(t, tc.rdb, WithDurability(1, 300*time.Millisecond))
		rel, free, ok, err := s.Acquire(ctx, "k", c, time.Minute)
		switch {
		case tc.ok && (err != nil || !ok || free != 1):
			t.Errorf("%s: ok=%v free=%d err=%v, want a slot with 1 free", tc.name, ok, free, err)
		case !tc.ok && (ok || !errors.Is(err, ErrNotReplicated) || !errors.Is(err, floodgate.ErrStoreUnavailable)):
			t.Errorf("%s: ok=%v err=%v, want ErrStoreUnavailable wrapping ErrNotReplicated", tc.name, ok, err)
		}
		if rel != nil {
			rel()
		}
		if n, err := tc.rdb.Exists(ctx, s.prefix+"{k}:d:slots").Result(); err != nil || n != 0 {
			t.Errorf("%s: the set exists (%d, %v) after the slot was given back", tc.name, n, err)
		}
	}
}
