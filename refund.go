package ratelimit

import (
	"context"
	"fmt"

	"github.com/ratekit/ratelimit/internal/guard"
	"github.com/ratekit/ratelimit/strategy"
)

// RefundN gives back up to n units that key spent and that still count,
// never above the capacity (see strategy.Refunder), and returns key's state
// after it, as Peek would. It has no failure policy: when Redis fails it
// returns an error wrapping strategy.ErrBackend.
func (l *Limiter) RefundN(ctx context.Context, key string, n int64) (Result, error) {
	return l.decide(ctx, guard.Call{Op: guard.Refund, Key: key, N: n})
}

func (l *Limiter) refund(ctx context.Context, key string, n int64) (Result, error) {
	if _, ok := l.st.(strategy.Refunder); !ok {
		return Result{}, fmt.Errorf("%w: RefundN: the strategy cannot refund (it does not implement strategy.Refunder)", strategy.ErrInvalidOption)
	}
	if err := validate(key, n); err != nil {
		return Result{}, err
	}
	c := guard.Call{Op: guard.Refund, Key: key, N: n}
	f := l.fail
	if f != nil && f.local != nil {
		if _, ok := f.local.(strategy.Refunder); ok {
			guard.Do(context.WithoutCancel(ctx), f.local, c)
		}
	}
	if f != nil && f.deny != nil {
		f.deny.Invalidate(key)
		defer f.deny.Invalidate(key) // and a denial that arrives after the refund
	}
	r, err := l.call(ctx, c)
	if err != nil || l.tier == "" {
		return r, err
	}
	// the strategy reports the state under its own limit
	r, err = l.call(ctx, guard.Call{Op: guard.Peek, Key: key, Lim: l.lim})
	if err != nil {
		return Result{}, fmt.Errorf("%w (the units were given back; the tier's state could not be read)", err)
	}
	return r, nil
}
