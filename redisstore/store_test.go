package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/storetest"
)

func TestTag(t *testing.T) {
	hashed := func(k string) string {
		sum := sha256.Sum256([]byte(k))
		return "#" + hex.EncodeToString(sum[:16])
	}
	long := strings.Repeat("x", 129)
	for _, c := range []struct{ key, want string }{
		{"1.2.3.4", "1.2.3.4"},
		{"tenant:7|/login", "tenant:7|/login"},
		{strings.Repeat("x", 128), strings.Repeat("x", 128)},
		{long, hashed(long)},
		{"", hashed("")},
		{"a}b", hashed("a}b")},
		{"{a}", hashed("{a}")},
		{"#abc", hashed("#abc")}, // could otherwise equal a hashed tag
	} {
		if got := tag(c.key, 128); got != c.want {
			t.Errorf("tag(%q) = %q, want %q", c.key, got, c.want)
		}
	}
	if n := len(tag(long, 128)); n != 33 {
		t.Errorf("hashed tag is %d bytes, want 33", n)
	}
	if _, err := New(redis.NewClient(&redis.Options{}), WithPrefix("a{b")); err == nil {
		t.Error("New accepted a prefix with '{'")
	}
}

func TestSlotMatchesRedis(t *testing.T) {
	rdb := clusterClient(t)
	for _, k := range []string{"a", "user:1", "#0123456789abcdef0123456789abcdef", "123456789"} {
		want, err := rdb.ClusterKeySlot(context.Background(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := slot(k); int64(got) != want {
			t.Errorf("slot(%q) = %d, Redis says %d", k, got, want)
		}
	}
}

// TestHostileKeysOnCluster: keys that would break the hash tag, with two
// policies (two Redis keys), decide correctly on the Cluster instead of
// failing with CROSSSLOT, and every key of a decision lands in one slot.
func TestHostileKeysOnCluster(t *testing.T) {
	rdb := clusterClient(t)
	s := newTestStore(t, rdb)
	ps := []floodgate.Policy{
		{Name: "a", Algorithm: floodgate.FixedWindow, Quota: 2, Window: time.Minute},
		{Name: "b", Algorithm: floodgate.SlidingWindowLog, Quota: 5, Window: time.Minute},
	}
	res := make([]floodgate.Result, 2)
	ctx := context.Background()
	for _, key := range []string{"}", "{", "{}", "", "a{b}c", "x}{y", strings.Repeat("k", 5000), "#x"} {
		for i, want := range []bool{true, true, false} {
			if err := s.Take(ctx, key, one, ps, res); err != nil {
				t.Fatalf("key %.20q call %d: %v", key, i, err)
			}
			if res[0].Allowed != want {
				t.Fatalf("key %.20q call %d: allowed=%v, want %v", key, i, res[0].Allowed, want)
			}
		}
		k1, k2 := redisKey(s.prefix, tag(key, s.maxKeyLen), &ps[0]), redisKey(s.prefix, tag(key, s.maxKeyLen), &ps[1])
		s1, err1 := rdb.ClusterKeySlot(ctx, k1).Result()
		s2, err2 := rdb.ClusterKeySlot(ctx, k2).Result()
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		if s1 != s2 {
			t.Errorf("key %.20q: %s in slot %d, %s in slot %d", key, k1, s1, k2, s2)
		}
		if n := len(k1); n > 80 {
			t.Errorf("key name %q is %d bytes", k1, n)
		}
	}
}

// TestCodeFlush: the loaded code vanishes between two calls (FUNCTION
// FLUSH and SCRIPT FLUSH, as after a restart without persistence or a
// failover); the second call still succeeds, sees the first one's state,
// and has loaded the function library again on every master.
func TestCodeFlush(t *testing.T) {
	for name, rdb := range map[string]redis.UniversalClient{"Standalone": standaloneClient(t), "Cluster": clusterClient(t)} {
		t.Run(name, func(t *testing.T) {
			s := newTestStore(t, rdb)
			ps := onePolicy(floodgate.SlidingWindowLog)
			res := make([]floodgate.Result, 1)
			ctx := context.Background()
			if err := s.Take(ctx, "k", one, ps, res); err != nil || res[0].Remaining != 2 {
				t.Fatalf("first call: %+v, %v", res[0], err)
			}
			err := s.everyMaster(ctx, func(ctx context.Context, c redis.Cmdable) error {
				if err := c.FunctionFlush(ctx).Err(); err != nil {
					return err
				}
				return c.ScriptFlush(ctx).Err()
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Take(ctx, "k", one, ps, res); err != nil || !res[0].Allowed || res[0].Remaining != 1 {
				t.Fatalf("after FUNCTION FLUSH and SCRIPT FLUSH: %+v, %v; want allowed, remaining 1", res[0], err)
			}
			if s.noFunctions.Load() {
				t.Fatal("the store fell back to EVALSHA on a server that has functions")
			}
			err = s.everyMaster(ctx, func(ctx context.Context, c redis.Cmdable) error {
				libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: functionName}).Result()
				if err == nil && len(libs) != 1 {
					err = fmt.Errorf("FUNCTION LIST %s: %d libraries, want 1", functionName, len(libs))
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCodeMissing: the answers that mean "load the code and call again",
// as Redis 6 and 7 word them, and those that do not.
func TestCodeMissing(t *testing.T) {
	for _, c := range []struct {
		msg              string
		missing, refused bool
	}{
		{"NOSCRIPT No matching script. Please use EVAL.", true, false},
		{"ERR Function not found", true, false},
		{"ERR unknown command 'fcall', with args beginning with: 'floodgate_1' '1' ", true, true},   // Redis 7
		{"ERR unknown command `fcall`, with args beginning with: `floodgate_1`, `1`, ", true, true}, // Redis 5 and 6
		{"NOPERM this user has no permissions to run the 'fcall' command", true, true},
		{"NOPERM this user has no permissions to access one of the keys used as arguments", false, false},
		{"ERR Error running script (call to f_x): @user_script:1: oops", false, false},
		{"READONLY You can't write against a read only replica.", false, false},
		{"NOPERM this user has no permissions to run the 'function|load' command", true, true},
		{"ERR unknown command `FUNCTION`, with args beginning with: `LOAD`, ", true, true},
	} {
		err := errors.New(c.msg)
		if got := codeMissing(err); got != c.missing {
			t.Errorf("codeMissing(%q) = %v, want %v", c.msg, got, c.missing)
		}
		if got := functionsRefused(err); got != c.refused {
			t.Errorf("functionsRefused(%q) = %v, want %v", c.msg, got, c.refused)
		}
	}
}

// TestNoFcallPermission: a user who may load functions but not call them
// is switched to EVALSHA at the first refusal, instead of loading the
// library again on every call.
func TestNoFcallPermission(t *testing.T) {
	rdb := aclClient(t, "-fcall")
	s := newTestStore(t, rdb)
	res := make([]floodgate.Result, 1)
	for i, want := range []int64{2, 1, 0} {
		if err := s.Take(context.Background(), "k", one, onePolicy(floodgate.GCRA), res); err != nil || !res[0].Allowed || res[0].Remaining != want {
			t.Fatalf("call %d: %+v, %v; want allowed, remaining %d", i, res[0], err, want)
		}
		if !s.noFunctions.Load() {
			t.Fatalf("call %d: still calling FCALL", i)
		}
	}
}

// aclClient is a client of the standalone server as a new user with all
// permissions but the given ACL rules, deleted at the end of the test.
func aclClient(t *testing.T, rules ...string) *redis.Client {
	admin := standaloneClient(t)
	ctx := context.Background()
	user, pass := fmt.Sprintf("fg-acl-%d", storeNo.Add(1)), "secret"
	args := append([]any{"ACL", "SETUSER", user, "on", ">" + pass, "~*", "&*", "+@all"}, toAny(rules)...)
	if err := admin.Do(ctx, args...).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user) })
	rdb := redis.NewClient(&redis.Options{Addr: admin.Options().Addr, Username: user, Password: pass})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// TestNoFunctionPermission: a Redis user that may neither load nor call
// functions gets the same decisions through EVALSHA, which survives SCRIPT
// FLUSH too.
func TestNoFunctionPermission(t *testing.T) {
	admin := standaloneClient(t)
	ctx := context.Background()
	rdb := aclClient(t, "-function", "-fcall")
	s := newTestStore(t, rdb)
	ps := onePolicy(floodgate.GCRA)
	res := make([]floodgate.Result, 1)
	for i, want := range []int64{2, 1, 0} {
		if err := s.Take(ctx, "k", one, ps, res); err != nil || !res[0].Allowed || res[0].Remaining != want {
			t.Fatalf("call %d: %+v, %v; want allowed, remaining %d", i, res[0], err, want)
		}
	}
	if !s.noFunctions.Load() {
		t.Fatal("the store still calls FCALL for a user without FUNCTION")
	}
	// NOSCRIPT: the script is loaded again.
	if err := admin.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Take(ctx, "k", one, ps, res); err != nil || res[0].Allowed || res[0].Remaining != 0 {
		t.Fatalf("after SCRIPT FLUSH: %+v, %v; want denied, remaining 0", res[0], err)
	}
}

// TestServerTime: without a test clock, two stores (two app servers) share
// the server's clock and one quota.
func TestServerTime(t *testing.T) {
	rdb := standaloneClient(t)
	prefix := newPrefix(t, rdb)
	a, _ := New(rdb, WithPrefix(prefix))
	b, _ := New(rdb, WithPrefix(prefix))
	ctx := context.Background()
	res := make([]floodgate.Result, 2)
	ps := []floodgate.Policy{
		{Name: "fw", Algorithm: floodgate.FixedWindow, Quota: 3, Window: time.Hour},
		{Name: "tb", Algorithm: floodgate.TokenBucket, Quota: 4, Window: time.Hour},
	}
	for i, st := range []*Store{a, b, a, b} {
		if err := st.Take(ctx, "shared", one, ps, res); err != nil {
			t.Fatal(err)
		}
		if want := i < 3; res[0].Allowed != want {
			t.Fatalf("call %d: allowed=%v, want %v", i, res[0].Allowed, want)
		}
	}
	if r := res[0]; r.RetryAfter <= 0 || r.RetryAfter > time.Hour || r.ResetAfter != r.RetryAfter {
		t.Errorf("fixed window denial: %+v", r)
	}
	// The bucket would admit (4 per hour, one token left; the next whole
	// one within 15 minutes), so it reports its standing without this cost.
	if r := res[1]; !r.Allowed || r.Remaining != 1 || r.ResetAfter <= 0 || r.ResetAfter > 15*time.Minute {
		t.Errorf("token bucket beside the denial: %+v", r)
	}
}

// countingHook counts the commands a client sends.
type countingHook struct{ n atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

func TestNearCache(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testkit.Env(t, "FLOODGATE_TEST_REDIS")})
	t.Cleanup(func() { rdb.Close() })
	hook := &countingHook{}
	rdb.AddHook(hook)
	clock := storetest.NewClock(storetest.Epoch)
	s := newTestStore(t, rdb, WithClock(clock.Now), WithNearCache(16, time.Second))
	ps := []floodgate.Policy{
		{Name: "short", Algorithm: floodgate.FixedWindow, Quota: 2, Window: time.Minute},
		{Name: "long", Algorithm: floodgate.SlidingWindowCounter, Quota: 100, Window: time.Hour},
	}
	res := make([]floodgate.Result, 2)
	ctx := context.Background()
	take := func(key string, cost int64, ps []floodgate.Policy) {
		t.Helper()
		if err := s.Take(ctx, key, floodgate.Cost{Requests: cost}, ps, res); err != nil {
			t.Fatal(err)
		}
	}
	take("flood", 2, ps) // quota spent
	take("flood", 1, ps) // denied by Redis: retry in 60 s
	if res[0].Allowed || res[0].RetryAfter != time.Minute || !res[1].Allowed || res[1].Remaining != 98 {
		t.Fatalf("denial from Redis: %+v", res)
	}
	sent := hook.n.Load()
	clock.Advance(10 * time.Second)
	for range 1000 {
		take("flood", 1, ps)
	}
	if n := hook.n.Load() - sent; n != 0 {
		t.Fatalf("a flood of denied calls sent %d commands, want 0", n)
	}
	want := floodgate.Result{Allowed: false, Remaining: 0, ResetAfter: 50 * time.Second, RetryAfter: 50 * time.Second, Cached: true}
	if res[0] != want || !res[1].Allowed || res[1].Remaining != 98 || !res[1].Cached {
		t.Fatalf("near-cache answer 10 s later: %+v, want %+v and the other policy unchanged", res, want)
	}
	// What the cache cannot vouch for goes to Redis: a peek... is covered
	// (it asks about a cost of 1); other policies, and a key not denied, are not.
	take("flood", 0, ps)
	if n := hook.n.Load() - sent; n != 0 {
		t.Fatalf("a peek on a denied key sent %d commands", n)
	}
	take("flood", 1, ps[:1])
	take("other", 1, ps)
	if n := hook.n.Load() - sent; n != 2 {
		t.Fatalf("other policies and another key sent %d commands, want 2", n)
	}
	// Once the denial's RetryAfter has passed, Redis decides again (and admits).
	clock.Advance(50 * time.Second)
	take("flood", 1, ps)
	if !res[0].Allowed || res[0].Cached || hook.n.Load()-sent != 3 {
		t.Fatalf("after RetryAfter: %+v, commands %d; want admitted by Redis", res, hook.n.Load()-sent)
	}
	// Reset through this store drops the entry.
	take("flood", 2, ps)
	take("flood", 1, ps)
	if err := s.Reset(ctx, "flood", ps); err != nil {
		t.Fatal(err)
	}
	take("flood", 1, ps)
	if !res[0].Allowed {
		t.Fatalf("after Reset: %+v, want admitted", res)
	}
	// Short denials are not cached; the size is bounded.
	tiny := []floodgate.Policy{{Name: "tiny", Algorithm: floodgate.TokenBucket, Quota: 10, Window: time.Second}}
	take("fast", 10, tiny)
	take("fast", 1, tiny) // retry in 100 ms < 1 s
	before := hook.n.Load()
	take("fast", 1, tiny)
	if hook.n.Load() == before {
		t.Fatal("a denial shorter than minRetryAfter was answered locally")
	}
	for i := range 100 {
		k := "many-" + strings.Repeat("x", i)
		take(k, 2, ps)
		take(k, 1, ps)
	}
	if n := s.near.len(); n > 16 {
		t.Fatalf("near cache holds %d entries, bound is 16", n)
	}
}

// TestMemoryUsage reports MEMORY USAGE of one key per algorithm, and of the
// sliding log as it grows (docs/REDIS.md quotes these figures).
func TestMemoryUsage(t *testing.T) {
	rdb := standaloneClient(t)
	clock := storetest.NewClock(storetest.Epoch)
	// The default prefix, so that key names have their real length; the
	// key is this test's own (the private server holds nothing else).
	key := "203.0.113.195" // an IPv4 address, a typical partition key
	t.Cleanup(func() { checkTTLs(t, rdb, "fg:{"+key+"}:", true) })
	s, err := New(rdb, WithClock(clock.Now), WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res := make([]floodgate.Result, 1)
	usage := func(p floodgate.Policy, key string) int64 {
		n, err := rdb.MemoryUsage(ctx, redisKey(s.prefix, tag(key, s.maxKeyLen), &p), 0).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, a := range allAlgorithms {
		p := floodgate.Policy{Name: "api", Algorithm: a, Quota: 100_000, Window: time.Hour}
		if err := s.Take(ctx, key, one, []floodgate.Policy{p}, res); err != nil {
			t.Fatal(err)
		}
		n := usage(p, key)
		t.Logf("%-22s %4d bytes (key name %d bytes)", a, n, len(redisKey(s.prefix, key, &p)))
		if a != floodgate.SlidingWindowLog && n > 120 {
			t.Errorf("%s uses %d bytes per key, want ≤ 120", a, n)
		}
	}
	p := floodgate.Policy{Name: "grow", Algorithm: floodgate.SlidingWindowLog, Quota: 100_000, Window: time.Hour}
	done := 0
	for _, entries := range []int{1, 10, 100, 128, 129, 1000} {
		for ; done < entries; done++ {
			clock.Advance(time.Millisecond) // one entry per call
			if err := s.Take(ctx, key, one, []floodgate.Policy{p}, res); err != nil {
				t.Fatal(err)
			}
		}
		n := usage(p, key)
		t.Logf("sliding-window-log %6d entries: %7d bytes (%.1f per entry)", entries, n, float64(n)/float64(entries))
		if per := float64(n) / float64(entries); entries >= 100 && per > 150 {
			t.Errorf("log with %d entries uses %.0f bytes per entry", entries, per)
		}
	}
}
