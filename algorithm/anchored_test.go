package algorithm

import (
	"math/rand/v2"
	"testing"
)

func TestAnchoredWindowFormula(t *testing.T) {
	p := Params{Quota: 4, Capacity: 4, Window: 10 * sec}
	// A peek opens no window: nothing is used, nothing to wait for.
	s, r := decide(AnchoredWindow, State{}, t0+3*sec, p, 0)
	if want := (Result{Allowed: true, Remaining: 4, Expires: t0 + 13*sec}); r != want || s != (State{}) {
		t.Fatalf("peek: %+v %+v, want %+v and no state", r, s, want)
	}
	// The first cost opens the key's window at its time, not at a multiple of W.
	s, r = decide(AnchoredWindow, State{}, t0+3*sec, p, 3)
	if want := (Result{Allowed: true, Remaining: 1, ResetAfter: 10 * sec, Expires: t0 + 13*sec}); r != want {
		t.Fatalf("first: %+v, want %+v", r, want)
	}
	if s != (State{A: t0 + 3*sec, B: 3, W: 10 * sec}) {
		t.Fatalf("state %+v", s)
	}
	_, r = decide(AnchoredWindow, s, t0+10*sec, p, 2)
	if want := (Result{Remaining: 1, ResetAfter: 3 * sec, RetryAfter: 3 * sec, Expires: t0 + 13*sec}); r != want {
		t.Fatalf("denied: %+v, want %+v", r, want)
	}
	// Once it ends, the next cost opens the next window, at its own time.
	s, r = decide(AnchoredWindow, s, t0+20*sec, p, 4)
	if !r.Allowed || r.Remaining != 0 || r.ResetAfter != 10*sec || s != (State{A: t0 + 20*sec, B: 4, W: 10 * sec}) {
		t.Fatalf("next window: %+v %+v", r, s)
	}
}

func TestAnchoredWindowRetryIsExact(t *testing.T) {
	// For random states, RetryAfter is the first µs at which the cost fits.
	rng := rand.New(rand.NewPCG(7, 11))
	for range 20000 {
		q := 1 + rng.Int64N(50)
		w := 1000 + rng.Int64N(3*sec)
		p := Params{Quota: q, Capacity: q, Window: w}
		s := State{A: t0 + rng.Int64N(w), B: rng.Int64N(q + 3), W: w}
		now := t0 + rng.Int64N(2*w)
		cost := 1 + rng.Int64N(q)
		_, r := decide(AnchoredWindow, s, now, p, cost)
		if r.Allowed {
			continue
		}
		if _, at := decide(AnchoredWindow, s, now+r.RetryAfter, p, cost); !at.Allowed || r.RetryAfter <= 0 {
			t.Fatalf("denied at RetryAfter %d: q=%d w=%d s=%+v now=%d cost=%d", r.RetryAfter, q, w, s, now, cost)
		}
		if _, before := decide(AnchoredWindow, s, now+r.RetryAfter-1, p, cost); before.Allowed {
			t.Fatalf("admitted 1µs before RetryAfter: q=%d w=%d s=%+v now=%d cost=%d", q, w, s, now, cost)
		}
	}
}

func TestAnchoredWindowSettle(t *testing.T) {
	p := Params{Quota: 3, Capacity: 3, Window: 10 * sec}
	var s State
	PostAnchoredWindow(&s, t0+sec, p, 5) // opens the window, in debt
	if s != (State{A: t0 + sec, B: 5, W: 10 * sec}) {
		t.Fatalf("post: %+v", s)
	}
	RefundAnchoredWindow(&s, t0, p, 5) // before the window: not its cost
	RefundAnchoredWindow(&s, t0+2*sec, p, 4)
	if s.B != 1 {
		t.Fatalf("refund: %+v, want a count of 1", s)
	}
	RefundAnchoredWindow(&s, t0+2*sec, p, 4)
	if s.B != 0 {
		t.Fatalf("refund past 0: %+v", s)
	}
	PostAnchoredWindow(&s, t0+sec, p, maxExact)
	if s.B != maxExact {
		t.Fatalf("post past 2^53: %+v", s)
	}
}
