// Command reshard checks that decisions stay exact on a Redis Cluster while
// its slots migrate: it spends keys' quotas from many goroutines, runs a
// shell command meanwhile (one that moves slots, e.g. scripts/cluster.sh
// reshard), and when both are done compares, key by key, what the clients
// were told was admitted with what Redis counted as spent. Every decision
// reads one fixed clock, so no quota refills: each key admits exactly its
// quota, and a decision lost (spent in Redis, reported as failed or denied)
// or doubled (reported twice, or run twice after a redirect) shows as a
// mismatch. It also prints the MOVED, ASK and TRYAGAIN answers the masters
// gave, so a run shows the redirects it went through. Exit status 1 on any
// mismatch or failed decision.
//
//	go run ./cmd/reshard -redis 127.0.0.1:7700,127.0.0.1:7701,127.0.0.1:7702 \
//	    -during 'scripts/cluster.sh reshard 7700 7701 2000 && scripts/cluster.sh reshard 7701 7700 2000'
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/bench/internal/redisload"
	"github.com/floodgate/floodgate/redisstore"
)

func main() {
	addrs := flag.String("redis", "", "Cluster seed addresses, comma-separated")
	during := flag.String("during", "", "shell command run while the load runs (the load stops when it ends)")
	keys := flag.Int("keys", 20000, "partition keys")
	quota := flag.Int64("quota", 40, "quota per key (per hour, on a clock that stands still)")
	conc := flag.Int("c", 64, "goroutines deciding at once")
	minDur := flag.Duration("min", 5*time.Second, "shortest load")
	flag.Parse()
	if *addrs == "" {
		log.Fatal("reshard: give -redis")
	}
	c := redisload.Dial(strings.Split(*addrs, ","))
	defer c.Close()
	lim, policies := limiter(c, *quota)
	names := make([]string, *keys)
	for i := range names {
		names[i] = fmt.Sprintf("user:%d", i)
	}
	take := func(ctx context.Context, key string) (bool, error) {
		d, err := lim.Take(ctx, key, 1)
		return d.Allowed, err
	}
	ctx := context.Background()
	before, err := redisload.Masters(ctx, c.UniversalClient)
	if err != nil {
		log.Fatal(err)
	}
	stop := make(chan struct{})
	cmdErr := make(chan error, 1)
	go func() { cmdErr <- runDuring(*during, *minDur); close(stop) }()
	t := redisload.Load{Concurrency: *conc, Duration: 24 * time.Hour, Keys: names, Stop: stop}.Run(take)
	if err := <-cmdErr; err != nil {
		log.Fatalf("reshard: -during command: %v", err)
	}
	after, err := redisload.Masters(ctx, c.UniversalClient)
	if err != nil {
		log.Fatal(err)
	}
	bad := check(ctx, lim, names, t, *quota)
	redirects(before, after)
	fmt.Printf("policies: %v\n%d decisions in %v (%.0f/s), %d admitted, %d failed; %d keys whose admissions differ from Redis' count\n",
		policies, t.Decisions, t.Elapsed.Round(time.Millisecond), float64(t.Decisions)/t.Elapsed.Seconds(), t.Admitted, t.Errors, bad)
	if t.Errors > 0 {
		fmt.Println("first failure:", t.FirstErr)
	}
	if bad > 0 || t.Errors > 0 {
		os.Exit(1)
	}
}

// limiter decides two policies per request, so each decision writes two
// keys of one slot: a fixed window of quota per hour, which binds, and a
// GCRA of twice that.
func limiter(c *redisload.Client, quota int64) (*floodgate.Limiter, []floodgate.Policy) {
	clock := time.Now()
	st, err := redisstore.New(c.UniversalClient, redisstore.WithPrefix(fmt.Sprintf("reshard:%d:", clock.UnixNano())),
		redisstore.WithTimeout(5*time.Second), redisstore.WithClock(func() time.Time { return clock }))
	if err != nil {
		log.Fatal(err)
	}
	policies := []floodgate.Policy{
		{Name: "hour", Algorithm: floodgate.FixedWindow, Quota: quota, Window: time.Hour},
		{Name: "gcra", Algorithm: floodgate.GCRA, Quota: 2 * quota, Window: time.Hour, Burst: 2 * quota},
	}
	lim, err := floodgate.NewLimiter(st, policies)
	if err != nil {
		log.Fatal(err)
	}
	return lim, policies
}

// runDuring runs cmd through sh, and lasts at least min.
func runDuring(cmd string, min time.Duration) error {
	start := time.Now()
	defer func() { time.Sleep(min - time.Since(start)) }()
	if cmd == "" {
		return nil
	}
	c := exec.Command("sh", "-c", cmd)
	c.Stdout, c.Stderr = os.Stderr, os.Stderr
	fmt.Fprintf(os.Stderr, "running: %s\n", cmd)
	err := c.Run()
	fmt.Fprintf(os.Stderr, "done after %v\n", time.Since(start).Round(time.Millisecond))
	return err
}

// check peeks at every key (cost 0) and counts those whose spent quota in
// Redis differs from the admissions the clients saw.
func check(ctx context.Context, lim *floodgate.Limiter, names []string, t redisload.Tally, quota int64) int {
	bad, full := 0, 0
	for i, k := range names {
		d, err := lim.Take(ctx, k, 0)
		if err != nil {
			log.Fatalf("reshard: peek %s: %v", k, err)
		}
		spent := quota - d.Results[0].Remaining
		if spent != t.PerKey[i] {
			if bad < 10 {
				fmt.Printf("key %s: clients saw %d admitted, Redis counts %d spent\n", k, t.PerKey[i], spent)
			}
			bad++
		}
		if spent == quota {
			full++
		}
	}
	fmt.Printf("%d of %d keys spent their whole quota of %d\n", full, len(names), quota)
	return bad
}

// redirects prints the redirect and retry answers the masters gave during
// the run, summed over the masters.
func redirects(before, after []redisload.Node) {
	sum := map[string]int64{}
	for _, a := range after {
		for _, b := range before {
			if b.Addr == a.Addr {
				for k, v := range a.Sub(b).Errors {
					sum[k] += v
				}
			}
		}
	}
	fmt.Printf("error answers during the run (INFO errorstats): MOVED %d, ASK %d, TRYAGAIN %d\n", sum["MOVED"], sum["ASK"], sum["TRYAGAIN"])
}
