package rlqs_test

import (
	"errors"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/rlqs"
	"github.com/floodgate/floodgate/rlqs/rlqsclient"
)

// TestPoolServesOtherStreams: a stream whose demand fell gives what it
// holds beyond its new lease to the server's pool, and another stream's
// next lease comes from there without a store call.
func TestPoolServesOtherStreams(t *testing.T) {
	clk := newClock()
	srv, conn, store := fixture(t, clk, perSecond, rlqs.Options{})
	a := client(t, conn, clk, rlqsclient.Settings{})
	b := client(t, conn, clk, rlqsclient.Settings{})
	spend(a, 10)
	syncNow(t, a) // an even part for one stream: 126 tokens, 252 held + the 10 spent
	spend(b, 10)
	syncNow(t, b) // an even part for two: ⌈62.5⌉ + 1 = 64, 128 held + 10
	if rem := peek(t, store, srv); rem != 1000-262-138 {
		t.Fatalf("remaining %d, want 600", rem)
	}
	clk.Advance(interval)
	syncNow(t, a) // no demand: DENY_ALL, and its 252 go to the pool
	if _, s := a.State(api); tokens(t, s) != 0 {
		t.Fatalf("idle stream's strategy %v, want DENY_ALL", s)
	}
	if got := spend(b, 100); got != 64 {
		t.Fatalf("b admitted %d of 100 on its lease of 64", got)
	}
	syncNow(t, b) // 1,000/s wanted: 126, so 252 held; it held 64, the pool gives 188
	if _, s := b.State(api); tokens(t, s) != 126 {
		t.Fatalf("b's strategy %v, want 126 tokens", s)
	}
	if calls, rem := srv.StoreCalls(), peek(t, store, srv); calls != 2 || rem != 600 {
		t.Fatalf("%d store calls and %d remaining: the pool should have served b", calls, rem)
	}
}

// TestWindowTurnChargesTheNewWindow: a fixed window's reservation ends
// with it; what the client spent after the turn (pro rata over the
// report's time) is charged to the new window with the next lease.
func TestWindowTurnChargesTheNewWindow(t *testing.T) {
	clk := newClock()
	srv, conn, store := fixture(t, clk, perSecond, rlqs.Options{})
	c := client(t, conn, clk, rlqsclient.Settings{})
	spend(c, 10)
	syncNow(t, c) // 126 tokens, 262 taken in window 0
	for range 9 {
		clk.Advance(interval)
		syncNow(t, c) // no demand: leases of 1 token, held ones kept
	}
	clk.Advance(interval / 2) // 0.95 s
	spend(c, 10)
	syncNow(t, c)         // 10 requests: 100/s, ⌈12.5⌉ + 1 = 14 tokens, from the pool
	clk.Advance(interval) // 1.05 s: the report straddles the turn
	if got := spend(c, 10); got != 10 {
		t.Fatalf("%d admitted on a lease of 14", got)
	}
	syncNow(t, c)
	// 10 allowed over 100 ms, half of it in window 1: a debt of 5, paid
	// with the 28 the lease holds from window 1's fresh quota; the pool of
	// window 0 is void.
	if _, s := c.State(api); tokens(t, s) != 14 {
		t.Fatalf("strategy %v, want 14 tokens", s)
	}
	if rem := peek(t, store, srv); rem != 1000-33 {
		t.Fatalf("window 1 has %d left, want %d", rem, 1000-33)
	}
}

// TestIdleBucketIsAbandoned: a bucket whose reports count no request for
// IdleAfter is abandoned, and the client forgets it.
func TestIdleBucketIsAbandoned(t *testing.T) {
	clk := newClock()
	_, conn, _ := fixture(t, clk, perSecond, rlqs.Options{IdleAfter: 250 * time.Millisecond})
	c := client(t, conn, clk, rlqsclient.Settings{})
	spend(c, 1)
	syncNow(t, c)
	for i := range 3 {
		clk.Advance(interval)
		syncNow(t, c)
		want := rlqsclient.Active
		if i == 2 { // 300 ms without a request
			want = rlqsclient.Untracked
		}
		if st, _ := c.State(api); st != want {
			t.Fatalf("after %d idle intervals: %v, want %v", i+1, st, want)
		}
	}
}

// TestSlack: a lease holds Slack intervals of refill more in reserve
// (126 tokens, 126 × 2.25 = 283 held, after the 10 reported), and a
// slack outside 0..1 is refused.
func TestSlack(t *testing.T) {
	clk := newClock()
	srv, conn, store := fixture(t, clk, perSecond, rlqs.Options{Slack: 0.25})
	c := client(t, conn, clk, rlqsclient.Settings{})
	spend(c, 10)
	syncNow(t, c)
	if _, s := c.State(api); tokens(t, s) != 126 {
		t.Fatalf("strategy %v, want 126 tokens", s)
	}
	if rem := peek(t, store, srv); rem != 1000-293 {
		t.Fatalf("remaining %d, want %d", rem, 1000-293)
	}
	if _, err := rlqs.NewServer(store, rules(t, perSecond), rlqs.Options{Slack: 1.5}); !errors.Is(err, floodgate.ErrInvalidOption) {
		t.Fatalf("slack 1.5: %v", err)
	}
}
