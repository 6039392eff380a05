package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// loadOptions configure one load run.
type loadOptions struct {
	url         string
	method      string
	body        string
	headers     []string
	duration    time.Duration
	connections int
	rate        int
	varyHeader  string
	keys        int
	check       bool
	progress    io.Writer // nil: no progress lines
}

// loadResult is what a run saw.
type loadResult struct {
	elapsed       time.Duration
	statuses      map[int]int64
	noRetryAfter  int64 // 429s without Retry-After
	transportErrs int64
	firstErr      string
	latencies     []time.Duration
	requests      int64
	withRateLimit int64 // responses carrying RateLimit or X-RateLimit-Limit
}

func newLoadtest() *cobra.Command {
	o := loadOptions{}
	c := &cobra.Command{
		Use:   "loadtest URL",
		Short: "Drive a URL with concurrent requests; show progress and a summary of statuses, Retry-After and latency",
		Long: `Drive a URL for a fixed time with concurrent connections, printing progress
every second and then a summary table: responses by status, 429s lacking
Retry-After, responses carrying rate-limit fields, transport errors and
latency percentiles.

  floodgate loadtest http://127.0.0.1:8080/api/items -d 10s -c 64 \
      --vary-header X-API-Key --keys 10

With --check the exit status is 1 when any response was a 5xx, any
request failed in transport, or any 429 lacked Retry-After.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.url = args[0]
			o.progress = cmd.ErrOrStderr()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			res, err := runLoad(ctx, o)
			if err != nil {
				return err
			}
			printSummary(cmd.OutOrStdout(), res)
			if o.check && (res.transportErrs > 0 || res.noRetryAfter > 0 || res.count5xx() > 0) {
				return exitError(1)
			}
			return nil
		},
	}
	f := c.Flags()
	f.DurationVarP(&o.duration, "duration", "d", 10*time.Second, "how long to send")
	f.IntVarP(&o.connections, "connections", "c", 32, "concurrent connections")
	f.IntVarP(&o.rate, "rate", "r", 0, "requests per second in total; 0 sends as fast as answers come")
	f.StringVarP(&o.method, "method", "X", "GET", "request method")
	f.StringVar(&o.body, "body", "", "request body")
	f.StringArrayVarP(&o.headers, "header", "H", nil, `request header "Name: value" (repeatable)`)
	f.StringVar(&o.varyHeader, "vary-header", "", "send this header with one of --keys values (key-0, key-1, ...) per request, round robin")
	f.IntVar(&o.keys, "keys", 1, "how many distinct values --vary-header cycles through")
	f.BoolVar(&o.check, "check", false, "exit 1 on any 5xx, transport error or 429 without Retry-After")
	return c
}

func (r *loadResult) count5xx() int64 {
	var n int64
	for s, c := range r.statuses {
		if s >= 500 {
			n += c
		}
	}
	return n
}

func runLoad(ctx context.Context, o loadOptions) (*loadResult, error) {
	if o.connections < 1 || o.duration <= 0 || o.keys < 1 {
		return nil, fmt.Errorf("need --connections ≥ 1, --duration > 0 and --keys ≥ 1")
	}
	hdr := http.Header{}
	for _, h := range o.headers {
		k, v, ok := strings.Cut(h, ":")
		if !ok {
			return nil, fmt.Errorf("header %q: want \"Name: value\"", h)
		}
		hdr.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	if _, err := http.NewRequest(o.method, o.url, nil); err != nil {
		return nil, err
	}
	tr := &http.Transport{MaxIdleConns: o.connections, MaxIdleConnsPerHost: o.connections, MaxConnsPerHost: o.connections, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()

	var tokens <-chan time.Time
	if o.rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(o.rate))
		defer t.Stop()
		tokens = t.C
	}
	var (
		mu                      sync.Mutex
		res                     = &loadResult{statuses: map[int]int64{}}
		sent, done              atomic.Int64
		n429, n2xx, nOther, nEr atomic.Int64
	)
	keys := make([]string, o.keys)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < o.connections; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses := map[int]int64{}
			var lat []time.Duration
			var noRA, errs, withRL int64
			var firstErr string
			for ctx.Err() == nil {
				if tokens != nil {
					select {
					case <-ctx.Done():
						continue
					case <-tokens:
					}
				}
				i := sent.Add(1)
				var body io.Reader
				if o.body != "" {
					body = strings.NewReader(o.body)
				}
				req, _ := http.NewRequestWithContext(ctx, o.method, o.url, body)
				for k, v := range hdr {
					req.Header[k] = v
				}
				if o.varyHeader != "" {
					req.Header.Set(o.varyHeader, keys[int(i)%len(keys)])
				}
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() != nil {
						break // the run ended mid-request: not the server's fault
					}
					errs++
					nEr.Add(1)
					if firstErr == "" {
						firstErr = err.Error()
					}
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat = append(lat, time.Since(t0))
				statuses[resp.StatusCode]++
				if resp.Header.Get("Ratelimit") != "" || resp.Header.Get("X-Ratelimit-Limit") != "" {
					withRL++
				}
				switch {
				case resp.StatusCode == http.StatusTooManyRequests:
					n429.Add(1)
					if resp.Header.Get("Retry-After") == "" {
						noRA++
					}
				case resp.StatusCode < 300:
					n2xx.Add(1)
				default:
					nOther.Add(1)
				}
				done.Add(1)
			}
			mu.Lock()
			defer mu.Unlock()
			for s, c := range statuses {
				res.statuses[s] += c
			}
			res.latencies = append(res.latencies, lat...)
			res.noRetryAfter += noRA
			res.transportErrs += errs
			res.withRateLimit += withRL
			if res.firstErr == "" {
				res.firstErr = firstErr
			}
		}()
	}
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		if o.progress == nil {
			return
		}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		var last int64
		for {
			select {
			case <-stopProgress:
				return
			case <-tick.C:
				d := done.Load()
				fmt.Fprintf(o.progress, "%5.0fs  %9d responses  %8d/s   2xx %d  429 %d  other %d  errors %d\n",
					time.Since(start).Seconds(), d, d-last, n2xx.Load(), n429.Load(), nOther.Load(), nEr.Load())
				last = d
			}
		}
	}()
	wg.Wait()
	close(stopProgress)
	<-progressDone
	res.elapsed = time.Since(start)
	for _, c := range res.statuses {
		res.requests += c
	}
	slices.Sort(res.latencies)
	return res, nil
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func printSummary(w io.Writer, r *loadResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "status\tresponses\tshare\t")
	codes := make([]int, 0, len(r.statuses))
	for s := range r.statuses {
		codes = append(codes, s)
	}
	slices.Sort(codes)
	for _, s := range codes {
		fmt.Fprintf(tw, "%d\t%d\t%.1f%%\t\n", s, r.statuses[s], 100*float64(r.statuses[s])/float64(max(1, r.requests)))
	}
	tw.Flush()
	secs := r.elapsed.Seconds()
	row := func(label, format string, args ...any) {
		fmt.Fprintf(w, "%-24s"+format+"\n", append([]any{label}, args...)...)
	}
	fmt.Fprintln(w)
	row("responses", "%d in %.1fs (%.0f/s)", r.requests, secs, float64(r.requests)/secs)
	row("with rate-limit fields", "%d", r.withRateLimit)
	row("429 without Retry-After", "%d", r.noRetryAfter)
	row("5xx", "%d", r.count5xx())
	first := ""
	if r.firstErr != "" {
		first = " (first: " + r.firstErr + ")"
	}
	row("transport errors", "%d%s", r.transportErrs, first)
	row("latency", "p50 %v  p90 %v  p99 %v  max %v",
		percentile(r.latencies, .5).Round(time.Microsecond), percentile(r.latencies, .9).Round(time.Microsecond),
		percentile(r.latencies, .99).Round(time.Microsecond), percentile(r.latencies, 1).Round(time.Microsecond))
}
