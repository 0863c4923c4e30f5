package fixedwindow

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/exact"
	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/strategy"
)

//go:embed refund.lua
var refundSrc string

// refundScript gives units back, then runs the decision script as a peek,
// so that the refund and its Result are one atomic script call.
var refundScript = redis.NewScript(refundSrc + scriptSrc)

var (
	_ strategy.Refunder = (*Limiter)(nil)
	_ strategy.Refunder = (*Local)(nil)
)

// RefundN gives back up to n units to key's current window: its count
// drops by min(n, count). Units counted in an earlier window are not
// given back (they no longer count). It returns key's state after the
// refund, as Peek reports it, from one script run. n = 0 is Peek.
func (l *Limiter) RefundN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	k, err := l.b.KeyN(ctx, key, n)
	if err != nil {
		return strategy.Result{}, err
	}
	s := refundScript
	if n == 0 {
		s = script
	}
	return redisx.Decision(ctx, l.b.RDB, s, k, l.b.Lim.Limit,
		l.limitArg, l.windowArg, 0, l.b.Now(), n)
}

// RefundN gives back up to n units to key's current window, as
// Limiter.RefundN does, and returns key's state after the refund, as Peek
// reports it.
func (l *Local) RefundN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	sk, now, err := l.t.Start(ctx, key, n)
	if err != nil {
		return strategy.Result{}, err
	}
	limit, window := l.t.Lim.Limit, l.windowMs
	idx := exact.FloorDiv(now, window)
	left := (idx+1)*window - now
	var res strategy.Result
	l.t.Store.Do(sk, now, func(c *counter) int64 {
		if c.idx == idx {
			c.count -= min(n, c.count)
		}
		res = peek(c, idx, limit, left)
		if c.count == 0 {
			return 0
		}
		return (c.idx + 1) * window
	})
	return res, nil
}

// peek is the decision script's peek (AllowN with n = 0) on c in window
// idx, left ms before the window ends.
func peek(c *counter, idx, limit, left int64) strategy.Result {
	var count, reset int64
	if c.idx == idx {
		count = c.count
	}
	if count > 0 {
		reset = left
	}
	switch {
	case limit < 1:
		return redisx.ResultOf(false, limit, max(limit-count, 0), -1, reset)
	case count+1 > limit:
		return redisx.ResultOf(false, limit, max(limit-count, 0), left, left)
	}
	return redisx.ResultOf(true, limit, limit-count, 0, reset)
}
