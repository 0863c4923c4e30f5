package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/ratekit/ratelimit/internal/guard"
	"github.com/ratekit/ratelimit/strategy"
)

// opRefund names a refund in Decision.Op.
const opRefund = "refund"

// RefundN gives back up to n units that key spent and that still count, for
// a request charged up front whose work failed, and returns key's state
// after it, as Peek would. It never lifts a subject above its capacity nor
// gives back units that were not spent; what exactly is given back is the
// algorithm's (the sliding log removes the newest units' entries; see
// strategy.Refunder). It fails with an error wrapping
// strategy.ErrInvalidOption when the strategy cannot refund.
//
// Like Reset it has no failure policy: when Redis fails, or the breaker is
// open, it returns an error wrapping strategy.ErrBackend and nothing is
// given back in Redis. Under FailLocal the units are given back to the
// local twin too, which may hold units spent during an outage. A cached
// denial of key is forgotten, since the refund may let it pass.
//
// On a tier's Limiter (see Tier) the state returned is the tier's, as its
// Peek reports it: the strategy gives the units back (what it gives back
// does not depend on the limit), then a Peek under the tier's limit reads
// the state, a second call to the strategy, so a decision made in between
// may show in it. When that Peek fails, the units were given back and the
// error says so.
func (l *Limiter) RefundN(ctx context.Context, key string, n int64) (Result, error) {
	var start time.Time
	if l.obs != nil {
		start = time.Now()
	}
	r, err := l.refund(ctx, key, n)
	if l.obs != nil {
		l.report(ctx, opRefund, n, r, err, outcome{}, start)
	}
	return r, err
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

// call makes c on the strategy, through the timeout and breaker when l has
// them, without a failure policy.
func (l *Limiter) call(ctx context.Context, c guard.Call) (Result, error) {
	f := l.fail
	if f == nil {
		return guard.Do(ctx, l.st, c)
	}
	ok, probe := f.breaker.Allow()
	if !ok {
		return Result{}, errBreakerOpen
	}
	r, err := f.guard.Call(ctx, l.st, c)
	f.breaker.Record(probe, classify(ctx, err))
	return r, err
}
