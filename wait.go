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

// WaitN blocks until key may spend n units, spends them, and returns that
// decision's Result. Between tries, each one AllowN, it sleeps the
// denial's RetryAfter plus a jitter of up to an eighth. It returns at once
// an invalid input's or a failed try's error, one wrapping
// strategy.ErrInvalidCost when n can never pass, one wrapping
// context.DeadlineExceeded when RetryAfter would pass ctx's deadline, and
// one wrapping ctx.Err() when ctx ends.
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
