package redisstore

import (
	"context"
	"encoding/binary"
	"io"
	"math"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
)

// privateCluster is a Redis Cluster of three masters (no replicas) this
// test starts on free ports, so that it may migrate slots at will.
type privateCluster struct {
	nodes []*redis.Client
	ids   []string
	addrs []string
}

func startPrivateCluster(t *testing.T) *privateCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts three redis-servers")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server not found on PATH (%v)", err)
	}
	ctx := context.Background()
	pc := &privateCluster{}
	for i := range 3 {
		port := freePort(t)
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", t.TempDir(),
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		addr := "127.0.0.1:" + strconv.Itoa(port)
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { c.Close() })
		waitFor(t, "PING "+addr, func() bool { return c.Ping(ctx).Err() == nil })
		lo, hi := i*16384/3, (i+1)*16384/3-1
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatal(err)
		}
		pc.nodes, pc.addrs = append(pc.nodes, c), append(pc.addrs, addr)
		pc.ids = append(pc.ids, c.Do(ctx, "CLUSTER", "MYID").Val().(string))
	}
	for _, a := range pc.addrs[1:] {
		host, port, _ := net.SplitHostPort(a)
		if err := pc.nodes[0].Do(ctx, "CLUSTER", "MEET", host, port).Err(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "cluster_state:ok", func() bool {
		for _, c := range pc.nodes {
			info := c.ClusterInfo(ctx).Val()
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3") {
				return false
			}
		}
		return true
	})
	return pc
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// keysOn returns count partition keys whose slot master i serves; in
// slot it only, when slot ≥ 0.
func keysOn(i, count, slotOnly int) []string {
	var keys []string
	for n := 0; len(keys) < count; n++ {
		k := "k" + strconv.Itoa(n)
		sl := slot(k)
		if int(sl)*3/16384 == i && (slotOnly < 0 || int(sl) == slotOnly) {
			keys = append(keys, k)
		}
	}
	return keys
}

// TestClusterMigrationSpendsOnce decides one batch while a slot is half
// migrated from master A to master B. In A's part of the batch the first
// call is answered TRYAGAIN (its key's two policy keys are split between A
// and B), followed by calls that run on A at once and a call for a key
// already moved (ASK). Every decision must be spent exactly once: a resend
// of A's whole part would spend the others twice, and the TRYAGAIN must be
// retried, not returned, once the migration moves the rest of the key.
func TestClusterMigrationSpendsOnce(t *testing.T) {
	pc := startPrivateCluster(t)
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: pc.addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { cc.Close() })
	defer func(d time.Duration) { tryAgainFor = d }(tryAgainFor)
	tryAgainFor = 10 * time.Second // the migration below ends it; no machine is that slow

	s := newTestStore(t, cc)
	const quota = 1_000_000
	ps := []floodgate.Policy{
		{Name: "a", Algorithm: floodgate.FixedWindow, Quota: quota, Window: time.Hour},
		{Name: "b", Algorithm: floodgate.FixedWindow, Quota: quota, Window: time.Hour},
	}
	split := keysOn(0, 1, -1)[0]               // on A, to be split between A and B
	moved := keysOn(0, 2, int(slot(split)))[1] // same slot, moved whole to B
	onA := keysOn(0, 6, -1)[1:]                // other slots of A
	onC := keysOn(2, 2, -1)                    // another master
	for _, k := range onA {
		if slot(k) == slot(split) {
			t.Fatalf("key %q shares the migrating slot", k)
		}
	}
	all := append(append([]string{split, moved}, onA...), onC...)
	res := make([]floodgate.Result, len(ps))
	for _, k := range all {
		if err := s.Take(ctx, k, floodgate.Cost{Requests: 1}, ps, res); err != nil || !res[0].Allowed {
			t.Fatalf("first take of %q: %v %+v", k, err, res)
		}
	}

	a, b, sl := pc.nodes[0], pc.nodes[1], slot(split)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.Do(ctx, "CLUSTER", "SETSLOT", sl, "IMPORTING", pc.ids[0]).Err())
	must(a.Do(ctx, "CLUSTER", "SETSLOT", sl, "MIGRATING", pc.ids[1]).Err())
	bHost, bPort, _ := net.SplitHostPort(pc.addrs[1])
	migrate := func(keys ...string) {
		args := []any{"MIGRATE", bHost, bPort, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(a.Do(ctx, args...).Err())
	}
	keyOf := func(k, policy string) string {
		return redisKey(s.prefix, k, &floodgate.Policy{Name: policy, Algorithm: floodgate.FixedWindow})
	}
	migrate(keyOf(split, "b"), keyOf(moved, "a"), keyOf(moved, "b"))

	// One batch, the split key first in A's part.
	batch := make([]*request, 0, len(all))
	for _, k := range all {
		batch = append(batch, s.request(tag(k, s.maxKeyLen), floodgate.Cost{Requests: 1}, ps))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(100 * time.Millisecond) // the store is retrying TRYAGAIN by now
		migrate(keyOf(split, "a"))
	}()
	s.exec(ctx, batch)
	<-done
	for i, r := range batch {
		if r.err != nil {
			t.Errorf("%q in the batch: %v", all[i], r.err)
		}
	}

	// Finish the migration, then read every count back.
	for _, n := range pc.nodes {
		must(n.Do(ctx, "CLUSTER", "SETSLOT", sl, "NODE", pc.ids[1]).Err())
	}
	for _, k := range all {
		for _, p := range ps {
			v, err := cc.Get(ctx, keyOf(k, p.Name)).Bytes()
			if err != nil {
				t.Fatalf("%s: %v", keyOf(k, p.Name), err)
			}
			if _, count := unpackState(t, v); count != 2 {
				t.Errorf("%s counts %d in Redis; the clients saw 2 admissions", keyOf(k, p.Name), count)
			}
		}
	}
}

// unpackState decodes the first two fields of a fixed window's state as
// the script writes it: start, count and window, three packed doubles.
func unpackState(t *testing.T, v []byte) (a, b int64) {
	t.Helper()
	if len(v) != 24 {
		t.Fatalf("state %q is not three packed doubles", v)
	}
	return int64(math.Float64frombits(binary.BigEndian.Uint64(v))), int64(math.Float64frombits(binary.BigEndian.Uint64(v[8:])))
}
