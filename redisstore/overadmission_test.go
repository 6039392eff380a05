package redisstore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/testkit"
)

// The over-admission test runs this test binary again as child processes;
// these variables tell a child what to do.
const (
	childEnv      = "FLOODGATE_REDISSTORE_CHILD" // "1" in a child
	childAddrs    = "FLOODGATE_CHILD_ADDRS"      // comma-separated; several means Cluster
	childPrefix   = "FLOODGATE_CHILD_PREFIX"
	childNow      = "FLOODGATE_CHILD_NOW"      // µs: the clock every child reads
	childStart    = "FLOODGATE_CHILD_START"    // unix ns: when all children start
	childAttempts = "FLOODGATE_CHILD_ATTEMPTS" // per goroutine
)

const (
	childProcs      = 4
	childGoroutines = 64
	childPerG       = 8 // 4 × 64 × 8 = 2,048 attempts at a quota of 1,000
	hammerQuota     = 1000
	childPhase      = 700 * time.Millisecond // per algorithm; all children start each phase together
)

var allAlgorithms = floodgate.Algorithms()

// TestOverAdmission: 4 processes × 64 goroutines take from one key with a
// quota of 1,000 per minute; exactly 1,000 are admitted, for every
// algorithm, on a standalone server and on the Cluster. All processes read
// one fixed test clock, so refill cannot blur the count: any excess is a
// race.
func TestOverAdmission(t *testing.T) {
	targets := []struct {
		name  string
		addrs string
		rdb   func(testing.TB) redis.UniversalClient
	}{
		{"Standalone", "FLOODGATE_TEST_REDIS", func(t testing.TB) redis.UniversalClient { return standaloneClient(t) }},
		{"Cluster", "FLOODGATE_TEST_REDIS_CLUSTER", func(t testing.TB) redis.UniversalClient { return clusterClient(t) }},
	}
	for _, target := range targets {
		t.Run(target.name, func(t *testing.T) {
			addrs := testkit.Env(t, target.addrs)
			rdb := target.rdb(t)
			// One set of children runs every algorithm, each in its own
			// phase, so that process start-up is paid once.
			prefix := newPrefix(t, rdb)
			now := time.Now()
			start := now.Add(time.Second)
			var wg sync.WaitGroup
			var mu sync.Mutex
			total := map[string]int64{}
			for i := range childProcs {
				wg.Go(func() {
					cmd := exec.Command(os.Args[0], "-test.run=^TestOverAdmissionChild$", "-test.count=1")
					cmd.Env = append(os.Environ(),
						childEnv+"=1", childAddrs+"="+addrs, childPrefix+"="+prefix,
						childNow+"="+strconv.FormatInt(now.UnixMicro(), 10),
						childStart+"="+strconv.FormatInt(start.UnixNano(), 10),
						childAttempts+"="+strconv.Itoa(childPerG))
					var out bytes.Buffer
					cmd.Stdout, cmd.Stderr = &out, &out
					if err := cmd.Run(); err != nil {
						t.Errorf("child %d: %v\n%s", i, err, out.String())
						return
					}
					ms := admittedLine.FindAllSubmatch(out.Bytes(), -1)
					if len(ms) != len(allAlgorithms) {
						t.Errorf("child %d printed %d counts, want %d:\n%s", i, len(ms), len(allAlgorithms), out.String())
					}
					mu.Lock()
					defer mu.Unlock()
					for _, m := range ms {
						n, _ := strconv.ParseInt(string(m[2]), 10, 64)
						total[string(m[1])] += n
					}
				})
			}
			wg.Wait()
			for _, a := range allAlgorithms {
				if got := total[a.String()]; got != hammerQuota {
					t.Errorf("%s: %d processes × %d goroutines × %d attempts admitted %d, want exactly %d",
						a, childProcs, childGoroutines, childPerG, got, hammerQuota)
				}
			}
		})
	}
}

var admittedLine = regexp.MustCompile(`(?m)^admitted ([a-z-]+)=(\d+)$`)

// TestOverAdmissionChild is one process of TestOverAdmission; run directly,
// it does nothing.
func TestOverAdmissionChild(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		return
	}
	addrs := strings.Split(os.Getenv(childAddrs), ",")
	var rdb redis.UniversalClient
	if len(addrs) > 1 {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: addrs[0]})
	}
	defer rdb.Close()
	nowUS, _ := strconv.ParseInt(os.Getenv(childNow), 10, 64)
	startNS, _ := strconv.ParseInt(os.Getenv(childStart), 10, 64)
	attempts, _ := strconv.Atoi(os.Getenv(childAttempts))
	fixed := time.UnixMicro(nowUS)
	st, err := New(rdb, WithPrefix(os.Getenv(childPrefix)), WithClock(func() time.Time { return fixed }), WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Ping(context.Background()).Err(); err != nil { // connect before the start line
		t.Fatal(err)
	}
	for k, alg := range allAlgorithms {
		policies := []floodgate.Policy{{Name: "hammer", Algorithm: alg, Quota: hammerQuota, Window: time.Minute}}
		time.Sleep(time.Until(time.Unix(0, startNS).Add(time.Duration(k) * childPhase)))
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for range childGoroutines {
			wg.Go(func() {
				res := make([]floodgate.Result, 1)
				for range attempts {
					if err := st.Take(context.Background(), "hot", one, policies, res); err != nil {
						t.Error(err)
						return
					}
					if res[0].Allowed {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		fmt.Printf("admitted %s=%d\n", alg, admitted.Load())
	}
}
