package httplimit_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/storetest"
)

// TestRefusalLogBounded: 200 refusals of one key within the interval are
// one log record; after the interval the next record counts the 199 held
// back; another key gets its own record.
func TestRefusalLogBounded(t *testing.T) {
	var buf testkit.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	clock := storetest.NewClock(storetest.Epoch)
	srv := serve(t, httplimit.Config{Logger: logger, Now: clock.Now, Rules: []httplimit.Rule{
		{Pattern: "/", Key: []httplimit.KeyPart{httplimit.Header("X-Who")}, Rule: engine.Rule{Policies: []floodgate.Policy{policy("p", floodgate.FixedWindow, 1, time.Hour)}}},
	}}, ok)
	for range 201 {
		do(t, "GET", srv.URL+"/", "X-Who", "a")
	}
	lines := func() []string { return strings.Split(strings.TrimSpace(buf.String()), "\n") }
	if got := lines(); len(got) != 1 || !strings.Contains(got[0], "suppressed=0") {
		t.Fatalf("200 refusals of one key: %d lines %q", len(got), got)
	}
	do(t, "GET", srv.URL+"/", "X-Who", "b")
	do(t, "GET", srv.URL+"/", "X-Who", "b") // b's first refusal
	clock.Advance(10 * time.Second)
	do(t, "GET", srv.URL+"/", "X-Who", "a")
	got := lines()
	if len(got) != 3 || !strings.Contains(got[2], "suppressed=199") {
		t.Fatalf("after the interval: %q", got)
	}
}
