package compactlog

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"

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

// RefundN gives back up to n of the units key recorded that are still in
// the window, newest first: the newest slots of the ring go, so the log
// stays exact (its decisions are the sliding log's after the same refund).
// Units that left the window are never given back. It returns key's state
// after the refund, as Peek reports it, from one script run. n = 0 is
// Peek.
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
		l.b.Lim.Limit, l.windowMs, 0, l.width, l.b.Now(), l.ranges, n)
}

// RefundN gives back up to n of the units key recorded that are still in
// the window, newest first, as Limiter.RefundN does, and returns key's
// state after the refund, as Peek reports it.
func (l *Local) RefundN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	sk, now, err := l.t.Start(ctx, key, n)
	if err != nil {
		return strategy.Result{}, err
	}
	limit, window := l.t.Lim.Limit, l.windowMs
	floor := now - window
	var res strategy.Result
	l.t.Store.Do(sk, now, func(g *runs) int64 {
		g.refund(floor, n)
		first, stale := g.stale(floor)
		live := g.units - stale
		reset := int64(0)
		if live > 0 {
			reset = g.newest() + window - now
		}
		switch {
		case limit < 1:
			res = redisx.ResultOf(false, limit, max(limit-live, 0), -1, reset)
		case live+1 <= limit:
			res = redisx.ResultOf(true, limit, limit-live, 0, reset)
		default: // the (live+1-limit)-th oldest live unit must leave
			res = redisx.ResultOf(false, limit, max(limit-live, 0), g.kth(first, live+1-limit)+window-now, reset)
		}
		if g.len == 0 {
			return 0
		}
		return g.newest() + window
	})
	return res, nil
}

// refund drops up to r of the newest units recorded after floor.
func (g *runs) refund(floor, r int64) {
	for r > 0 && g.len > 0 {
		last := g.at(g.len - 1)
		if last.at <= floor {
			return
		}
		k := min(r, last.n)
		last.n -= k
		g.units -= k
		r -= k
		if last.n == 0 {
			g.len--
		}
	}
	if g.len == 0 {
		g.head = 0
	}
}
