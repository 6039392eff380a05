package algorithm

import (
	"math/rand/v2"
	"testing"
)

const sec = 1_000_000 // µs

// T0 is a whole minute in µs since the epoch, so aligned windows start there.
const t0 = 1_767_225_600 * sec

func TestFixedWindowFormula(t *testing.T) {
	p := Params{Quota: 4, Capacity: 4, Window: 10 * sec}
	s, r := decide(FixedWindow, State{}, t0+3*sec, p, 3)
	if want := (Result{Allowed: true, Remaining: 1, ResetAfter: 7 * sec, Expires: t0 + 10*sec}); r != want {
		t.Fatalf("first: %+v, want %+v", r, want)
	}
	if s != (State{A: t0, B: 3, W: 10 * sec}) {
		t.Fatalf("state %+v", s)
	}
	_, r = decide(FixedWindow, s, t0+4*sec, p, 2)
	if want := (Result{Remaining: 1, ResetAfter: 6 * sec, RetryAfter: 6 * sec, Expires: t0 + 10*sec}); r != want {
		t.Fatalf("denied: %+v, want %+v", r, want)
	}
	// The next window starts empty, whatever the old count.
	s, r = decide(FixedWindow, s, t0+10*sec, p, 4)
	if !r.Allowed || r.Remaining != 0 || s != (State{A: t0 + 10*sec, B: 4, W: 10 * sec}) {
		t.Fatalf("next window: %+v %+v", r, s)
	}
}

func TestSlidingWindowCounterRetryIsExact(t *testing.T) {
	// For random states, RetryAfter is the first µs at which the cost fits:
	// it fits then, and did not fit one µs before.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		q := 1 + rng.Int64N(50)
		w := 1 + rng.Int64N(3*sec)
		p := Params{Quota: q, Capacity: q, Window: w}
		start := t0 - t0%w
		s := State{A: start, B: rng.Int64N(q + 1), C: rng.Int64N(q + 1)}
		now := start + rng.Int64N(w)
		cost := 1 + rng.Int64N(q)
		_, r := decide(SlidingWindowCounter, s, now, p, cost)
		if r.Allowed {
			continue
		}
		if r.RetryAfter <= 0 {
			t.Fatalf("denied with RetryAfter %d: q=%d w=%d s=%+v now-start=%d cost=%d", r.RetryAfter, q, w, s, now-start, cost)
		}
		if _, at := decide(SlidingWindowCounter, s, now+r.RetryAfter, p, cost); !at.Allowed {
			t.Fatalf("denied at RetryAfter: q=%d w=%d s=%+v e=%d cost=%d retry=%d", q, w, s, now-start, cost, r.RetryAfter)
		}
		if _, before := decide(SlidingWindowCounter, s, now+r.RetryAfter-1, p, cost); before.Allowed {
			t.Fatalf("admitted 1µs before RetryAfter: q=%d w=%d s=%+v e=%d cost=%d retry=%d", q, w, s, now-start, cost, r.RetryAfter)
		}
	}
}

func TestSlidingWindowCounterEstimate(t *testing.T) {
	// prev = 8, curr = 3, a quarter into the window: 8·0.75 + 3 = 9 of 10 used.
	p := Params{Quota: 10, Capacity: 10, Window: 4 * sec}
	start := t0 - t0%p.Window
	s := State{A: start - p.Window, B: 8}
	// At the window's start prev still weighs fully: 8 + 3 > 10. It fits
	// once 8·(W−e)/W ≤ 10 − 3, at e = W/8 = 0.5 s.
	_, r := decide(SlidingWindowCounter, s, start, p, 3)
	// Three units (Remaining + 1) fit at the same moment: ResetAfter 0.5 s.
	// The estimate is back to zero once prev has decayed: at the window's end.
	if want := (Result{Remaining: 2, ResetAfter: sec / 2, RetryAfter: sec / 2, Full: 4 * sec, Expires: start + 8*sec}); r != want {
		t.Fatalf("at window start: %+v, want %+v", r, want)
	}
	st := State{A: start, B: 3, C: 8}
	_, r = decide(SlidingWindowCounter, st, start+sec, p, 0)
	// 8·0.75 + 3 = 9 used; a second unit once 8·(4−e′)/4 ≤ 5, at e′ = 1.5 s.
	if r.Remaining != 1 || !r.Allowed || r.ResetAfter != sec/2 || r.Full != 7*sec {
		t.Fatalf("peek: %+v, want remaining 1, reset 0.5s, full at the next window's end, 7 s on", r)
	}
}

