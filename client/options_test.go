package client

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/header"
)

// TestNewRefuses: every option with a value outside its documented range,
// and a nil option, is an error wrapping floodgate.ErrInvalidOption that
// names the option and the value, wherever it stands among good options;
// neither New nor NewTransport returns anything with it.
func TestNewRefuses(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		opt  Option
		want string
	}{
		{nil, "client: nil option"},
		{WithRate(0, 5), "WithRate: requests per second must be above 0 and finite, got 0"},
		{WithRate(-1, -1), "WithRate: requests per second must be above 0 and finite, got -1"},
		{WithRate(nan, 5), "WithRate: requests per second must be above 0 and finite, got NaN"},
		{WithRate(math.Inf(1), 5), "WithRate: requests per second must be above 0 and finite, got +Inf"},
		{WithRate(10, 0), "WithRate: burst must be at least 1, got 0"},
		{WithConcurrency(0), "WithConcurrency: requests in flight must be at least 1, got 0"},
		{WithConcurrency(-3), "WithConcurrency: requests in flight must be at least 1, got -3"},
		{WithBytesPerSecond(0, 100), "WithBytesPerSecond: bytes per second must be at least 1, got 0"},
		{WithBytesPerSecond(1000, -1), "WithBytesPerSecond: burst must be at least 1 byte, got -1"},
		{WithMaxWait(0), "WithMaxWait: the wait must be above 0 and at most 640511h56m49.213693952s, got 0s"},
		{WithMaxWait(-time.Second), "WithMaxWait: the wait must be above 0 and at most 640511h56m49.213693952s, got -1s"},
		{WithMaxWait(maxWaitLimit + 1), "got 640511h56m49.213693953s"},
		{WithMaxWait(math.MaxInt64), "got 2562047h47m16.854775807s"},
		{WithMaxWindow(0), "WithMaxWindow: the window must be at least 1s, got 0s"},
		{WithMaxWindow(999 * time.Millisecond), "WithMaxWindow: the window must be at least 1s, got 999ms"},
		{WithMaxRemaining(0), "WithMaxRemaining: the maximum must be at least 1, got 0"},
		{WithMaxAttempts(0), "WithMaxAttempts: attempts must be at least 1, got 0"},
		{WithMaxAttempts(-1), "WithMaxAttempts: attempts must be at least 1, got -1"},
		{WithBackoff(0), "WithBackoff: the delay must be above 0, got 0s"},
		{WithBackoff(-time.Millisecond), "WithBackoff: the delay must be above 0, got -1ms"},
		{WithJitter(50), "WithJitter: fraction must be in [0, 1], got 50"},
		{WithJitter(-0.1), "WithJitter: fraction must be in [0, 1], got -0.1"},
		{WithJitter(math.Nextafter(1, 2)), "WithJitter: fraction must be in [0, 1], got 1.0000000000000002"},
		{WithJitter(nan), "WithJitter: fraction must be in [0, 1], got NaN"},
		{WithAIMD(1, 0.5, 0.25), "WithAIMD: decrease must be in (0, 1), got 1"},
		{WithAIMD(0, 0.5, 0.25), "WithAIMD: decrease must be in (0, 1), got 0"},
		{WithAIMD(nan, 0.5, 0.25), "WithAIMD: decrease must be in (0, 1), got NaN"},
		{WithAIMD(0.5, 0, 0.25), "WithAIMD: rampStart must be in (0, 1], got 0"},
		{WithAIMD(0.5, 1.5, 0.25), "WithAIMD: rampStart must be in (0, 1], got 1.5"},
		{WithAIMD(0.5, 0.5, 0), "WithAIMD: rampStep must be in (0, 1], got 0"},
		{WithAIMD(0.5, 0.5, 2), "WithAIMD: rampStep must be in (0, 1], got 2"},
		{WithBreaker(BreakerSettings{Failures: 3, OpenFor: -time.Second}), "WithBreaker: OpenFor must not be negative, got -1s"},
		{WithAttemptHeader(""), `WithAttemptHeader: "" is not a field name`},
		{WithAttemptHeader("Floodgate Attempt"), `WithAttemptHeader: "Floodgate Attempt" is not a field name`},
		{WithAttemptHeader("Attempt:"), `WithAttemptHeader: "Attempt:" is not a field name`},
		{WithRequestIDHeader("X-Request-Id\r\n"), `WithRequestIDHeader: "X-Request-Id\r\n" is not a field name`},
		{WithPartitionKey(nil), "WithPartitionKey: nil function"},
		{WithLegacyReset(header.ResetDate), "WithLegacyReset: the style must be header.ResetAuto, ResetEpoch or ResetDelta, got 3"},
		{WithLegacyReset(99), "WithLegacyReset: the style must be header.ResetAuto, ResetEpoch or ResetDelta, got 99"},
		{WithClock(nil), "WithClock: nil clock"},
		{WithSleep(nil), "WithSleep: nil sleep"},
		{WithRandom(nil), "WithRandom: nil function"},
		{WithLogger(nil), "WithLogger: nil logger"},
	} {
		good := []Option{WithRate(20, 5), WithMaxWait(time.Minute), WithLogger(quiet)}
		for at := range len(good) + 1 {
			opts := append(append(append([]Option(nil), good[:at]...), c.opt), good[at:]...)
			refused(t, c.want, opts)
		}
	}
}

