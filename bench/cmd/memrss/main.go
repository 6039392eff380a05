// Command memrss measures the memory store's resident memory (VmRSS,
// Linux) with a million keys of one length, one GCRA policy each, in a
// fresh process, as docs/CONFIG.md's "Memory per key" states:
//
//	go run ./cmd/memrss -keys 1000000 -len 16
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
	"github.com/floodgate/floodgate/bench/internal/procrss"
	"github.com/floodgate/floodgate/memorystore"
)

func main() {
	keys := flag.Int("keys", 1_000_000, "distinct keys")
	length := flag.Int("len", 16, "key length in bytes")
	flag.Parse()
	runtime.GC()
	before := rss()
	st, err := memorystore.New(memorystore.WithMaxKeys(*keys))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	ps := []floodgate.Policy{{Name: "p", Algorithm: floodgate.GCRA, Quota: 100, Window: time.Hour}}
	res := make([]floodgate.Result, 1)
	pad := strings.Repeat("k", *length)
	peak := before
	for i := range *keys {
		id := strconv.Itoa(i)
		key := pad[:max(0, *length-len(id))] + id
		if err := st.Take(context.Background(), key, floodgate.Cost{Requests: 1}, ps, res); err != nil {
			log.Fatal(err)
		}
		if i%100_000 == 0 {
			peak = max(peak, rss())
		}
	}
	peak = max(peak, rss())
	runtime.GC()
	after := rss()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("%d keys of %d B: RSS %.0f MiB before, peak %.0f MiB, %.0f MiB after a GC; live heap %.0f MiB; Len %d; %.0f B RSS per key\n",
		*keys, *length, mib(before), mib(peak), mib(after), mib(int64(ms.HeapAlloc)), st.Len(), float64(peak-before)/float64(*keys))
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// rss is this process's resident set in bytes.
func rss() int64 {
	n, err := procrss.Of(os.Getpid())
	if err != nil {
		log.Fatal(err)
	}
	return n
}
