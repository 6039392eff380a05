package ctxend

import (
	"context"
	"errors"
	"testing"
	"time"
)

// late is a context whose deadline has passed while its timer has not yet
// fired: Err is still nil.
type late struct{ context.Context }

func (late) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

func TestErr(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	live, stop := context.WithTimeout(context.Background(), time.Hour)
	defer stop()
	for name, c := range map[string]struct {
		ctx  context.Context
		want error
	}{
		"no deadline":           {context.Background(), nil},
		"deadline ahead":        {live, nil},
		"cancelled":             {cancelled, context.Canceled},
		"deadline passed, late": {late{context.Background()}, context.DeadlineExceeded},
	} {
		if got := Err(c.ctx); !errors.Is(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("%s: Err = %v, want %v", name, got, c.want)
		}
	}
}
