package slidingcounter

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
// drops by min(n, count). The previous window's count is not touched: its
// units only weigh a share of the estimate, and a request refunded after
// the window changed gives back nothing, though its units still weigh. So
// a refund never gives back more than was spent, and may give back less.
// It returns key's state after the refund, as Peek reports it, from one
// script run. n = 0 is Peek.
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
	w := l.windowMs
	idx := exact.FloorDiv(now, w)
	var res strategy.Result
	l.t.Store.Do(sk, now, func(s *counts) int64 {
		if s.idx == idx {
			s.curr -= min(n, s.curr)
		}
		res = peek(s, l.t.Lim.Limit, w, idx, now-idx*w)
		switch {
		case s.curr > 0:
			return (s.idx + 2) * w
		case s.prev > 0:
			return (s.idx + 1) * w
		}
		return 0
	})
	return res, nil
}

// peek is the decision script's peek (AllowN with n = 0) on s in window
// idx of w ms, elapsed ms into it.
func peek(s *counts, limit, w, idx, elapsed int64) strategy.Result {
	var curr, prev int64
	switch s.idx {
	case idx:
		curr, prev = s.curr, s.prev
	case idx - 1:
		prev = s.curr
	}
	curr, prev = min(curr, limit), min(prev, limit)
	used := curr + (prev*(w-elapsed)+w-1)/w
	var reset int64
	switch {
	case curr > 0:
		reset = 2*w - elapsed
	case prev > 0:
		reset = w - elapsed
	}
	switch {
	case limit < 1:
		return redisx.ResultOf(false, limit, max(limit-used, 0), -1, reset)
	case used+1 <= limit:
		return redisx.ResultOf(true, limit, limit-used, 0, reset)
	}
	var retry int64
	if r := limit - curr - 1; r >= 0 {
		retry = w - r*w/prev - elapsed
	} else {
		retry = 2*w - (limit-1)*w/curr - elapsed
	}
	return redisx.ResultOf(false, limit, max(limit-used, 0), retry, reset)
}
