package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
)

// wrkScript cycles an X-Key header over 10 values and counts, per thread,
// the statuses and the 429s lacking Retry-After; done() sums the threads.
const wrkScript = `
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args)
  n = 0; s200 = 0; s429 = 0; s5xx = 0; sother = 0; nora = 0; nrl = 0
end
function request()
  n = n + 1
  return wrk.format("GET", "/api/items", {["X-Key"] = "k" .. (n % 10)})
end
function response(status, headers, body)
  if status == 200 then s200 = s200 + 1
  elseif status == 429 then
    s429 = s429 + 1
    if headers["Retry-After"] == nil then nora = nora + 1 end
  elseif status >= 500 then s5xx = s5xx + 1
  else sother = sother + 1 end
  if headers["Ratelimit"] ~= nil or headers["RateLimit"] ~= nil then nrl = nrl + 1 end
end
function done(summary, latency, requests)
  local t = {0, 0, 0, 0, 0, 0}
  for _, th in ipairs(threads) do
    t[1] = t[1] + th:get("s200"); t[2] = t[2] + th:get("s429"); t[3] = t[3] + th:get("s5xx")
    t[4] = t[4] + th:get("sother"); t[5] = t[5] + th:get("nora"); t[6] = t[6] + th:get("nrl")
  end
  local e = summary.errors
  io.write(string.format("FGRESULT %d %d %d %d %d %d %d\n", t[1], t[2], t[3], t[4], t[5], t[6],
    e.connect + e.read + e.write + e.timeout))
end
`

// quota per key and keys in the load configuration; the run lasts far
// less than the window, so the allowance is exactly keys × quota.
const (
	loadQuota = 400
	loadKeys  = 10
)

func loadConfig(gw, admin string, extraRule bool) string {
	extra := ""
	if extraRule {
		extra = `  - {name: other, match: "/other/", policies: [load]}` + "\n"
	}
	return fmt.Sprintf(`
gateway: {listen: %q, upstream: demo}
admin: {listen: %q}
log: {level: error}
policies:
  load: {algorithm: sliding-window-counter, quota: %d, window: 1h}
rules:
%s  - {name: api, match: "/api/", key: "{header:X-Key}", policies: [load]}
`, gw, admin, loadQuota, extra)
}

type wrkResult struct {
	ok, limited, server, other, noRetryAfter, withRateLimit, socketErrors int
	raw                                                                   string
}

func runWrk(t *testing.T, wrk, url string, d time.Duration) wrkResult {
	t.Helper()
	script := filepath.Join(t.TempDir(), "count.lua")
	os.WriteFile(script, []byte(wrkScript), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, wrk, "-t2", "-c32", "-d"+strconv.Itoa(int(d.Seconds()))+"s", "--timeout", "5s", "-s", script, url).CombinedOutput()
	if err != nil {
		t.Fatalf("wrk: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`FGRESULT (\d+) (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("no result line in wrk output:\n%s", out)
	}
	n := make([]int, 7)
	for i := range n {
		n[i], _ = strconv.Atoi(m[i+1])
	}
	return wrkResult{n[0], n[1], n[2], n[3], n[4], n[5], n[6], string(out)}
}

func checkLoad(t *testing.T, r wrkResult) {
	t.Helper()
	t.Logf("wrk: 200=%d 429=%d 5xx=%d other=%d", r.ok, r.limited, r.server, r.other)
	allowance := loadQuota * loadKeys
	if diff := r.ok - allowance; diff*100 > allowance || -diff*100 > allowance {
		t.Errorf("200s = %d, want the allowance %d within 1%%", r.ok, allowance)
	}
	if r.limited < allowance {
		t.Errorf("only %d 429s: the load did not exceed the allowance enough to test it", r.limited)
	}
	if r.noRetryAfter != 0 {
		t.Errorf("%d 429s lacked Retry-After", r.noRetryAfter)
	}
	if r.server != 0 || r.other != 0 || r.socketErrors != 0 {
		t.Errorf("failed requests: 5xx=%d other=%d socket errors=%d\n%s", r.server, r.other, r.socketErrors, r.raw)
	}
	if r.withRateLimit != r.ok+r.limited {
		t.Errorf("%d of %d responses carried RateLimit", r.withRateLimit, r.ok+r.limited)
	}
}

// TestLoadWithWrk drives the gateway in front of the demo upstream with
// wrk (REQUIREMENTS V4): the 200s are the policies' allowance within 1%,
// every 429 carries Retry-After, and nothing fails.
func TestLoadWithWrk(t *testing.T) {
	wrk := service(t, "FLOODGATE_TEST_WRK", "wrk")
	gw, admin := freePort(t), freePort(t)
	startDaemon(t, loadConfig(gw, admin, false), gw)
	checkLoad(t, loadUntilOver(t, wrk, "http://"+gw, wrkResult{}))
}

// loadUntilOver runs wrk in 3 s bursts, adding up the answers to sum's,
// until the load has gone past the allowance by as much again: a slow or
// busy machine takes more bursts, not a different verdict. It gives up
// after a minute.
func loadUntilOver(t *testing.T, wrk, url string, sum wrkResult) wrkResult {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); sum.limited < loadQuota*loadKeys && time.Now().Before(deadline); {
		r := runWrk(t, wrk, url, 3*time.Second)
		sum.ok += r.ok
		sum.limited += r.limited
		sum.server += r.server
		sum.other += r.other
		sum.noRetryAfter += r.noRetryAfter
		sum.withRateLimit += r.withRateLimit
		sum.socketErrors += r.socketErrors
		sum.raw += r.raw
	}
	return sum
}

