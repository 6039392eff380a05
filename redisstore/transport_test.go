package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate"
)

// TestCallBreaker: a Cluster master's breaker opens after
// DefaultBreakerThreshold consecutive failed calls (a success ends a run),
// refuses calls for DefaultBreakerCooldown, then lets one probe through at
// a time; the probe's failure opens it again, its success closes it.
func TestCallBreaker(t *testing.T) {
	var b callBreaker
	now := time.Unix(0, 0)
	for range floodgate.DefaultBreakerThreshold - 1 {
		b.allow(now)
		b.done(now, true)
	}
	b.allow(now)
	b.done(now, false)
	for i := range floodgate.DefaultBreakerThreshold {
		if !b.allow(now) {
			t.Fatalf("closed after a success and %d failures: refused", i)
		}
		b.done(now, true)
	}
	if b.allow(now) || b.allow(now.Add(floodgate.DefaultBreakerCooldown-1)) {
		t.Fatal("open: a call allowed within the cooldown")
	}
	later := now.Add(floodgate.DefaultBreakerCooldown)
	if !b.allow(later) {
		t.Fatal("after the cooldown: the probe refused")
	}
	if b.allow(later) {
		t.Fatal("a second call allowed while the probe runs")
	}
	b.done(later, true)
	if b.allow(later.Add(floodgate.DefaultBreakerCooldown - 1)) {
		t.Fatal("the probe failed: a call allowed within the next cooldown")
	}
	last := later.Add(floodgate.DefaultBreakerCooldown)
	if !b.allow(last) {
		t.Fatal("after the second cooldown: the probe refused")
	}
	b.done(last, false)
	for i := range 2 { // closed again: every call, not only the next
		if !b.allow(last) {
			t.Fatalf("the probe succeeded: call %d refused", i+1)
		}
	}
}

// TestDurability: with WithDurability(n, …), a decision is answered where
// n replicas confirm its writes (the test services' Sentinel master and
// Cluster masters, one replica each; on a Cluster the WAIT goes on the
// master's own pipeline), and fails with ErrNotReplicated where fewer do
// (a server without replicas; n = 2 on the Cluster).
func TestDurability(t *testing.T) {
	ps := []floodgate.Policy{{Name: "d", Algorithm: floodgate.FixedWindow, Quota: 10, Window: time.Minute}}
	res := make([]floodgate.Result, 1)
	ctx := context.Background()
	p := startPrivateRedis(t)
	lone := redis.NewClient(&redis.Options{Addr: p.addr()})
	t.Cleanup(func() { lone.Close() })
	cluster := clusterClient(t)
	for _, tc := range []struct {
		name     string
		rdb      redis.UniversalClient
		replicas int
		ok       bool
	}{
		{"standalone without a replica", lone, 1, false},
		{"Cluster, 1 of 1 replica", cluster, 1, true},
		{"Cluster, 2 of 1 replica", cluster, 2, false},
		{"Sentinel master, 1 of 1 replica", sentinelClient(t), 1, true},
	} {
		s := newTestStore(t, tc.rdb, WithDurability(tc.replicas, 300*time.Millisecond))
		for want := int64(9); want >= 8; want-- {
			err := s.Take(ctx, "k", one, ps, res)
			switch {
			case tc.ok && (err != nil || res[0].Remaining != want):
				t.Errorf("%s: %+v, %v; want remaining %d", tc.name, res[0], err, want)
			case !tc.ok && (!errors.Is(err, ErrNotReplicated) || !errors.Is(err, floodgate.ErrStoreUnavailable)):
				t.Errorf("%s: %v, want ErrStoreUnavailable wrapping ErrNotReplicated", tc.name, err)
			}
			if !tc.ok {
				break
			}
		}
	}
	if _, err := New(lone, WithDurability(1, time.Second)); err == nil {
		t.Error("a durability timeout as long as the per-call timeout: accepted")
	}
}
