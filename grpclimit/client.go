package grpclimit

import (
	"context"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// UnaryClientRetry is a client interceptor that honours RetryInfo: a call
// refused with codes.ResourceExhausted or codes.Unavailable whose status
// carries a google.rpc.RetryInfo is tried again after its retry delay, up
// to attempts calls in all, as long as the delay is at most maxWait and
// the call's context lasts. Other errors return at once.
func UnaryClientRetry(attempts int, maxWait time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		for i := 1; ; i++ {
			err := invoker(ctx, method, req, reply, cc, opts...)
			d, ok := RetryDelay(err)
			if !ok || i >= attempts || d > maxWait {
				return err
			}
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
		}
	}
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
