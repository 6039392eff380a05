// Command regionsim is a deterministic, seeded simulation of one global
// quota shared by several regions, for docs/SCALING.md. It drives the same
// traffic (steady under and over the quota, a flash crowd in one region, a
// region going down and its clients moving to the others) through four
// designs — one global cluster, a quota split between regions and
// rebalanced every Δ, per-region counting reconciled every Δ, and the same
// with a bounded share between syncs — and prints, as Markdown tables, the
// over-admission (admitted ÷ quota per window: the worst window and the
// mean over windows whose demand exceeds the quota), the false refusals
// (refused although the window's quota had room, as a share of what an
// exact limiter admits), the messages between regions and the latency a
// decision adds, as functions of Δ and of the number of regions.
//
// Time moves in 1 ms ticks; arrivals are Poisson, drawn from a generator
// seeded per scenario and region count, so every design meets the same
// requests. The same flags print the same tables.
//
//	go run ./cmd/regionsim                 # the tables of docs/SCALING.md
//	go run ./cmd/regionsim -hop 0 -regions 4 -delta 5   # daemon replicas in one region
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
)

func main() {
	seed := flag.Uint64("seed", 1, "seed of the traffic")
	quota := flag.Int("quota", 1000, "global quota per 1 s window")
	dur := flag.Int("duration", 60, "seconds per run")
	hop := flag.Int("hop", 20, "one-way latency step between regions, ms (i, j apart: hop·(1+|i−j|))")
	r := flag.Int("r", 3, "regions of the first tables (by Δ)")
	regions := flag.String("regions", "2,3,5", "region counts of the last tables")
	deltas := flag.String("deltas", "10,50,100,250,1000", "sync intervals Δ, ms")
	delta := flag.Int("delta", 100, "Δ of the last tables, ms")
	flag.Parse()
	ds, err1 := ints(*deltas)
	rs, err2 := ints(*regions)
	if err1 != nil || err2 != nil || *r < 1 || *delta < 1 || *quota < 1 || *dur < 1 {
		fmt.Fprintln(os.Stderr, "regionsim: bad flags")
		os.Exit(2)
	}
	base := Config{Quota: *quota, Duration: *dur * 1000, HopMs: *hop}
	fmt.Printf("regionsim -seed %d -quota %d -duration %d -hop %d -r %d -regions %s -deltas %s -delta %d\n\n",
		*seed, *quota, *dur, *hop, *r, *regions, *deltas, *delta)
	for si, sc := range scenarios {
		fmt.Printf("### %s, %d regions, by Δ\n\n", sc.Name, *r)
		header("Δ ms")
		for _, d := range append([]Design{Global}, Split, Async, Bounded) {
			for _, dt := range ds {
				row(d, fmt.Sprint(dt), configure(base, sc, si, *seed, *r, dt, d))
				if d == Global {
					break // Δ means nothing to it
				}
			}
		}
		fmt.Println()
	}
	for si, sc := range scenarios {
		fmt.Printf("### %s, Δ = %d ms, by regions\n\n", sc.Name, *delta)
		header("regions")
		for _, d := range []Design{Global, Split, Async, Bounded} {
			for _, n := range rs {
				row(d, fmt.Sprint(n), configure(base, sc, si, *seed, n, *delta, d))
			}
		}
		fmt.Println()
	}
}

// configure fills in one run; the traffic's seed depends on the scenario
// and the region count only, so designs and Δs meet the same requests.
func configure(c Config, sc Scenario, si int, seed uint64, regions, delta int, d Design) Config {
	c.Scenario, c.Regions, c.Delta, c.Design = sc, regions, delta, d
	c.Seed = seed ^ uint64(si+1)<<32 ^ uint64(regions)<<16
	return c
}

func header(by string) {
	fmt.Printf("| design | %s | worst window | mean saturated | false refusals | messages/s | added ms/decision |\n", by)
	fmt.Println("|---|---|---|---|---|---|---|")
}

func row(d Design, by string, c Config) {
	if d == Global && by == fmt.Sprint(c.Delta) {
		by = "—" // Δ means nothing to it
	}
	r := Run(c)
	sat := "—"
	if r.MeanSaturated > 0 {
		sat = fmt.Sprintf("%.3f", r.MeanSaturated)
	}
	fmt.Printf("| %v | %s | %.3f | %s | %.2f %% | %.0f | %.1f |\n", d, by, r.Worst, sat, 100*r.FalseRefusals, r.MessagesPerSec, r.AddedMs)
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}
