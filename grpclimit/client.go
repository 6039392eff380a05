package grpclimit

import (
	"context"
	"math/rand/v2"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// UnaryClientRetry is a client interceptor that honours RetryInfo: a call
// refused with codes.ResourceExhausted or codes.Unavailable whose status
// carries a google.rpc.RetryInfo is tried again after its retry delay and
// a random jitter of up to a quarter of it, up to attempts calls
// in all, as long as the delay is at most maxWait and the call's context
// lasts. Other errors return at once. The jitter is added, never taken
// off: the delay is the earliest time the server expects the call again
// (REQUIREMENTS C4, C5), and clients refused together do not all come
// back in the same instant.
func UnaryClientRetry(attempts int, maxWait time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		for i := 1; ; i++ {
			err := invoker(ctx, method, req, reply, cc, opts...)
			d, ok := RetryDelay(err)
			if !ok || i >= attempts || d > maxWait {
				return err
			}
			t := time.NewTimer(jitter(d, rand.Float64()))
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
		}
	}
}

// jitter returns the wait before a retry after a retry delay d, for u in
// [0, 1): d plus u times a quarter of d, so in [d, 1.25 d).
func jitter(d time.Duration, u float64) time.Duration {
	return d + time.Duration(u*float64(d/4))
}

// RetryDelay returns the RetryInfo delay of a ResourceExhausted or
// Unavailable status error, and whether it has one.
func RetryDelay(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok || (st.Code() != codes.ResourceExhausted && st.Code() != codes.Unavailable) {
		return 0, false
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}
