package tokenbucket

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/strategy"
)

//go:embed refund.lua
var refundSrc string

// refundScript gives tokens back, then runs the decision script as a peek,
// so that the refund and its Result are one atomic script call.
var refundScript = redis.NewScript(refundSrc + scriptSrc)

var (
	_ strategy.Refunder = (*Limiter)(nil)
	_ strategy.Refunder = (*Local)(nil)
)

// RefundN puts n tokens back into key's bucket, refilled to now first:
// tokens = min(capacity, tokens + n), so a bucket never holds more than
// its capacity. (A bucket does not remember which tokens were spent: a
// refund after the bucket refilled gives back only what is missing.) It
// returns key's state after the refund, as Peek reports it, from one
// script run. n = 0 is Peek.
func (l *Limiter) RefundN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	k, err := l.b.KeyN(ctx, key, n)
	if err != nil {
		return strategy.Result{}, err
	}
	if l.sc.denyAll() {
		return redisx.DenyAll(ctx)
	}
	s := refundScript
	if n == 0 {
		s = script
	}
	return redisx.Decision(ctx, l.b.RDB, s, k, l.sc.capacity,
		l.lp, l.wp, l.capacity, 0, l.b.Now(), l.lp, l.wp, l.capacity, l.window, n)
}

// RefundN puts n tokens back into key's bucket, as Limiter.RefundN does,
// and returns key's state after the refund, as Peek reports it.
func (l *Local) RefundN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	sk, now, err := l.t.Start(ctx, key, n)
	if err != nil {
		return strategy.Result{}, err
	}
	if l.sc.denyAll() {
		return redisx.DenyAll(ctx)
	}
	var res strategy.Result
	l.t.Store.Do(sk, now, func(b *bucket) int64 {
		var expires int64
		if b.wp != 0 { // written under another limit (a tier): nothing given back
			res, expires = l.decideWith(b, l.sc, true, l.t.Lim.Window.Milliseconds(), now, 0)
			return expires
		}
		l.sc.decide(b, now, 0) // refill to now
		if n >= ceilDiv(b.deficit, l.sc.wp) {
			b.deficit = 0
		} else {
			b.deficit -= n * l.sc.wp
		}
		res, expires = l.sc.decide(b, now, 0)
		return expires
	})
	return res, nil
}
