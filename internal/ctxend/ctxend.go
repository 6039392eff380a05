// Package ctxend tells whether a caller's context has ended, counting a
// deadline that has passed before the context's own timer says so.
package ctxend

import (
	"context"
	"time"
)

// Err is ctx.Err(), or context.DeadlineExceeded when ctx's deadline has
// passed though ctx.Err() is still nil. A socket deadline taken from the
// context (go-redis with ContextTimeoutEnabled) can fail a store call a
// moment before the context's timer marks it done; that failure is the
// caller running out of time, not the store failing, and must count as
// neither a store error nor a breaker failure.
func Err(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}
