package slidinglog

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/internal/unitlog"
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
// the window, newest first: the newest entries go whole and the entry
// where the refund stops keeps its older units, so RetryAfter stays exact.
// Units that left the window are never given back, and the log never holds
// fewer than 0 units. It returns key's state after the refund, as Peek
// reports it, from one script run. n = 0 is Peek.
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
		l.b.Lim.Limit, l.windowMs, 0, l.b.Now(), n)
}

// RefundN gives back up to n of the units key recorded that are still in
// the window, newest first, as Limiter.RefundN does, and returns key's
// state after the refund, as Peek reports it.
func (l *Local) RefundN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	sk, now, err := l.t.Start(ctx, key, n)
	if err != nil {
		return strategy.Result{}, err
	}
	var res strategy.Result
	l.t.Store.Do(sk, now, func(g *unitlog.Log) int64 {
		g.Refund(now-l.windowMs, n)
		res = decide(g, l.t.Lim.Limit, l.windowMs, now, 0)
		if t, ok := g.Newest(); ok {
			return t + l.windowMs
		}
		return 0
	})
	return res, nil
}
