package lease

import (
	"context"

	"github.com/ratekit/ratelimit/strategy"
)

// AllowAt is AllowN that also returns when the decision was made (Unix ns
// on the limiter's clock): the time the lease read, or the reply's.
func (l *Limiter) AllowAt(ctx context.Context, key string, n int64) (strategy.Result, int64, error) {
	return l.allow(ctx, key, n)
}

// WaitRefunds waits for the refunds of the sweeps that started.
func (l *Limiter) WaitRefunds() { l.refunds.Wait() }
