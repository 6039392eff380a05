package redisstore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
)

// Fault tests on private servers, on free ports apart from the test
// services'. With FLOODGATE_CHAOS=1 (scripts/chaos.sh) they run longer
// and report what docs/REDIS.md records, lines starting "chaos:".

// chaos reports whether this is scripts/chaos.sh's longer run.
func chaos() bool { return os.Getenv("FLOODGATE_CHAOS") == "1" }

// span is short in `make test` and long under chaos.
func span(short, long time.Duration) time.Duration {
	if chaos() {
		return long
	}
	return short
}

// runScript runs one of the repository's scripts/ and fails the test on error.
func runScript(t testing.TB, name string, args ...string) {
	t.Helper()
	out, err := exec.Command("../scripts/"+name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// serverPID is the process id of the redis-server at addr.
func serverPID(t testing.TB, addr string) int {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatalf("no process_id in INFO of %s", addr)
	return 0
}

// countingPolicy never denies within a test and never starts a new window
// in one (fixed windows align to the epoch: a 1000 h window turns over once
// in 41 days).
var countingPolicy = []floodgate.Policy{{Name: "count", Algorithm: floodgate.FixedWindow, Quota: 1 << 40, Window: 1000 * time.Hour}}

// counted is how many units Redis holds for key under countingPolicy, by a
// peek.
func counted(t testing.TB, s *Store, key string) int64 {
	t.Helper()
	res := make([]floodgate.Result, 1)
	var err error
	for range 50 { // a failover may still be settling
		if err = s.Take(context.Background(), key, floodgate.Cost{}, countingPolicy, res); err == nil {
			return countingPolicy[0].Quota - res[0].Remaining
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("peek of %s: %v", key, err)
	return 0
}

// tally counts one key's decisions from Redis and its failed calls.
type tally struct{ admitted, failed atomic.Int64 }

func (c *tally) take(s *Store, key string, res []floodgate.Result) {
	if err := s.Take(context.Background(), key, one, countingPolicy, res); err != nil {
		c.failed.Add(1)
	} else if res[0].Allowed {
		c.admitted.Add(1)
	}
}

// hammer runs workers goroutines each calling f until stop is closed.
func hammer(workers int, stop <-chan struct{}, f func(worker int)) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					f(w)
				}
			}
		})
	}
	return &wg
}

// TestConnectionKillsCountOnce: Redis drops every client connection
// (CLIENT KILL TYPE normal) every 5 ms under load, on a client with
// go-redis' default retries (3). No decision or slot may be spent twice:
// what Redis counted lies between what it answered as admitted and that
// plus the calls that failed, whose outcome is unknown (REQUIREMENTS A5,
// S1; docs/REDIS.md, "Exactly once").
func TestConnectionKillsCountOnce(t *testing.T) {
	p := startPrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.addr(), PoolSize: 32})
	t.Cleanup(func() { rdb.Close() }) // after newTestStore's cleanup
	s := newTestStore(t, rdb)
	admin := redis.NewClient(&redis.Options{Addr: p.addr(), MaxRetries: -1})
	defer admin.Close()
	ctx := context.Background()

	const keys = 4
	var tallies [keys]tally
	var slots tally
	stop := make(chan struct{})
	work := hammer(16, stop, func(w int) {
		res := make([]floodgate.Result, 1)
		if w < 14 {
			tallies[w%keys].take(s, fmt.Sprint("kill", w%keys), res)
			return
		}
		release, _, ok, err := s.Acquire(ctx, "killslots", floodgate.Concurrency{Name: "c", Max: 1 << 40}, time.Hour)
		switch {
		case err != nil:
			slots.failed.Add(1)
		case ok:
			_ = release // held: the set counts every slot taken
			slots.admitted.Add(1)
		}
	})
	kills := 0
	for end := time.Now().Add(span(1500*time.Millisecond, 10*time.Second)); time.Now().Before(end); kills++ {
		if err := admin.ClientKillByFilter(ctx, "TYPE", "normal").Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	work.Wait()

	var admitted, failed, twice int64
	check := func(what string, c *tally, got int64) {
		a, f := c.admitted.Load(), c.failed.Load()
		admitted, failed = admitted+a, failed+f
		twice += max(0, got-a-f)
		if got < a || got > a+f {
			t.Errorf("%s: Redis counted %d; admitted %d, failed %d: want between %d and %d", what, got, a, f, a, a+f)
		}
	}
	for k := range tallies {
		check(fmt.Sprint("key ", k), &tallies[k], counted(t, s, fmt.Sprint("kill", k)))
	}
	k := s.prefix + "{" + tag("killslots", s.maxKeyLen) + "}:c:slots"
	check("slots", &slots, admin.ZCard(ctx, k).Val())
	if admitted == 0 {
		t.Fatal("nothing admitted: the kills left no time to decide")
	}
	t.Logf("chaos: connection kills: %d kills in %v; %d decisions and slots admitted, %d failed calls (outcome unknown), %d counted twice",
		kills, span(1500*time.Millisecond, 10*time.Second), admitted, failed, twice)
}

