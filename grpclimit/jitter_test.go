package grpclimit

import (
	"testing"
	"time"
)

// TestJitter: a retry waits the delay and up to a quarter more, never
// less, spread by u.
func TestJitter(t *testing.T) {
	d := 2 * time.Second
	for _, c := range []struct {
		u    float64
		want time.Duration
	}{{0, d}, {0.5, d + 250*time.Millisecond}, {0.999, d + 499500*time.Microsecond}} {
		if got := jitter(d, c.u); got != c.want {
			t.Errorf("jitter(%v, %v) = %v, want %v", d, c.u, got, c.want)
		}
	}
	if got := jitter(0, 0.7); got != 0 {
		t.Errorf("jitter(0) = %v", got)
	}
}