// TestCounterFullNeverEarlier: along random histories, the moment the
// sliding counter is full again (now + Full) never moves earlier, whether
// the client spent in between or not, although ResetAfter does as a
// window spends more (its count decays faster).
func TestCounterFullNeverEarlier(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 31))
	for range 2000 {
		q := 1 + rng.Int64N(50)
		p := Params{Quota: q, Capacity: q, Window: sec + rng.Int64N(60*sec)}
		var s State
		now, last := t0+rng.Int64N(p.Window), int64(0)
		for range 50 {
			now += rng.Int64N(p.Window / q * 3)
			var r Result
			s, r = decide(SlidingWindowCounter, s, now, p, rng.Int64N(q+1))
			if now+r.Full < last {
				t.Fatalf("%+v at %d: full again at %d, earlier than %d before", p, now, now+r.Full, last)
			}
			last = now + r.Full
		}
	}
}

func TestBucketRefillAndNoDrift(t *testing.T) {
	p := Params{Quota: 3, Capacity: 6, Window: sec} // 3 per second, bucket of 6
	for name, take := range map[string]algo{"token-bucket": TokenBucket, "gcra": GCRA} {
		t.Run(name, func(t *testing.T) {
			s, r := decide(take, State{}, t0, p, 6)
			if !r.Allowed || r.Remaining != 0 {
				t.Fatalf("a new bucket is full: %+v", r)
			}
			// 1/3 s per token: ceil(1e6/3) µs.
			if r.ResetAfter != 333334 {
				t.Fatalf("ResetAfter %d, want 333334", r.ResetAfter)
			}
			_, r = decide(take, s, t0+sec/2, p, 2)
			// 1.5 tokens after half a second; 0.5 more take 1/6 s.
			if r.Allowed || r.Remaining != 1 || r.RetryAfter != 166667 {
				t.Fatalf("half a second on: %+v", r)
			}
			// A year idle holds exactly the capacity.
			_, r = decide(take, s, t0+365*24*3600*sec, p, 0)
			if r.Remaining != 6 || r.ResetAfter != 0 {
				t.Fatalf("after a year: %+v", r)
			}
		})
	}
}

// TestGCRAEqualsTokenBucket plays random sequences through both and
// requires the same decisions at every step.
func TestGCRAEqualsTokenBucket(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for seq := range 300 {
		q := 1 + rng.Int64N(1000)
		w := 1000 + rng.Int64N(120*sec)
		c := q
		if rng.IntN(2) == 0 {
			c = 1 + rng.Int64N(2*q)
		}
		p := Params{Quota: q, Capacity: c, Window: w}
		var tb, gc State
		now := t0 + rng.Int64N(sec)
		for step := range 400 {
			now += rng.Int64N(2 * w / max(q, 1) * 2)
			cost := rng.Int64N(c + 1)
			var a, b Result
			tb, a = decide(TokenBucket, tb, now, p, cost)
			gc, b = decide(GCRA, gc, now, p, cost)
			a.Expires, b.Expires = 0, 0 // the states differ in form, not meaning
			if a != b {
				t.Fatalf("seq %d step %d (q=%d c=%d w=%d cost=%d): token bucket %+v, gcra %+v", seq, step, q, c, w, cost, a, b)
			}
		}
	}
}

func TestLogRetryWalksOldest(t *testing.T) {
	p := Params{Quota: 5, Capacity: 5, Window: 10 * sec}
	var l Log
	for i, n := range []int64{2, 1, 2} {
		at := t0 + int64(i)*sec
		if r := l.Take(at, p, n); !r.Allowed {
			t.Fatalf("entry %d denied", i)
		}
		l.Add(at, p, n)
	}
	// Full. Cost 3 needs the first two entries (2 + 1) to leave: at t0+1s+10s.
	r := l.Take(t0+5*sec, p, 3)
	if r.Allowed || r.RetryAfter != 6*sec || r.ResetAfter != 5*sec {
		t.Fatalf("%+v, want retry 6s reset 5s", r)
	}
	if l.Take(t0+11*sec, p, 3).Allowed != true {
		t.Fatal("cost 3 must fit once two entries left")
	}
	if l.Len() != 1 {
		t.Fatalf("log holds %d entries after pruning, want 1", l.Len())
	}
}

