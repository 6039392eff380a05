package algorithm

import (
	"math/big"
	"math/rand/v2"
	"testing"
)

// raiseOf returns a random raise of old: capacity at least as large and a
// rate Q/W at least as high, under the same window or another one (half,
// double, one and a half times, or any from 1 s to 61 s).
func raiseOf(rng *rand.Rand, old Params, bucket bool) Params {
	w := old.Window
	switch rng.IntN(5) {
	case 1:
		w = max(old.Window/2, 1)
	case 2:
		w = 2 * old.Window
	case 3:
		w = old.Window * 3 / 2
	case 4:
		w = sec + rng.Int64N(60*sec)
	}
	q := max(old.Quota, ceilDiv(old.Quota*w, old.Window)) // the least raise
	if rng.IntN(3) > 0 {
		q += rng.Int64N(10 * old.Quota)
	}
	c := q
	if bucket {
		c = old.Capacity
		if rng.IntN(3) > 0 {
			c += rng.Int64N(10 * old.Capacity)
		}
	}
	return Params{Quota: q, Capacity: c, Window: w}
}

// TestRaise plays random histories under a policy, then asks both it and
// a raised copy (capacity at least as large, rate at least as high, any
// window) about a random later request: whatever the old policy admits,
// the raised one admits, leaving at least as much.
func TestRaise(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	algos := map[string]algo{"fixed-window": FixedWindow, "sliding-window-counter": SlidingWindowCounter, "token-bucket": TokenBucket, "gcra": GCRA, "anchored-window": AnchoredWindow}
	for name, take := range algos {
		bucket := name == "token-bucket" || name == "gcra"
		for range 5000 {
			q := 1 + rng.Int64N(100)
			old := Params{Quota: q, Capacity: q, Window: sec + rng.Int64N(60*sec)}
			if bucket {
				old.Capacity = 1 + rng.Int64N(2*q)
			}
			raised := raiseOf(rng, old, bucket)
			var s State
			var l Log
			now := t0 + rng.Int64N(old.Window)
			for range rng.IntN(40) {
				now += rng.Int64N(old.Window / q * 2)
				cost := 1 + rng.Int64N(old.Capacity)
				s, _ = decide(take, s, now, old, cost)
				if r := l.Take(now, old, cost); r.Allowed {
					l.Add(now, old, cost)
				}
			}
			at := now + rng.Int64N(old.Window/q*2)
			cost := rng.Int64N(old.Capacity + 1)
			_, a := decide(take, s, at, old, cost)
			_, b := decide(take, s, at, raised, cost)
			if !noWorse(a, b) {
				t.Fatalf("%s %+v → %+v, state %+v, at %d, cost %d: old %+v, raised %+v", name, old, raised, s, at, cost, a, b)
			}
			la, lb := l, Log{entries: append([]LogEntry(nil), l.entries...), total: l.total, window: l.window}
			a, b = la.Take(at, old, cost), lb.Take(at, raised, cost)
			if !noWorse(a, b) {
				t.Fatalf("sliding-window-log %+v → %+v, cost %d: old %+v, raised %+v", old, raised, cost, a, b)
			}
		}
	}
}

// TestWindowChange is a raise that changes the window: {Quota 10, Window
// 20 s} spends all 10 at 5 s, then, at 15 s, the same name asks for one
// unit as {10 per 10 s} (twice the rate) or {30 per 40 s}.
func TestWindowChange(t *testing.T) {
	old := Params{Quota: 10, Capacity: 10, Window: 20 * sec}
	for _, c := range []struct {
		name     string
		take     algo
		old      Result
		ten, fty Result // under {10, 10 s} and {30, 40 s}
	}{
		// The window restarts: nothing spent in it yet.
		{"fixed-window", FixedWindow, Result{ResetAfter: 5 * sec, RetryAfter: 5 * sec},
			Result{Allowed: true, Remaining: 9, ResetAfter: 5 * sec}, Result{Allowed: true, Remaining: 29, ResetAfter: 25 * sec}},
		// The estimate still holds all 10 (they were spent in this window):
		// they count in the new window. Under {10, 10 s} one unit fits
		// once they weigh 9, a tenth into the next window (at 21 s); under
		// {30, 40 s} 20 are left, 19 after this unit, and a 20th fits once
		// the 11 weigh 10, 1/11 into the next window (at 40 s + 40/11 s).
		// Full again at the end of the window after the one they count in.
		{"sliding-window-counter", SlidingWindowCounter, Result{ResetAfter: 7 * sec, RetryAfter: 7 * sec, Full: 25 * sec},
			Result{ResetAfter: 6 * sec, RetryAfter: 6 * sec, Full: 15 * sec}, Result{Allowed: true, Remaining: 19, ResetAfter: 65*sec - 400*sec/11, Full: 65 * sec}},
		// Five of the ten have refilled at 1 per 2 s. The token bucket
		// refills the 10 s since the request at the new rate: 10 s × 1/s
		// under {10, 10 s}, all of it; 10 s × 0.75/s of the 10 spent
		// under {30, 40 s}. GCRA's TAT owed 5 at the change, under both.
		{"token-bucket", TokenBucket, Result{Allowed: true, Remaining: 4, ResetAfter: 2 * sec},
			Result{Allowed: true, Remaining: 9, ResetAfter: sec}, Result{Allowed: true, Remaining: 26, ResetAfter: 2*sec/3 + 1}},
		{"gcra", GCRA, Result{Allowed: true, Remaining: 4, ResetAfter: 2 * sec},
			Result{Allowed: true, Remaining: 4, ResetAfter: sec}, Result{Allowed: true, Remaining: 24, ResetAfter: 4*sec/3 + 1}},
		// The key's window, opened at 5 s, ends at 25 s; under another
		// length it has ended, and the request opens one at 15 s.
		{"anchored-window", AnchoredWindow, Result{ResetAfter: 10 * sec, RetryAfter: 10 * sec},
			Result{Allowed: true, Remaining: 9, ResetAfter: 10 * sec}, Result{Allowed: true, Remaining: 29, ResetAfter: 40 * sec}},
	} {
		s, _ := decide(c.take, State{}, t0+5*sec, old, 10)
		for _, v := range []struct {
			p    Params
			want Result
		}{{old, c.old}, {Params{Quota: 10, Capacity: 10, Window: 10 * sec}, c.ten}, {Params{Quota: 30, Capacity: 30, Window: 40 * sec}, c.fty}} {
			_, r := decide(c.take, s, t0+15*sec, v.p, 1)
			r.Expires = 0
			if r != v.want {
				t.Errorf("%s under %+v: %+v, want %+v", c.name, v.p, r, v.want)
			}
		}
	}
	// The log: the 10 leave at 25 s, as the old window lets them; under a
	// window of 10 s they left at 15 s already.
	for _, v := range []struct {
		p    Params
		want Result
	}{
		{old, Result{ResetAfter: 10 * sec, RetryAfter: 10 * sec}},
		{Params{Quota: 10, Capacity: 10, Window: 10 * sec}, Result{Allowed: true, Remaining: 9, ResetAfter: 10 * sec}},
		{Params{Quota: 30, Capacity: 30, Window: 40 * sec}, Result{Allowed: true, Remaining: 19, ResetAfter: 10 * sec}},
	} {
		var l Log
		l.Take(t0+5*sec, old, 10)
		l.Add(t0+5*sec, old, 10)
		r := l.Take(t0+15*sec, v.p, 1)
		r.Expires = 0
		if r != v.want {
			t.Errorf("sliding-window-log under %+v: %+v, want %+v", v.p, r, v.want)
		}
	}
}