// refused checks that New and NewTransport refuse opts with an error
// wrapping floodgate.ErrInvalidOption whose message contains want.
func refused(t *testing.T, want string, opts []Option) {
	t.Helper()
	tr, err := NewTransport(nil, opts...)
	if tr != nil || !errors.Is(err, floodgate.ErrInvalidOption) || !strings.Contains(err.Error(), want) {
		t.Errorf("NewTransport(…) = %v, %v; want ErrInvalidOption saying %q", tr, err, want)
	}
	hc, err := New(opts...)
	if hc != nil || !errors.Is(err, floodgate.ErrInvalidOption) || !strings.Contains(err.Error(), want) {
		t.Errorf("New(…) = %v, %v; want ErrInvalidOption saying %q", hc, err, want)
	}
}

// TestNewRefusesContradictions: options that cannot both hold are refused
// in either order.
func TestNewRefusesContradictions(t *testing.T) {
	for _, c := range []struct {
		a, b Option
		want string
	}{
		{WithBreaker(BreakerSettings{Failures: 2}), WithoutBreaker(), "WithBreaker and WithoutBreaker contradict each other"},
		// The default request-ID header is X-Request-Id; names compare without case.
		{WithAttemptHeader("x-request-id"), WithJitter(0), `WithAttemptHeader("x-request-id") would overwrite the request-ID header`},
		{WithAttemptHeader("Trace-Id"), WithRequestIDHeader("TRACE-ID"), `WithAttemptHeader("Trace-Id") would overwrite the request-ID header`},
	} {
		refused(t, c.want, []Option{WithLogger(quiet), c.a, c.b})
		refused(t, c.want, []Option{c.b, WithLogger(quiet), c.a})
	}
}

// TestNewAcceptsBounds: the bounds themselves are accepted and kept, and
// the values that mean "off" where the docs say so.
func TestNewAcceptsBounds(t *testing.T) {
	pk := func(*http.Request) ([]byte, bool) { return nil, false }
	tr := newTestTransport(t, nil,
		WithRate(math.SmallestNonzeroFloat64, 1), WithConcurrency(1), WithBytesPerSecond(1, 1),
		WithMaxWait(maxWaitLimit), WithMaxWindow(time.Second), WithMaxRemaining(1), WithMaxAttempts(1),
		WithBackoff(time.Nanosecond), WithJitter(1), WithAIMD(math.SmallestNonzeroFloat64, 1, 1),
		WithRequestIDHeader(""), WithAttemptHeader("X-Request-Id"), // no request-ID header to overwrite
		WithPartitionKey(pk), WithLegacyReset(header.ResetDelta), WithLogger(quiet))
	c := tr.cfg
	got := []any{c.rps, c.burst, c.concurrency, c.bytesPerSec, c.bytesBurst, c.maxWait, c.maxWindow, c.maxRemaining,
		c.maxAttempts, c.backoff, c.jitter, c.decrease, c.rampStart, c.rampStep, c.requestIDs, c.attemptHeader, c.legacyReset}
	want := []any{math.SmallestNonzeroFloat64, 1, 1, int64(1), int64(1), maxWaitLimit, time.Second, int64(1),
		1, time.Nanosecond, 1.0, math.SmallestNonzeroFloat64, 1.0, 1.0, "", "X-Request-Id", header.ResetDelta}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("setting %d: got %v, want %v", i, got[i], want[i])
		}
	}
	if cap(tr.sem) != 1 || tr.bytes.Burst() != 1 || tr.rate.Burst() != 1 {
		t.Errorf("caps: %d in flight, byte burst %d, request burst %d; want 1, 1, 1", cap(tr.sem), tr.bytes.Burst(), tr.rate.Burst())
	}

	// Zero breaker fields keep the defaults; jitter 0 and the other
	// legacy styles are accepted; later options of a kind replace earlier ones.
	tr = newTestTransport(t, nil, WithBreaker(BreakerSettings{OpenFor: time.Minute}), WithBreaker(BreakerSettings{Failures: 2}),
		WithJitter(0), WithLegacyReset(header.ResetEpoch), WithLegacyReset(header.ResetAuto), WithLogger(quiet))
	if b := tr.cfg.breaker; b != (BreakerSettings{Failures: 2, OpenFor: 30 * time.Second, HalfOpenRequests: 1}) {
		t.Errorf("breaker %+v; want 2 failures, 30s, 1 (the second WithBreaker over the defaults)", b)
	}
	if tr.cfg.jitter != 0 || tr.cfg.legacyReset != header.ResetAuto {
		t.Errorf("jitter %v, legacy reset %v; want 0, auto", tr.cfg.jitter, tr.cfg.legacyReset)
	}
}

// TestLongestMaxWaitDoesNotWrap: at the longest maximum wait and the most
// jitter, a refusal with an absurd Retry-After blocks the origin for the
// maximum wait. Past the bound the wait plus its jitter would wrap around
// to a negative duration, that is to no wait at all.
func TestLongestMaxWaitDoesNotWrap(t *testing.T) {
	clk := newFakeClock()
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		return respond(r, 429, "", "Retry-After: 99999999999"), nil
	})
	tr := newTestTransport(t, base, WithClock(clk.Now), WithSleep(clk.Sleep), WithLogger(quiet),
		WithRandom(func() float64 { return 0.999 }), WithJitter(1), WithMaxWait(maxWaitLimit), WithMaxAttempts(1))
	req, _ := http.NewRequestWithContext(context.Background(), "GET", "https://api.example/x", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	st, _ := tr.State("https://api.example")
	if d := st.BlockedUntil.Sub(clk.Now()); d != maxWaitLimit {
		t.Errorf("blocked for %v; want the maximum wait %v", d, maxWaitLimit)
	}
}