// TestReloadsDuringLoad reloads the configuration 10 times (SIGHUP, with a
// changed file each time) while wrk runs: no request fails, and counters
// survive every reload, so the allowance still holds.
func TestReloadsDuringLoad(t *testing.T) {
	wrk := service(t, "FLOODGATE_TEST_WRK", "wrk")
	gw, admin := freePort(t), freePort(t)
	d := startDaemon(t, loadConfig(gw, admin, false), gw, "--no-watch")
	done := make(chan wrkResult, 1)
	go func() { done <- runWrk(t, wrk, "http://"+gw, 4*time.Second) }()
	time.Sleep(500 * time.Millisecond)
	for i := 0; i < 10; i++ {
		if err := os.WriteFile(d.file, []byte(loadConfig(gw, admin, i%2 == 0)), 0o644); err != nil {
			t.Fatal(err)
		}
		d.cmd.Process.Signal(syscall.SIGHUP)
		time.Sleep(250 * time.Millisecond)
	}
	checkLoad(t, loadUntilOver(t, wrk, "http://"+gw, <-done))
	_, metrics := testkit.Do(t, "GET", "http://"+admin+"/metrics", "")
	if !strings.Contains(metrics, `floodgate_config_reloads_total{result="ok"} 10`) || !strings.Contains(metrics, `floodgate_config_reloads_total{result="error"} 0`) {
		t.Errorf("reload metrics:\n%s", grepLines(metrics, "floodgate_config_reloads_total"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestLoadtestCommand checks the loadtest command's counting against a
// server that limits deterministically.
func TestLoadtestCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Key") == "key-1" {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("RateLimit", `"x";r=0;t=1`)
			w.WriteHeader(429)
			return
		}
		w.Header().Set("RateLimit", `"x";r=5;t=1`)
	}))
	defer srv.Close()
	res, err := runLoad(context.Background(), loadOptions{url: srv.URL, method: "GET", duration: 300 * time.Millisecond, connections: 4, varyHeader: "X-Key", keys: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.statuses[200] == 0 || res.statuses[429] == 0 || res.noRetryAfter != 0 || res.transportErrs != 0 || res.withRateLimit != res.requests {
		t.Errorf("result %+v", res)
	}
	if d := res.statuses[200] - res.statuses[429]; d < -4 || d > 4 {
		t.Errorf("round robin over 2 keys: 200=%d 429=%d", res.statuses[200], res.statuses[429])
	}
	var b strings.Builder
	printSummary(&b, res)
	for _, want := range []string{"status  responses", "429 without Retry-After 0\n", "transport errors        0\n", "latency                 p50"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}
