// Command rlqssim measures Floodgate's rate limit quota service with its
// reference client (package rlqs/rlqsclient) standing for N Envoys, for
// docs/BENCHMARKS.md and docs/RLQS.md.
//
// The default mode runs a real server and real clients over gRPC on
// loopback on a virtual clock, in 1 ms steps, with Poisson arrivals from a
// seeded generator: steady traffic at 2× the quota spread over the
// clients, and a flash crowd (0.5× the quota, plus 3× on one client for a
// quarter of the run). It prints the worst window (admitted ÷ quota), the
// false refusals (refused while the window had room, ÷ what an exact
// limiter admits) and the store calls per client per interval.
//
// With -redis, it instead runs in real time against Redis: every client
// decides for one hot bucket in its own goroutine, as fast as it can or at
// -rate decisions a second in all, and reports every interval from
// another; it prints decisions/s in aggregate, the worst window, Redis
// calls/s and how late the reports went out.
//
//	go run ./cmd/rlqssim
//	go run ./cmd/rlqssim -redis 127.0.0.1:6379 -clients 64 -duration 10s -rate 2000000
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate/floodgate/rlqs"
)

func main() {
	clients := flag.String("clients", "4,16,64", "client counts")
	quota := flag.Int64("quota", 100000, "quota per 1 s window")
	dur := flag.Duration("duration", 20*time.Second, "length of each run (simulated, or real with -redis)")
	interval := flag.Duration("interval", rlqs.DefaultInterval, "report interval")
	seed := flag.Uint64("seed", 1, "seed of the traffic")
	redisAddr := flag.String("redis", "", "run in real time against this Redis instead")
	slack := flag.Float64("slack", 0, "the server's Slack, in intervals")
	rate := flag.Float64("rate", 0, "with -redis: decisions a second offered in all (0: as fast as the clients can)")
	flag.Parse()
	ns, err := ints(*clients)
	if err != nil || *quota < 1 || *interval < time.Millisecond || *dur < time.Second {
		fmt.Fprintln(os.Stderr, "rlqssim: bad flags")
		os.Exit(2)
	}
	if *redisAddr != "" {
		fmt.Printf("rlqssim -redis %s -clients %s -quota %d -duration %v -interval %v -slack %g -rate %g\n\n", *redisAddr, *clients, *quota, *dur, *interval, *slack, *rate)
		fmt.Println("| clients | decisions/s | admitted/s | worst window | Redis calls/s | report late, p99 | report late, max |")
		fmt.Println("|---|---|---|---|---|---|---|")
		for _, n := range ns {
			r, err := Hot(*redisAddr, n, *quota, *dur, *interval, *slack, *rate)
			if err != nil {
				fmt.Fprintln(os.Stderr, "rlqssim:", err)
				os.Exit(1)
			}
			fmt.Printf("| %d | %.0f | %.0f | %.4f | %.0f | %v | %v |\n", n, r.DecisionsPerSec, r.AdmittedPerSec, r.Worst, r.CallsPerSec, r.LateP99.Round(time.Millisecond/10), r.LateMax.Round(time.Millisecond/10))
		}
		return
	}
	fmt.Printf("rlqssim -clients %s -quota %d -duration %v -interval %v -slack %g -seed %d\n\n", *clients, *quota, *dur, *interval, *slack, *seed)
	fmt.Println("| load | clients | worst window | false refusals | store calls per client per interval |")
	fmt.Println("|---|---|---|---|---|")
	for _, flash := range []bool{false, true} {
		for _, n := range ns {
			r, err := Simulate(Config{Clients: n, Quota: *quota, Duration: *dur, Interval: *interval, Slack: *slack, Flash: flash, Seed: *seed})
			if err != nil {
				fmt.Fprintln(os.Stderr, "rlqssim:", err)
				os.Exit(1)
			}
			load := "steady, 2× the quota"
			if flash {
				load = "flash crowd on one client"
			}
			fmt.Printf("| %s | %d | %.4f | %.2f %% | %.2f |\n", load, n, r.Worst, 100*r.FalseRefusals, r.CallsPerClientInterval)
		}
	}
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}