// TestPauseAtDefaults: Redis stops for 80 ms (SIGSTOP, then SIGCONT) three
// times under load, with the store and the Limiter at their defaults: no
// request fails (REQUIREMENTS S3: a store fails by decision, not by a
// stall; docs/REDIS.md, "Timeouts": 80 ms stalls happen on a busy host).
func TestPauseAtDefaults(t *testing.T) {
	p := startPrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: p.addr()})
	defer rdb.Close()
	s, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	l, err := floodgate.NewLimiter(s, countingPolicy, floodgate.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	var ok, failed atomic.Int64
	stop := make(chan struct{})
	work := hammer(8, stop, func(w int) {
		d, err := l.Take(context.Background(), fmt.Sprint("pause", w), 1)
		if err != nil || !d.Allowed || d.Degraded {
			failed.Add(1)
			return
		}
		ok.Add(1)
	})
	for range 3 {
		time.Sleep(150 * time.Millisecond)
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(80 * time.Millisecond)
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(150 * time.Millisecond)
	close(stop)
	work.Wait()
	if failed.Load() != 0 || l.StoreErrors() != 0 || ok.Load() == 0 {
		t.Fatalf("three 80 ms pauses: %d admitted, %d failed or degraded, %d store errors; want none failed", ok.Load(), failed.Load(), l.StoreErrors())
	}
}

// TestClusterShardOutage: after a second of connection kills on every
// master (killsOnCluster), one master of a private three-master Cluster
// hangs (SIGSTOP) for 1.5 s under load through a Limiter at its defaults
// (fail-closed, its own breaker). Keys on the other masters see no
// failure; the hung master's keys fail, and decide again once it is back
// (REQUIREMENTS S2, S3; docs/REDIS.md, "Cluster").
func TestClusterShardOutage(t *testing.T) {
	addrs := startPrivateCluster(t).addrs // on free ports: two runs on one machine never share it
	ctx := context.Background()
	for _, a := range addrs {
		// No replica takes over here: the healthy masters keep serving
		// their slots while one is out, as they would until a failover.
		c := redis.NewClient(&redis.Options{Addr: a})
		if err := c.ConfigSet(ctx, "cluster-require-full-coverage", "no").Err(); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { cc.Close() }) // after newTestStore's cleanup
	s, err := New(cc)
	if err != nil {
		t.Fatal(err)
	}
	l, err := floodgate.NewLimiter(s, countingPolicy, floodgate.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	// Two keys per master.
	byMaster := map[string][]string{}
	for i := 0; len(byMaster) < 3 || anyShort(byMaster); i++ {
		key := fmt.Sprint("shard", i)
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if a := m.Options().Addr; len(byMaster[a]) < 2 {
			byMaster[a] = append(byMaster[a], key)
		}
	}
	killsOnCluster(t, cc, addrs, byMaster)
	hung := addrs[0]
	var keys []string
	for _, a := range addrs {
		keys = append(keys, byMaster[a]...)
	}
	fails := make([]atomic.Int64, len(keys))
	oks := make([]atomic.Int64, len(keys))
	stop := make(chan struct{})
	work := hammer(2*len(keys), stop, func(w int) {
		i := w % len(keys)
		if d, err := l.Take(ctx, keys[i], 1); err != nil || !d.Allowed {
			fails[i].Add(1)
		} else {
			oks[i].Add(1)
		}
	})
	time.Sleep(300 * time.Millisecond)
	pid := serverPID(t, hung)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(span(1500*time.Millisecond, 4*time.Second))
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	thawed := time.Now()
	before := oks[0].Load()
	for oks[0].Load() == before && time.Since(thawed) < 10*time.Second {
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	work.Wait()
	var healthyFails, healthyOK int64
	for i, k := range keys {
		if i < 2 {
			continue
		}
		healthyFails += fails[i].Load()
		healthyOK += oks[i].Load()
		if fails[i].Load() != 0 {
			t.Errorf("key %s on a healthy master: %d failed of %d", k, fails[i].Load(), fails[i].Load()+oks[i].Load())
		}
	}
	hungFails := fails[0].Load() + fails[1].Load()
	if hungFails == 0 {
		t.Error("no failure on the hung master's keys: the outage was not seen")
	}
	if oks[0].Load() == before {
		t.Error("the hung master's keys did not decide again within 10 s of SIGCONT")
	}
	t.Logf("chaos: shard outage: master %s hung %v; its keys %d failed; healthy masters' keys %d admitted, %d failed",
		hung, span(1500*time.Millisecond, 4*time.Second), hungFails, healthyOK, healthyFails)
}

// killsOnCluster: CLIENT KILL TYPE normal on every master every 5 ms for
// a second under load, through a Cluster client at go-redis' defaults
// (retries, redirects): no decision is counted twice, as on one server
// (TestConnectionKillsCountOnce).
func killsOnCluster(t *testing.T, cc *redis.ClusterClient, addrs []string, byMaster map[string][]string) {
	s := newTestStore(t, cc)
	var keys []string
	for _, a := range addrs {
		keys = append(keys, byMaster[a][0])
	}
	tallies := make([]tally, len(keys))
	stop := make(chan struct{})
	work := hammer(12, stop, func(w int) {
		tallies[w%len(keys)].take(s, keys[w%len(keys)], make([]floodgate.Result, 1))
	})
	var admins []*redis.Client
	for _, a := range addrs {
		admins = append(admins, redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1}))
	}
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		for _, c := range admins {
			if err := c.ClientKillByFilter(context.Background(), "TYPE", "normal").Err(); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(5 * time.Millisecond)
		admittedSince(tallies, 5*time.Second)
	}
	close(stop)
	work.Wait()
	for _, c := range admins {
		c.Close()
	}
	for i, k := range keys {
		a, f := tallies[i].admitted.Load(), tallies[i].failed.Load()
		if got := counted(t, s, k); got < a || got > a+f || a == 0 {
			t.Errorf("Cluster, key %s under connection kills: Redis counted %d; admitted %d, failed %d: want between %d and %d, some admitted", k, got, a, f, a, a+f)
		}
	}
}

// admittedSince waits, at most max, until every key has been admitted
// once more: on a saturated machine kills every 5 ms could otherwise end
// every call before it is answered, and the test would prove nothing.
func admittedSince(tallies []tally, max time.Duration) {
	before := make([]int64, len(tallies))
	for i := range tallies {
		before[i] = tallies[i].admitted.Load()
	}
	for end := time.Now().Add(max); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if allGrew(tallies, before) {
			return
		}
	}
}

