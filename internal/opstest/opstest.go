// Package opstest holds what the tests of the ops packages share: a test
// clock, a middleware on loopback that trusts X-Forwarded-For, and small
// request and log helpers.
package opstest

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
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/header"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/testkit"
)

// Quiet discards every record.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Clock is a settable test clock, safe for concurrent use.
type Clock struct{ ns atomic.Int64 }

// NewClock returns a Clock reading 1 March 2026, 12:00 UTC.
func NewClock() *Clock {
	c := &Clock{}
	c.ns.Store(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// Pol is a token-bucket policy: no window boundary can refill it in the
// middle of a test the way an epoch-aligned fixed window could.
func Pol(name string, quota int64, window time.Duration) floodgate.Policy {
	return floodgate.Policy{Name: name, Algorithm: floodgate.TokenBucket, Quota: quota, Window: window}
}

// LogPol is a sliding-window-log policy of quota per hour: exact, and
// with no window boundary to refill it in the middle of a test.
func LogPol(name string, quota int64) floodgate.Policy {
	return floodgate.Policy{Name: name, Algorithm: floodgate.SlidingWindowLog, Quota: quota, Window: time.Hour}
}

// OK answers "ok".
var OK = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// Engine is an engine on cfg, its Store a memory store when it has none,
// logging nowhere: for a middleware whose observer, blocker or capacity is
// under test.
func Engine(t testing.TB, cfg engine.Config) *engine.Engine {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = testkit.Memory(t)
	}
	if cfg.Logger == nil {
		cfg.Logger = Quiet
	}
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// ServeMW starts a loopback server behind a middleware that trusts
// X-Forwarded-For from loopback, so tests choose client addresses.
func ServeMW(t testing.TB, cfg httplimit.Config) *httptest.Server {
	t.Helper()
	if cfg.Store == nil && cfg.Engine == nil {
		cfg.Store = testkit.Memory(t)
	}
	if cfg.Logger == nil {
		cfg.Logger = Quiet
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
	srv := httptest.NewUnstartedServer(mw.Wrap(OK))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// Reply is a response as the tests read it.
type Reply struct {
	Status  int
	Header  http.Header
	Problem header.Problem
}

// Get sends GET path as client ip and decodes a problem body if any.
func Get(t testing.TB, base, path, ip string) Reply {
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
	r := Reply{Status: resp.StatusCode, Header: resp.Header}
	if resp.Header.Get("Content-Type") == header.ProblemContentType {
		if err := json.Unmarshal(body, &r.Problem); err != nil {
			t.Fatalf("problem body %q: %v", body, err)
		}
	}
	return r
}

// LogBuffer collects slog records as JSON lines.
type LogBuffer struct{ testkit.Buffer }

// Records returns the records written so far.
func (l *LogBuffer) Records(t testing.TB) []map[string]any {
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

// Logger returns a logger writing to l, Debug and up.
func (l *LogBuffer) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Eventually polls cond every 10 ms until it holds or d passes.
func Eventually(d time.Duration, cond func() bool) bool {
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