// TestLogPostsStopAt2p53: posts of 2^53 again and again leave the log's
// total at 2^53, still in debt, instead of wrapping it to an int64 that
// admits everything; the debt leaves with the window.
func TestLogPostsStopAt2p53(t *testing.T) {
	p := Params{Quota: 10, Capacity: 10, Window: 3600 * sec}
	var l Log
	for i := range 1030 {
		l.Add(t0+int64(i), p, maxExact)
	}
	if r := l.Take(t0+2000, p, 1); r.Allowed || r.Remaining != 0 {
		t.Fatalf("after 1,030 posts of 2^53: %+v, want refused with 0 left", r)
	}
	if l.total != maxExact || l.Len() != 1 {
		t.Fatalf("total %d in %d entries, want 2^53 in 1", l.total, l.Len())
	}
	if r := l.Take(t0+p.Window, p, 1); !r.Allowed || r.Remaining != 9 {
		t.Fatalf("a window later: %+v, want admitted with 9 left", r)
	}
}

func FuzzAlgorithmsSane(f *testing.F) {
	f.Add(int64(10), int64(1_000_000), int64(0), int64(5), int64(3), uint8(0))
	f.Fuzz(func(t *testing.T, q, w, c, cost, gap int64, alg uint8) {
		q, w = 1+abs(q)%10000, 1000+abs(w)%(3600*sec)
		if q*w > 1<<53 {
			return
		}
		p := Params{Quota: q, Capacity: q, Window: w}
		cost = abs(cost) % (q + 1)
		var s State
		now := t0 + abs(c)%sec
		for range 5 {
			var r Result
			switch alg % 5 {
			case 0:
				s, r = decide(FixedWindow, s, now, p, cost)
			case 1:
				s, r = decide(SlidingWindowCounter, s, now, p, cost)
			case 2:
				s, r = decide(TokenBucket, s, now, p, cost)
			case 3:
				s, r = decide(GCRA, s, now, p, cost)
			case 4:
				s, r = decide(AnchoredWindow, s, now, p, cost)
			}
			if r.Remaining < 0 || r.Remaining > q || r.ResetAfter < 0 || r.RetryAfter < 0 || r.Allowed == (r.RetryAfter > 0) {
				t.Fatalf("insane result %+v (q=%d w=%d cost=%d alg=%d)", r, q, w, cost, alg%5)
			}
			now += abs(gap) % (2 * w)
		}
	})
}

func abs(x int64) int64 {
	if x < 0 {
		if x == -x {
			return 0
		}
		return -x
	}
	return x
}

// algo is the shape of the state-machine algorithms.
type algo func(s *State, now int64, p Params, cost int64, r *Result)

// decide runs f on a copy of s and returns the state after it and the
// result, in the value form the tests compare.
func decide(f algo, s State, now int64, p Params, cost int64) (State, Result) {
	var r Result
	f(&s, now, p, cost, &r)
	return s, r
}

// noWorse reports whether b admits whenever a does and leaves at least as
// much (Remaining counts after the cost when admitted, before it when not).
func noWorse(a, b Result) bool {
	if a.Allowed {
		return b.Allowed && b.Remaining >= a.Remaining
	}
	return b.Allowed || b.Remaining >= a.Remaining
}

// TestGCRARaise is the reported case: {Quota: 10, Window: 20 s, Burst: 15},
// one request, then Quota 1000 a tenth of a second later.
func TestGCRARaise(t *testing.T) {
	// GCRA's TAT drained the spent unit at the old rate until the change
	// (0.95 of it is still owed); the token bucket, updated last at the
	// request, refills the whole interval at the new rate.
	old := Params{Quota: 10, Capacity: 15, Window: 20 * sec}
	for _, c := range []struct {
		name        string
		take        algo
		kept, whole int64
	}{{"token-bucket", TokenBucket, 14, 1000}, {"gcra", GCRA, 13, 999}} {
		s, _ := decide(c.take, State{}, t0, old, 1)
		_, r := decide(c.take, s, t0+sec/10, Params{Quota: 1000, Capacity: 15, Window: 20 * sec}, 1)
		if !r.Allowed || r.Remaining != c.kept {
			t.Errorf("%s, burst kept: %+v, want admitted with %d left", c.name, r, c.kept)
		}
		_, r = decide(c.take, s, t0+sec/10, Params{Quota: 1000, Capacity: 1000, Window: 20 * sec}, 0)
		if !r.Allowed || r.Remaining != c.whole {
			t.Errorf("%s, burst raised: %+v, want %d left", c.name, r, c.whole)
		}
	}
}