func allGrew(tallies []tally, before []int64) bool {
	for i := range tallies {
		if tallies[i].admitted.Load() <= before[i] {
			return false
		}
	}
	return true
}

func anyShort(m map[string][]string) bool {
	for _, ks := range m {
		if len(ks) < 2 {
			return true
		}
	}
	return false
}

// TestSentinelFailoverDurability: a planned SENTINEL FAILOVER of a private
// set under load, with WithDurability(1, 100 ms): no decision Redis
// answered is lost (counted on the new master ≥ admitted), and none is
// counted twice (REQUIREMENTS A5, S1; docs/REDIS.md, "Failover"). Under chaos,
// the same without durability, and a crash of the master while its
// replica lags 3 s (SIGSTOP), with and without, report the loss.
func TestSentinelFailoverDurability(t *testing.T) {
	type variant struct{ durable, lagging bool }
	variants := []variant{{true, false}}
	if chaos() {
		variants = append(variants, variant{false, false}, variant{true, true}, variant{false, true})
	}
	for _, v := range variants {
		t.Run(fmt.Sprintf("durability=%v,lagging=%v", v.durable, v.lagging), func(t *testing.T) { failover(t, v.durable, v.lagging) })
	}
}

func failover(t *testing.T, durable, lagging bool) {
	// On free ports: two runs on one machine never share the set.
	port := freeRun(t, 3)
	base := strconv.Itoa(port)
	replicaAddr, sentinelAddr := fmt.Sprint("127.0.0.1:", port+1), fmt.Sprint("127.0.0.1:", port+2)
	// Registered first: an up that fails halfway still leaves servers.
	t.Cleanup(func() { runScript(t, "sentinel-set.sh", "down", base) })
	runScript(t, "sentinel-set.sh", "up", base)
	ctx := context.Background()
	fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "fgp", SentinelAddrs: []string{sentinelAddr}})
	t.Cleanup(func() { fc.Close() }) // after newTestStore's cleanup
	sentinel := redis.NewSentinelClient(&redis.Options{Addr: sentinelAddr})
	defer sentinel.Close()
	var opts []Option
	if durable {
		opts = append(opts, WithDurability(1, 100*time.Millisecond))
	}
	s := newTestStore(t, fc, opts...)
	var c tally
	stop := make(chan struct{})
	work := hammer(8, stop, func(int) { c.take(s, "failover", make([]floodgate.Result, 1)) })
	time.Sleep(300 * time.Millisecond)
	from := c.admitted.Load()
	what := "planned failover (SENTINEL FAILOVER)"
	if lagging {
		what = "master crash (SIGKILL) with its replica 3 s behind (SIGSTOP)"
		// A stopped replica still receives into its socket buffers; a small
		// replica output buffer makes the master drop it instead, so what
		// it writes after that never reaches the replica, as with a replica
		// that falls behind for real.
		m := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + base})
		err := m.ConfigSet(ctx, "client-output-buffer-limit", "replica 64kb 64kb 0").Err()
		m.Close()
		if err != nil {
			t.Fatal(err)
		}
		replica := serverPID(t, replicaAddr)
		if err := syscall.Kill(replica, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		if err := syscall.Kill(serverPID(t, "127.0.0.1:"+base), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(replica, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	} else if err := sentinel.Failover(ctx, "fgp").Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		addr, err := sentinel.GetMasterAddrByName(ctx, "fgp").Result()
		if err == nil && addr[1] != base {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Sentinel named no new master within 20 s: %v %v", addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	window := c.admitted.Load() - from
	close(stop)
	work.Wait()
	// Read without durability: with it, the new master answers nothing
	// until a replica has joined it (docs/REDIS.md, "Failover").
	got := counted(t, newTestStore(t, fc, WithPrefix(s.prefix)), "failover")
	admitted, failed := c.admitted.Load(), c.failed.Load()
	lost := max(0, admitted-got)
	t.Logf("chaos: %s, durability %v: %d admitted, %d failed calls, %d counted; %d lost of %d decisions admitted in the failover's window (from the fault to 500 ms after Sentinel named the new master), %.3f %%",
		what, durable, admitted, failed, got, lost, window, 100*float64(lost)/float64(max(window, 1)))
	if got > admitted+failed {
		t.Errorf("counted %d, more than admitted %d plus failed %d", got, admitted, failed)
	}
	if durable && lost > 0 {
		t.Errorf("with durability, %d admitted decisions lost (admitted %d, counted %d)", lost, admitted, got)
	}
}

// freeRun returns the first of n consecutive loopback ports that are free
// now, for a set of servers a script starts on consecutive ports.
func freeRun(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		p := freePort(t)
		if p+n > 65536 {
			continue
		}
		free := true
		for q := p + 1; q < p+n && free; q++ {
			l, err := net.Listen("tcp", fmt.Sprint("127.0.0.1:", q))
			if err != nil {
				free = false
				continue
			}
			l.Close()
		}
		if free {
			return p
		}
	}
	t.Fatalf("no %d consecutive free ports found", n)
	return 0
}
