package server_test

import (
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/clientip"
	"github.com/floodgate/floodgate/cmd/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/httplimit"
)

// quiet discards every record.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testClock is a settable clock, safe for concurrent use, starting on
// 1 March 2026, 12:00 UTC.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *testClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// newEngine is an engine logging nothing, over a fresh memory store
// unless cfg names a store.
func newEngine(t testing.TB, cfg engine.Config) *engine.Engine {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = testkit.Memory(t)
	}
	cfg.Logger = quiet
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// serveBehindXFF starts a loopback server behind a middleware that trusts
// X-Forwarded-For from loopback, so a test chooses its clients' addresses.
func serveBehindXFF(t testing.TB, cfg httplimit.Config) *httptest.Server {
	t.Helper()
	if cfg.Engine == nil {
		cfg.Store = testkit.Memory(t)
	}
	cfg.Logger = quiet
	r, err := clientip.New(clientip.Config{TrustedProxies: []string{"127.0.0.0/8", "::1/128"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.ClientIP = r
	mw, err := httplimit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}