// TestCounterCarriesEstimate: a state written under another window counts
// what its estimate holds at the change, rounded up, in the new window.
func TestCounterCarriesEstimate(t *testing.T) {
	old := Params{Quota: 10, Capacity: 10, Window: 20 * sec}
	// 10 in the window before, a quarter into this one: 7.5 held, 2 left.
	s := State{A: t0 - 20*sec, B: 10, W: old.Window}
	if _, r := decide(SlidingWindowCounter, s, t0+5*sec, old, 0); r.Remaining != 2 {
		t.Fatalf("old policy: %+v, want 2 left", r)
	}
	s2, r := decide(SlidingWindowCounter, s, t0+5*sec, Params{Quota: 10, Capacity: 10, Window: 10 * sec}, 2)
	if !r.Allowed || r.Remaining != 0 || s2 != (State{A: t0, B: 10, W: 10 * sec}) {
		t.Fatalf("new window: %+v, state %+v; want admitted, 0 left, 8 + 2 counted in [t0, t0+10 s)", r, s2)
	}
}

// TestRescaleExact compares rescale with big-integer arithmetic for debts
// and windows up to the 2^53 bound, where d·W overflows 64 bits.
func TestRescaleExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 17))
	for range 100000 {
		w0 := 1 + rng.Int64N(1<<rng.IntN(53))
		p := Params{Quota: 1, Window: 1 + rng.Int64N(1<<rng.IntN(53))}
		p.Capacity = 1 + rng.Int64N(max((1<<53)/p.Window, 1))
		d := rng.Int64N(1 << rng.IntN(54))
		want := new(big.Int).Mul(big.NewInt(d), big.NewInt(p.Window))
		want.Add(want, big.NewInt(w0-1)).Quo(want, big.NewInt(w0)) // ⌈d·W/w0⌉
		switch {
		case w0 == p.Window:
			want.SetInt64(d)
		case d/w0 >= p.Capacity:
			want.SetInt64(p.Capacity * p.Window) // an empty bucket
		}
		if got := rescale(d, w0, p); got != want.Int64() {
			t.Fatalf("rescale(%d, %d, %+v) = %d, want %d", d, w0, p, got, want)
		}
	}
}

// TestStateWithoutWindow: a state written before the window was kept (W
// 0) decides as one written under the policy's window. The anchored
// window, which always kept it, reads W 0 as a key without a window.
func TestStateWithoutWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 23))
	algos := map[string]algo{"fixed-window": FixedWindow, "sliding-window-counter": SlidingWindowCounter, "token-bucket": TokenBucket, "gcra": GCRA}
	for name, take := range algos {
		for range 2000 {
			q := 1 + rng.Int64N(100)
			p := Params{Quota: q, Capacity: q, Window: sec + rng.Int64N(60*sec)}
			var s State
			now := t0 + rng.Int64N(p.Window)
			for range rng.IntN(20) {
				now += rng.Int64N(p.Window / q * 2)
				s, _ = decide(take, s, now, p, 1+rng.Int64N(q))
			}
			at := now + rng.Int64N(p.Window/q*2)
			bare := s
			bare.W = 0
			cost := rng.Int64N(q + 1)
			if _, a := decide(take, s, at, p, cost); a != func() Result { _, b := decide(take, bare, at, p, cost); return b }() {
				t.Fatalf("%s: state %+v and the same without its window decide differently", name, s)
			}
		}
	}
}
