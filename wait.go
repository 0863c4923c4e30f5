package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

// minWaitSleep is the shortest sleep between two tries of WaitN, so that a
// denial without a RetryAfter (a degraded decision, say) cannot make WaitN
// spin on the backend.
const minWaitSleep = time.Millisecond

// Wait is WaitN(ctx, key, 1).
func (l *Limiter) Wait(ctx context.Context, key string) (Result, error) {
	return l.WaitN(ctx, key, 1)
}

// WaitN blocks until key may spend n units, spends them, and returns the
// Result of that allowed decision: for clients of rate-limited APIs, which
// would rather wait than be denied.
//
// Between tries it sleeps the denial's RetryAfter plus a jitter drawn
// uniformly from [0, RetryAfter/8] (at least 1ms in all), so that waiters
// denied together do not all retry in the same instant; it never sleeps
// less than RetryAfter, which is the earliest a retry can pass. Each try is
// one AllowN, so waiters of several processes compete fairly through Redis
// and nothing is reserved while sleeping: a waiter may be overtaken and
// sleep again.
//
// When Redis fails, each try is decided by the Limiter's FailurePolicy and
// marked Result.Degraded: under FailOpen WaitN passes at once, under
// FailClosed it sleeps until Redis is next tried, under FailLocal it waits
// for the local twin.
//
// WaitN returns at once:
//   - with the error of an invalid key or n, or of a failed try;
//   - with an error wrapping strategy.ErrInvalidCost when the denial's
//     RetryAfter is Never: n exceeds the capacity and can never pass;
//   - with an error wrapping context.DeadlineExceeded when ctx's deadline
//     comes before RetryAfter ends, since the wait could not succeed;
//   - with an error wrapping ctx.Err() when ctx has ended, before a try or
//     while sleeping.
//
// With n = 0 it does not wait: it returns AllowN(ctx, key, 0) (see Peek).
// Each error comes with the Result of the last try. Sleeping uses the local
// clock; RetryAfter comes from the limiter's clock (Redis TIME by default).
func (l *Limiter) WaitN(ctx context.Context, key string, n int64) (Result, error) {
	return l.waitN(ctx, key, n, sleepCtx, jitter)
}

// jitter returns a duration drawn uniformly from [0, d/8].
func jitter(d time.Duration) time.Duration {
	if d < 8 {
		return 0
	}
	return rand.N(d/8 + 1)
}

// sleepCtx sleeps d or until ctx ends, whichever is first, and returns
// ctx.Err() in the second case.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitN is WaitN with the sleep and the jitter given, for tests that drive a
// manual clock.
func (l *Limiter) waitN(ctx context.Context, key string, n int64,
	sleep func(context.Context, time.Duration) error, jitter func(time.Duration) time.Duration) (Result, error) {
	var r Result
	for {
		// A try on an ended ctx would be a degraded decision, not a wait.
		if err := ctx.Err(); err != nil {
			return r, fmt.Errorf("ratelimit: WaitN: %w", err)
		}
		var err error
		r, err = l.AllowN(ctx, key, n)
		if err != nil || r.Allowed || n == 0 {
			return r, err
		}
		if r.RetryAfter == strategy.Never {
			return r, fmt.Errorf("%w: WaitN: n = %d exceeds the capacity %d, so it can never pass", strategy.ErrInvalidCost, n, r.Limit)
		}
		d := max(r.RetryAfter, 0)
		d += jitter(d)
		d = max(d, minWaitSleep)
		if dl, ok := ctx.Deadline(); ok {
			left := time.Until(dl)
			if r.RetryAfter > left {
				return r, fmt.Errorf("ratelimit: WaitN: retry after %s would pass the context deadline: %w", r.RetryAfter, context.DeadlineExceeded)
			}
			d = min(d, max(left, minWaitSleep)) // the jitter never makes a possible wait fail
		}
		if err := sleep(ctx, d); err != nil {
			return r, fmt.Errorf("ratelimit: WaitN: %w", err)
		}
	}
}
