package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/memorystore"
)

type events []engine.Event

func (e *events) Observe(ev engine.Event) { *e = append(*e, ev) }

func compile(t *testing.T, e *engine.Engine, name string, quota int64, mode engine.Mode) *engine.Compiled {
	t.Helper()
	c, err := e.Compile(engine.Rule{Name: name, Mode: mode, Policies: []floodgate.Policy{{Name: name, Algorithm: floodgate.FixedWindow, Quota: quota, Window: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDecideAllSpendsNothingWhenOneRefuses(t *testing.T) {
	now := time.Date(2031, 1, 1, 0, 10, 0, 0, time.UTC)
	var seen events
	e, err := engine.New(engine.Config{Store: testkit.Memory(t, memorystore.WithClock(func() time.Time { return now })), Observer: &seen})
	if err != nil {
		t.Fatal(err)
	}
	big, small, shadow := compile(t, e, "big", 5, engine.Enforce), compile(t, e, "small", 1, engine.Enforce), compile(t, e, "shadow", 1, engine.Shadow)
	ctx := context.Background()
	steps := []engine.Step{{Rule: big, Request: engine.Request{Key: "k", Cost: floodgate.Cost{Requests: 1}}},
		{Rule: small, Request: engine.Request{Key: "k", Cost: floodgate.Cost{Requests: 1}}},
		{Rule: shadow, Request: engine.Request{Key: "k", Cost: floodgate.Cost{Requests: 1}}}}
	outs := make([]engine.Outcome, 3)
	if !engine.DecideAll(ctx, steps, outs) || outs[0].Item(0).Remaining != 4 || outs[1].Item(0).Remaining != 0 {
		t.Fatalf("first: %+v", outs)
	}
	seen = nil
	if engine.DecideAll(ctx, steps, outs) {
		t.Fatal("second admitted over small's quota")
	}
	if outs[1].Verdict != engine.Denied || outs[0].Verdict != engine.Allowed || outs[0].Item(0).Remaining != 4 {
		t.Errorf("second: %+v", outs)
	}
	if len(seen) != 1 || seen[0].Rule != "small" || seen[0].Verdict != engine.Denied || seen[0].RetryAfter != 50*time.Minute {
		t.Errorf("events %+v, want small's denial", seen)
	}
	if p := big.Peek(ctx, "k"); p.Item(0).Remaining != 4 {
		t.Errorf("big spent by a refused request: %d left", p.Item(0).Remaining)
	}
	// A lone step is decided as Decide does.
	if !engine.DecideAll(ctx, steps[:1], outs) || outs[0].Item(0).Remaining != 3 {
		t.Errorf("lone step: %+v", outs[0])
	}
	// Shadow steps never refuse: with small the only other enforcing step
	// gone, the shadow one over its quota still admits.
	if !engine.DecideAll(ctx, []engine.Step{steps[0], steps[2]}, outs) || !outs[1].Shadow {
		t.Errorf("with shadow: %+v", outs[:2])
	}
}

func TestDecideAllCostAboveRemaining(t *testing.T) {
	now := time.Date(2031, 1, 1, 0, 10, 0, 0, time.UTC)
	e, _ := engine.New(engine.Config{Store: testkit.Memory(t, memorystore.WithClock(func() time.Time { return now }))})
	a, b := compile(t, e, "a", 10, engine.Enforce), compile(t, e, "b", 3, engine.Enforce)
	ctx := context.Background()
	cost := floodgate.Cost{Requests: 2}
	steps := []engine.Step{{Rule: a, Request: engine.Request{Key: "k", Cost: cost}}, {Rule: b, Request: engine.Request{Key: "k", Cost: cost}}}
	outs := make([]engine.Outcome, 2)
	engine.DecideAll(ctx, steps, outs)
	if engine.DecideAll(ctx, steps, outs) || outs[1].Item(0).Allowed || outs[1].Item(0).Remaining != 1 {
		t.Fatalf("2 of b's 1 left admitted: %+v", outs[1])
	}
	m := engine.Merge(outs)
	if m.Verdict != engine.Denied || m.Len() != 2 || m.Summary != 1 || m.Field != `"a";q=10;w=3600, "b";q=3;w=3600` || m.RetryAfter != 50*time.Minute {
		t.Errorf("merge: %+v", m)
	}
}

// TestDecideAllOneCounterTwice: steps that spend one counter (an Envoy
// descriptor sent four times) must fit together; a request they do not
// fit together spends nothing.
func TestDecideAllOneCounterTwice(t *testing.T) {
	e, err := engine.New(engine.Config{Store: testkit.Memory(t)})
	if err != nil {
		t.Fatal(err)
	}
	client := compile(t, e, "client", 3, engine.Enforce)
	ctx := context.Background()
	step := engine.Step{Rule: client, Request: engine.Request{Key: "fay", Cost: floodgate.Cost{Requests: 1}}}
	outs := make([]engine.Outcome, 4)
	if engine.DecideAll(ctx, []engine.Step{step, step, step, step}, outs) {
		t.Fatal("four of a quota of three admitted together")
	}
	if p := client.Peek(ctx, "fay"); p.Item(0).Remaining != 3 {
		t.Fatalf("the refused request spent: %d of 3 left", p.Item(0).Remaining)
	}
	if !engine.DecideAll(ctx, []engine.Step{step, step, step}, outs[:3]) {
		t.Fatal("three of a quota of three refused")
	}
}
