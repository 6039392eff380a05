package ops_test

import (
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clientip"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/memorystore"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// clock is a settable test clock, safe for concurrent use.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// pol is a token-bucket policy: no window boundary can refill it in the
// middle of a test the way an epoch-aligned fixed window could.
func pol(name string, quota int64, window time.Duration) floodgate.Policy {
	return floodgate.Policy{Name: name, Algorithm: floodgate.TokenBucket, Quota: quota, Window: window}
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// serveMW starts a loopback server behind a middleware that trusts
// X-Forwarded-For from loopback, so tests choose client addresses.
func serveMW(t testing.TB, cfg httplimit.Config) *httptest.Server {
	t.Helper()
	if cfg.Store == nil {
		st := memorystore.New()
		t.Cleanup(func() { st.Close() })
		cfg.Store = st
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	if cfg.ClientIP == nil {
		r, err := clientip.New(clientip.Config{TrustedProxies: []string{"127.0.0.0/8", "::1/128"}})
		if err != nil {
			t.Fatal(err)
		}
		cfg.ClientIP = r
	}
	mw, err := httplimit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(mw.Wrap(okHandler))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

type reply struct {
	status  int
	header  http.Header
	problem header.Problem
}

// get sends GET path as client ip and decodes a problem body if any.
func get(t testing.TB, base, path, ip string) reply {
	t.Helper()
	req, _ := http.NewRequest("GET", base+path, nil)
	if ip != "" {
		req.Header.Set("X-Forwarded-For", ip)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header}
	if resp.Header.Get("Content-Type") == header.ProblemContentType {
		if err := json.Unmarshal(body, &r.problem); err != nil {
			t.Fatalf("problem body %q: %v", body, err)
		}
	}
	return r
}

// logBuffer collects slog records as JSON lines.
type logBuffer struct{ testkit.Buffer }

func (l *logBuffer) records(t testing.TB) []map[string]any {
	var out []map[string]any
	dec := json.NewDecoder(strings.NewReader(l.String()))
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// eventually polls cond every 10 ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}
