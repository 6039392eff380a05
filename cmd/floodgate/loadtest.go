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
	run, err := newLoadRun(o)
	if err != nil {
		return nil, err
	}
	defer run.tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	if o.rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(o.rate))
		defer t.Stop()
		run.tokens = t.C
	}
	run.start = time.Now()
	var wg sync.WaitGroup
	for w := 0; w < o.connections; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run.merge(run.worker(ctx))
		}()
	}
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		run.report(stopProgress)
	}()
	wg.Wait()
	close(stopProgress)
	<-progressDone
	res := run.res
	res.elapsed = time.Since(run.start)
	for _, c := range res.statuses {
		res.requests += c
	}
	slices.Sort(res.latencies)
	return res, nil
}

// loadRun is one load test: its requests' shape, and what the workers
// have counted so far.
type loadRun struct {
	o      loadOptions
	hdr    http.Header
	keys   []string // values of o.varyHeader, one per request in turn
	tr     *http.Transport
	client *http.Client
	tokens <-chan time.Time // nil: no rate limit
	start  time.Time

	sent, done              atomic.Int64 // for the progress lines
	n429, n2xx, nOther, nEr atomic.Int64

	mu  sync.Mutex
	res *loadResult
}

func newLoadRun(o loadOptions) (*loadRun, error) {
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
	keys := make([]string, o.keys)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	return &loadRun{o: o, hdr: hdr, keys: keys, tr: tr, client: &http.Client{Transport: tr, Timeout: 10 * time.Second},
		res: &loadResult{statuses: map[int]int64{}}}, nil
}

// workerStats is what one worker counted, merged into the result at its
// end so the workers share nothing while they run.
type workerStats struct {
	statuses           map[int]int64
	lat                []time.Duration
	noRA, errs, withRL int64
	firstErr           string
}

// worker sends requests one after another until ctx ends.
func (r *loadRun) worker(ctx context.Context) *workerStats {
	ws := &workerStats{statuses: map[int]int64{}}
	for ctx.Err() == nil {
		if r.tokens != nil {
			select {
			case <-ctx.Done():
				continue
			case <-r.tokens:
			}
		}
		resp, lat, err := r.send(ctx, r.sent.Add(1))
		if err != nil {
			if ctx.Err() != nil {
				break // the run ended mid-request: not the server's fault
			}
			ws.errs++
			r.nEr.Add(1)
			if ws.firstErr == "" {
				ws.firstErr = err.Error()
			}
			continue
		}
		r.count(ws, resp, lat)
	}
	return ws
}

// send makes request i and reads its answer whole.
func (r *loadRun) send(ctx context.Context, i int64) (*http.Response, time.Duration, error) {
	var body io.Reader
	if r.o.body != "" {
		body = strings.NewReader(r.o.body)
	}
	req, _ := http.NewRequestWithContext(ctx, r.o.method, r.o.url, body)
	for k, v := range r.hdr {
		req.Header[k] = v
	}
	if r.o.varyHeader != "" {
		req.Header.Set(r.o.varyHeader, r.keys[int(i)%len(r.keys)])
	}
	t0 := time.Now()
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, time.Since(t0), nil
}

func (r *loadRun) count(ws *workerStats, resp *http.Response, lat time.Duration) {
	ws.lat = append(ws.lat, lat)
	ws.statuses[resp.StatusCode]++
	if resp.Header.Get("Ratelimit") != "" || resp.Header.Get("X-Ratelimit-Limit") != "" {
		ws.withRL++
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		r.n429.Add(1)
		if resp.Header.Get("Retry-After") == "" {
			ws.noRA++
		}
	case resp.StatusCode < 300:
		r.n2xx.Add(1)
	default:
		r.nOther.Add(1)
	}
	r.done.Add(1)
}

func (r *loadRun) merge(ws *workerStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.res
	for s, c := range ws.statuses {
		res.statuses[s] += c
	}
	res.latencies = append(res.latencies, ws.lat...)
	res.noRetryAfter += ws.noRA
	res.transportErrs += ws.errs
	res.withRateLimit += ws.withRL
	if res.firstErr == "" {
		res.firstErr = ws.firstErr
	}
}

// report writes a progress line every second to o.progress until stop.
func (r *loadRun) report(stop <-chan struct{}) {
	if r.o.progress == nil {
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last int64
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			d := r.done.Load()
			fmt.Fprintf(r.o.progress, "%5.0fs  %9d responses  %8d/s   2xx %d  429 %d  other %d  errors %d\n",
				time.Since(r.start).Seconds(), d, d-last, r.n2xx.Load(), r.n429.Load(), r.nOther.Load(), r.nEr.Load())
			last = d
		}
	}
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
