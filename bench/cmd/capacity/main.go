// Command capacity measures, on the machine it runs on, the per-decision
// inputs of the capacity model in docs/SCALING.md: for each algorithm and
// concurrency, the Redis CPU each decision costs, how many decisions one
// script call carries, the round trips per decision, the CPU the deciding
// process (Limiter, redisstore, go-redis) spends per decision, and the
// latency of one decision. With several addresses it drives a Redis
// Cluster and also reports each master's share and CPU. Several targets
// (separated by ';') are measured in turn within each round, so that a
// 3-master and a 6-master Cluster meet the same moments of a noisy machine.
//
// Every decision goes through floodgate.Limiter over redisstore, exactly as
// an application or the daemon makes it, so the figures follow the code.
// The machine is shared: each figure is the median of -rounds rounds, the
// algorithms interleaved within a round.
//
//	go run ./cmd/capacity -redis 127.0.0.1:7200
//	go run ./cmd/capacity -redis '127.0.0.1:7700,127.0.0.1:7701,127.0.0.1:7702;127.0.0.1:7720,…' -alg gcra -c 64
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/bench/internal/redisload"
)

type options struct {
	targets  [][]string // one address list per target
	algs     []floodgate.Algorithm
	conc     []int
	duration time.Duration
	rounds   int
	keys     int
	quota    int64
	batch    int
	inflight int
	settle   bool
	twice    bool
}

func main() {
	o, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "capacity:", err)
		os.Exit(2)
	}
	clients := make([]*redisload.Client, len(o.targets))
	for i, addrs := range o.targets {
		clients[i] = redisload.Dial(addrs)
		defer clients[i].Close()
		if err := clients[i].Ping(context.Background()).Err(); err != nil {
			log.Fatalf("capacity: redis at %v: %v", addrs, err)
		}
	}
	header(o)
	samples := map[cell][]sample{}
	for r := 1; r <= o.rounds; r++ {
		fmt.Fprintf(os.Stderr, "round %d of %d\n", r, o.rounds)
		for _, a := range o.algs {
			for _, n := range o.conc {
				for t, c := range clients {
					s, err := measure(c, a, n, o)
					if err != nil {
						log.Fatalf("capacity: %s at concurrency %d on %v: %v", name(a), n, o.targets[t], err)
					}
					samples[cell{t, a, n}] = append(samples[cell{t, a, n}], s)
				}
			}
		}
	}
	report(o, samples)
}

func parseFlags() (options, error) {
	addrs := flag.String("redis", os.Getenv("FLOODGATE_TEST_REDIS"), "Redis address, or several comma-separated for a Cluster; several targets separated by ';'")
	var every []string
	for _, a := range floodgate.Algorithms() {
		every = append(every, a.String())
	}
	algs := flag.String("alg", strings.Join(every, ","), "algorithms, comma-separated")
	conc := flag.String("c", "1,64", "concurrencies (goroutines deciding at once), comma-separated")
	var o options
	flag.DurationVar(&o.duration, "d", 2*time.Second, "duration of one measurement")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds; each figure is the median over them")
	flag.IntVar(&o.keys, "keys", 10000, "partition keys the load walks over")
	flag.Int64Var(&o.quota, "quota", 100, "the policy's quota per second and key (1 key and a large quota: a hot key that is admitted)")
	flag.IntVar(&o.batch, "batch", 128, "most decisions per script call (redisstore.WithBatching); 1 sends each alone")
	flag.IntVar(&o.inflight, "inflight", 4, "most script calls in flight at once (redisstore.WithBatching)")
	flag.BoolVar(&o.settle, "settle", false, "each decision is a Reserve of 2 settled at 1 or 3 in turn (a refund, then a post-charge): two script calls")
	flag.BoolVar(&o.twice, "twice", false, "each decision is two Takes of 1 in turn: the cheapest two script calls, the floor of -settle")
	flag.Parse()
	if *addrs == "" {
		return o, fmt.Errorf("no Redis: give -redis or set FLOODGATE_TEST_REDIS")
	}
	for _, t := range strings.Split(*addrs, ";") {
		o.targets = append(o.targets, strings.Split(t, ","))
	}
	for _, s := range strings.Split(*algs, ",") {
		a, err := floodgate.ParseAlgorithm(strings.TrimSpace(s))
		if strings.TrimSpace(s) == "ratelimit" {
			a, err = ratelimit, nil
		}
		if err != nil {
			return o, err
		}
		o.algs = append(o.algs, a)
	}
	for _, s := range strings.Split(*conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return o, fmt.Errorf("bad concurrency %q", s)
		}
		o.conc = append(o.conc, n)
	}
	if o.rounds < 1 || o.keys < 1 || o.quota < 1 || o.duration <= 0 || o.batch < 1 {
		return o, fmt.Errorf("-rounds, -keys, -quota, -batch and -d must be positive")
	}
	return o, nil
}

func header(o options) {
	load, _ := os.ReadFile("/proc/loadavg")
	for i, t := range o.targets {
		fmt.Printf("target %d: %s\n", i+1, strings.Join(t, ","))
	}
	fmt.Printf("%d keys; one policy of %d/s per key (burst 100 for the bucket algorithms)\n", o.keys, o.quota)
	fmt.Printf("%s %s/%s, GOMAXPROCS %d, %d CPUs; load average at start %s",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.NumCPU(), load)
	fmt.Printf("medians of %d rounds of %v each, algorithms interleaved\n\n", o.rounds, o.duration)
}
