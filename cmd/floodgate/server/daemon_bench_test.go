package server_test

// The daemon's overhead over HTTP on loopback (docs/BENCHMARKS.md,
// "Daemon"). BenchmarkDaemonGateway compares a plain
// httputil.ReverseProxy with Floodgate's gateway (memory store, one rule
// keyed by client IP whose quota is never reached) in front of the same
// upstream, through the same client; BenchmarkDaemonCheck times POST
// /v1/check on the memory store and, with FLOODGATE_TEST_REDIS, on Redis.
//
//	cd cmd/floodgate && go test -run '^$' -bench '^BenchmarkDaemon' -benchtime 3s -count 3 ./server
//
// The wrk figures (separate processes, 64 connections) come from
// scripts/bench-daemon.sh, which also runs this file's helper processes:
// TestHelperUpstream, TestHelperBareCheck and TestHelperPlainProxy serve
// when their variables are set and skip otherwise.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/cmd/floodgate/config"
	"github.com/floodgate/floodgate/cmd/floodgate/server"
)

const daemonConcurrency = 64

// upstreamHandler is the app behind both proxies: a small JSON answer.
var upstreamHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"ok":true}`)
})

// bareCheckHandler answers a POST /v1/check as the daemon answers the
// benchmark's check, body read, the same fields and an answer of the same
// length, without deciding anything: the HTTP exchange's own cost, the
// floor under the decision API's CPU per check (scripts/bench-daemon.sh,
// "check-floor").
var bareCheckHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Ratelimit", `"roomy";r=999999999;t=1`)
	h.Set("Ratelimit-Policy", `"roomy";q=1000000000;w=1`)
	h.Set("X-Ratelimit-Limit", "1000000000")
	h.Set("X-Ratelimit-Remaining", "999999999")
	h.Set("X-Ratelimit-Reset", "1796167231")
	io.WriteString(w, `{"allowed":true,"verdict":"allowed","key":"user-42","policy":"roomy","limit":1000000000,`+
		`"remaining":999999999,"reset":1,"units_left":999999999,"retry_after":0,"degraded":false,"shadow":false,`+
		`"results":[{"policy":"roomy","allowed":true,"limit":1000000000,"window":1,"unit":"requests",`+
		`"remaining":999999999,"reset":1,"units_left":999999999,"retry_after":0}]}`)
})

func listen(tb testing.TB, h http.Handler) (string, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	return ln.Addr().String(), func() { srv.Close() }
}

func newPlainProxy(upstream string) http.Handler {
	u, _ := url.Parse("http://" + upstream)
	p := httputil.NewSingleHostReverseProxy(u)
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 1024, 512
	p.Transport = t
	return p
}

func startDaemon(tb testing.TB, yaml string) *server.Server {
	cfg, err := config.Parse("bench.yaml", []byte(yaml))
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := server.New(cfg, server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		tb.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return srv
}

func gatewayConfig(upstream, listen string) string {
	return fmt.Sprintf(`
gateway: {listen: %q, upstream: "http://%s"}
admin: {listen: "off"}
log: {level: error}
policies:
  roomy: {algorithm: gcra, quota: 1000000000, window: 1s}
rules:
  - {name: all, match: "/", key: "{ip}", policies: [roomy]}
`, listen, upstream)
}

func benchClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: daemonConcurrency, MaxIdleConnsPerHost: daemonConcurrency, DisableCompression: true}}
}

// drive sends requests from daemonConcurrency goroutines until b.N are
// done, failing on any status but want.
func drive(b *testing.B, newReq func() *http.Request, want int) {
	c := benchClient()
	defer c.CloseIdleConnections()
	var bad atomic.Int64
	b.SetParallelism((daemonConcurrency + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.Do(newReq())
			if err != nil {
				bad.Add(1)
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				bad.Add(1)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	if n := bad.Load(); n > 0 {
		b.Fatalf("%d requests failed or got another status than %d", n, want)
	}
}

func BenchmarkDaemonGateway(b *testing.B) {
	up, stop := listen(b, upstreamHandler)
	defer stop()
	b.Run("plain-reverseproxy", func(b *testing.B) {
		addr, stop := listen(b, newPlainProxy(up))
		defer stop()
		drive(b, func() *http.Request { r, _ := http.NewRequest("GET", "http://"+addr+"/api/items", nil); return r }, 200)
	})
	b.Run("floodgate-memory", func(b *testing.B) {
		srv := startDaemon(b, gatewayConfig(up, "127.0.0.1:0"))
		addr := srv.Addr(server.FaceGateway)
		drive(b, func() *http.Request { r, _ := http.NewRequest("GET", "http://"+addr+"/api/items", nil); return r }, 200)
	})
}

func checkConfig(store string) string {
	return fmt.Sprintf(`
api: {listen: "127.0.0.1:0"}
admin: {listen: "off"}
log: {level: error}
store: %s
policies:
  roomy: {algorithm: gcra, quota: 1000000000, window: 1s}
rules:
  - {name: api, match: "/", policies: [roomy]}
`, store)
}

func BenchmarkDaemonCheck(b *testing.B) {
	stores := map[string]string{"memory": "{type: memory}"}
	if a := os.Getenv("FLOODGATE_TEST_REDIS"); a != "" {
		stores["redis"] = fmt.Sprintf(`{type: redis, redis: {url: "redis://%s/0", prefix: "fgbench:", timeout: 500ms}}`, a)
	}
	for _, name := range []string{"memory", "redis"} {
		store, ok := stores[name]
		if !ok {
			continue // Redis figures need scripts/services-up.sh
		}
		b.Run(name, func(b *testing.B) {
			srv := startDaemon(b, checkConfig(store))
			u := "http://" + srv.Addr(server.FaceAPI) + "/v1/check"
			var n atomic.Int64
			drive(b, func() *http.Request {
				body := fmt.Sprintf(`{"key":"user-%d","rule":"api"}`, n.Add(1)%10000)
				r, _ := http.NewRequest("POST", u, strings.NewReader(body))
				return r
			}, 200)
		})
	}
}

// TestHelperUpstream serves upstreamHandler on $FG_BENCH_UPSTREAM until
// killed, for scripts/bench-daemon.sh.
func TestHelperUpstream(t *testing.T) {
	addr := os.Getenv("FG_BENCH_UPSTREAM")
	if addr == "" {
		t.Skip("helper process for scripts/bench-daemon.sh")
	}
	t.Fatal(http.ListenAndServe(addr, upstreamHandler))
}

// TestHelperBareCheck serves bareCheckHandler on $FG_BENCH_BARE until
// killed, for scripts/bench-daemon.sh.
func TestHelperBareCheck(t *testing.T) {
	addr := os.Getenv("FG_BENCH_BARE")
	if addr == "" {
		t.Skip("helper process for scripts/bench-daemon.sh")
	}
	t.Fatal(http.ListenAndServe(addr, bareCheckHandler))
}

// TestHelperPlainProxy serves a plain httputil.ReverseProxy on
// $FG_BENCH_PROXY to $FG_BENCH_PROXY_UPSTREAM until killed.
func TestHelperPlainProxy(t *testing.T) {
	addr := os.Getenv("FG_BENCH_PROXY")
	if addr == "" {
		t.Skip("helper process for scripts/bench-daemon.sh")
	}
	t.Fatal(http.ListenAndServe(addr, newPlainProxy(os.Getenv("FG_BENCH_PROXY_UPSTREAM"))))
}
