package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/metrics"
)

// TestObserve: each kind of Event lands in its series (REQUIREMENTS O2):
// a bypass in floodgate_bypasses_total only, a shadow rule's would-be
// denial as outcome shadow_denied and in floodgate_shadow_denials_total,
// a refusal with its Retry-After, a throttle's waits.
func TestObserve(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		m.Observe(engine.Event{Rule: "api", Verdict: engine.Bypassed, Reason: "token"})
	}
	for range 4 {
		m.Observe(engine.Event{Rule: "trial", Policy: "hourly", Verdict: engine.Allowed, Shadow: true})
	}
	m.Observe(engine.Event{Rule: "api", Policy: "minute", Verdict: engine.Denied, RetryAfter: 7 * time.Second, Latency: time.Millisecond})
	m.Observe(engine.Event{Rule: "api", Verdict: engine.Allowed, Waits: 2})

	want := `
# HELP floodgate_bypasses_total Requests let through by a bypass token or allow-listed network.
# TYPE floodgate_bypasses_total counter
floodgate_bypasses_total{reason="token",rule="api"} 3
# HELP floodgate_decisions_total Rate-limit decisions by rule, refusing policy and outcome.
# TYPE floodgate_decisions_total counter
floodgate_decisions_total{outcome="allowed",policy="",rule="api"} 1
floodgate_decisions_total{outcome="denied",policy="minute",rule="api"} 1
floodgate_decisions_total{outcome="shadow_denied",policy="hourly",rule="trial"} 4
# HELP floodgate_shadow_denials_total Requests a shadow rule would have denied.
# TYPE floodgate_shadow_denials_total counter
floodgate_shadow_denials_total{policy="hourly",rule="trial"} 4
# HELP floodgate_throttle_waits_total Waits made by throttle rules before asking again.
# TYPE floodgate_throttle_waits_total counter
floodgate_throttle_waits_total{rule="api"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"floodgate_bypasses_total", "floodgate_decisions_total", "floodgate_shadow_denials_total", "floodgate_throttle_waits_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "floodgate_retry_after_seconds"); n != 1 {
		t.Errorf("retry-after series: %d, want 1", n)
	}
}

// TestCallerEndedIsNoStoreError (REQUIREMENTS S3): a decision its caller's
// context ended (Event.CallerEnded) is counted as a decision, never in
// floodgate_store_errors_total, which alerts on a failing store; a store
// failure is.
func TestCallerEndedIsNoStoreError(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		m.Observe(engine.Event{Rule: "api", Verdict: engine.Unavailable, CallerEnded: true})
	}
	m.Observe(engine.Event{Rule: "api", Verdict: engine.Unavailable})
	want := `
# HELP floodgate_store_errors_total Decisions made while the store failed.
# TYPE floodgate_store_errors_total counter
floodgate_store_errors_total{rule="api"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "floodgate_store_errors_total"); err != nil {
		t.Fatal(err)
	}
}
