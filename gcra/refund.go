package gcra

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/strategy"
)

//go:embed refund.lua
var refundSrc string

// refundScript moves the TAT back, then runs the decision script as a
// peek, so that the refund and its Result are one atomic script call.
var refundScript = redis.NewScript(refundSrc + scriptSrc)

var (
	_ strategy.Refunder = (*Limiter)(nil)
	_ strategy.Refunder = (*Local)(nil)
)

// RefundN gives n units back to key: its theoretical arrival time moves
// back by n emission intervals, never earlier than now, TAT = max(now,
// TAT - n × Window/Limit), so a subject never holds more than its
// capacity. (GCRA does not remember which units were spent: a refund after
// time passed gives back only what is missing.) It returns key's state
// after the refund, as Peek reports it, from one script run. n = 0 is
// Peek.
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
		l.lp, l.wp, l.capacity, 0, l.b.Now(), l.digits, l.format, l.lp, l.wp, l.window, n)
}

// RefundN gives n units back to key, as Limiter.RefundN does, and returns
// key's state after the refund, as Peek reports it.
func (l *Local) RefundN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	sk, now, err := l.t.Start(ctx, key, n)
	if err != nil {
		return strategy.Result{}, err
	}
	if l.sc.denyAll() {
		return redisx.DenyAll(ctx)
	}
	s := l.sc
	var res strategy.Result
	l.t.Store.Do(sk, now, func(v *tat) int64 {
		var expires int64
		if v.wp != 0 { // written under another limit (a tier): nothing given back
			res, expires = l.decideWith(v, s, true, l.t.Lim.Window.Milliseconds(), now, 0)
			return expires
		}
		var ahead int64 // how far v is after now, in 1/lp ms, as decide reads it
		if d := v.ms - now; d >= 0 {
			if d > s.fullMs {
				ahead = s.full
			} else {
				ahead = min(d*s.lp+v.frac, s.full)
			}
		}
		if n >= ceilDiv(ahead, s.wp) {
			*v = tat{}
		} else {
			ahead -= n * s.wp
			v.ms, v.frac = now+ahead/s.lp, ahead%s.lp
		}
		res, expires = s.decide(v, now, 0)
		return expires
	})
	return res, nil
}
