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

// RetryAfter returns the retry delay of a gRPC status error's
// google.rpc.RetryInfo detail, as a client receives it; false when err is
// no status error or carries no valid RetryInfo.
func RetryAfter(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.OK {
		return 0, false
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().IsValid() {
			return max(ri.GetRetryDelay().AsDuration(), 0), true
		}
	}
	return 0, false
}

// RetryUnary returns a client interceptor that retries a call refused with
// code ResourceExhausted or Unavailable and a RetryInfo detail (as the
// interceptors of this package refuse), after waiting the retry delay plus
// a jitter of up to an eighth of it, so that callers refused together do not
// all come back at once. It retries at most maxRetries times, and returns
// the refusal at once when its delay is longer than maxWait or would pass
// the call's deadline, since waiting could not help; ctx ending while it
// waits ends the call with ctx's status. Calls refused with any other error
// are not retried. maxRetries <= 0 or maxWait <= 0 turn retrying off.
//
// Retrying is safe for the refusals of this package's interceptors, which
// come before the handler runs; a server that sends RetryInfo after doing
// part of the work should be retried only for idempotent methods.
func RetryUnary(maxRetries int, maxWait time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		for try := 0; ; try++ {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if err == nil || try >= maxRetries {
				return err
			}
			if c := status.Code(err); c != codes.ResourceExhausted && c != codes.Unavailable {
				return err
			}
			d, ok := RetryAfter(err)
			if !ok || d > maxWait {
				return err
			}
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
				return err
			}
			if d >= 8 {
				d += rand.N(d/8 + 1)
			}
			if dl, ok := ctx.Deadline(); ok {
				d = min(d, time.Until(dl)) // the jitter never makes a possible wait fail
			}
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return status.FromContextError(ctx.Err()).Err()
			}
		}
	}
}
