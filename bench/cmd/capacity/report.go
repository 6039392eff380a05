package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/floodgate/floodgate"
)

// report prints one row per cell, each figure the median of its rounds, then
// each master's part when there are several.
func report(o options, samples map[cell][]sample) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "target\tmasters\talgorithm\tconc\tdecisions/s\tRedis µs/decision\tdecisions/call\ttrips/decision\tclient µs/decision\tmedian latency\tshard ceiling/s\t")
	for _, a := range o.algs {
		for _, n := range o.conc {
			for t := range o.targets {
				row(w, t, a, n, samples[cell{t, a, n}])
			}
		}
	}
	w.Flush()
	fmt.Println("\nshard ceiling: decisions/s one Redis main thread serves at 100 % of a core at this batching (1e6 ÷ Redis µs/decision).")
	fmt.Println("client µs/decision: CPU of this process (Limiter, redisstore, go-redis, the load loop) per decision.")
	shards(o, samples)
}

func row(w io.Writer, t int, a floodgate.Algorithm, n int, ss []sample) {
	redisUS := med(ss, func(s sample) float64 { return s.redisUS })
	fmt.Fprintf(w, "%d\t%d\t%s\t%d\t%.0f\t%.2f\t%.1f\t%.3f\t%.2f\t%v\t%.0f\t\n", t+1, len(ss[0].shards), name(a), n,
		med(ss, func(s sample) float64 { return s.perSec }), redisUS,
		med(ss, func(s sample) float64 { return s.perCall }),
		med(ss, func(s sample) float64 { return s.trips }),
		med(ss, func(s sample) float64 { return s.clientUS }),
		time.Duration(med(ss, func(s sample) float64 { return float64(s.median) })).Round(time.Microsecond),
		1e6/redisUS)
}

func shards(o options, samples map[cell][]sample) {
	if !slices.ContainsFunc(o.targets, func(t []string) bool { return len(t) > 1 }) {
		return
	}
	fmt.Println("\nper master (medians): share of the decisions (by keys held), CPU µs per decision served, CPU seconds per second, decisions per call")
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "target\talgorithm\tconc\tmaster\tshare\tµs/decision\tbusy\tdecisions/call\t")
	for t := range o.targets {
		for _, a := range o.algs {
			for _, n := range o.conc {
				ss := samples[cell{t, a, n}]
				if len(ss[0].shards) < 2 {
					continue
				}
				for i, sh := range ss[0].shards {
					at := func(f func(shard) float64) float64 {
						return med(ss, func(s sample) float64 { return f(s.shards[i]) })
					}
					fmt.Fprintf(w, "%d\t%s\t%d\t%s\t%.3f\t%.2f\t%.2f\t%.1f\t\n", t+1, name(a), n, sh.addr,
						at(func(s shard) float64 { return s.share }), at(func(s shard) float64 { return s.cpuUS }),
						at(func(s shard) float64 { return s.busy }), at(func(s shard) float64 { return s.perCall }))
				}
			}
		}
	}
	w.Flush()
}

func med(ss []sample, f func(sample) float64) float64 {
	xs := make([]float64, len(ss))
	for i, s := range ss {
		xs[i] = f(s)
	}
	return median(xs)
}
