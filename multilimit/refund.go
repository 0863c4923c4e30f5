package multilimit

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/localstore"
	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/internal/unitlog"
	"github.com/ratekit/ratelimit/strategy"
)

//go:embed refund.lua
var refundSrc string

// refundScript gives units back under every rule, then runs the decision
// script as a peek, so that the refund and its Result are one atomic
// script call.
var refundScript = redis.NewScript(unitlog.RefundLua + refundSrc + scriptSrc)

var (
	_ strategy.Refunder = (*Limiter)(nil)
	_ strategy.Refunder = (*Local)(nil)
)

// RefundN gives back up to n units under every rule, each by its own
// rule: a sliding log rule its newest units still in its window (the
// newest entries go, so its RetryAfter stays exact), a fixed window rule
// its current window's count, down to 0. A rule never gets back units
// that left its window: after a refund a rule may hold fewer units back
// than another. It returns key's state after the refund, as Peek reports
// it, from one script run. n = 0 is Peek.
func (l *Limiter) RefundN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	r, _, err := l.RefundNEach(ctx, key, n)
	return r, err
}

// RefundNEach is RefundN that also returns each rule's Result after the
// refund, in rule order.
func (l *Limiter) RefundNEach(ctx context.Context, key string, n int64) (strategy.Result, []strategy.Result, error) {
	if err := strategy.ValidateKey(key); err != nil {
		return strategy.Result{}, nil, err
	}
	if err := strategy.ValidateCost(n); err != nil {
		return strategy.Result{}, nil, err
	}
	s := refundScript
	if n == 0 {
		s = script
	}
	args := make([]any, 0, 3+len(l.args))
	args = append(args, 0, redisx.NowArg(l.opts.Clock))
	args = append(args, l.args...)
	args = append(args, n)
	v := make([]int64, 1+3*len(l.rules))
	if err := redisx.Run(ctx, l.rdb, s, l.Keys(key), v, args...); err != nil {
		return strategy.Result{}, nil, err
	}
	each := make([]strategy.Result, len(l.rules))
	for i, r := range l.rules {
		rem, retry, reset := v[1+3*i], v[2+3*i], v[3+3*i]
		each[i] = redisx.ResultOf(retry == 0, r.limit, rem, retry, reset)
	}
	return combine(v[0] == 1, each), each, nil
}

// RefundN gives back up to n units under every rule, as Limiter.RefundN
// does, and returns key's state after the refund, as Peek reports it.
func (l *Local) RefundN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	r, _, err := l.RefundNEach(ctx, key, n)
	return r, err
}

// RefundNEach is RefundN that also returns each rule's Result after the
// refund, in rule order.
func (l *Local) RefundNEach(ctx context.Context, key string, n int64) (strategy.Result, []strategy.Result, error) {
	if err := strategy.ValidateKey(key); err != nil {
		return strategy.Result{}, nil, err
	}
	if err := strategy.ValidateCost(n); err != nil {
		return strategy.Result{}, nil, err
	}
	if err := ctx.Err(); err != nil {
		return strategy.Result{}, nil, fmt.Errorf("%w: %w", strategy.ErrBackend, err)
	}
	now := l.clock.Now().UnixMilli()
	each := make([]strategy.Result, len(l.rules))
	allowed := true
	l.store.Do(localstore.Key{Subject: key, Shard: strategy.NoShard}, now, func(s *state) int64 {
		if s.rules == nil {
			s.rules = make([]ruleState, len(l.rules))
		}
		var expires int64
		for i, r := range l.rules {
			rs := &s.rules[i]
			// give back, then what a peek (one unit) reports
			var count, retry, reset int64
			if r.kind == kindSlidingLog {
				floor := now - r.windowMs
				rs.log.Refund(floor, n)
				count = rs.log.Count(floor)
				if t, ok := rs.log.Newest(); ok {
					if count > 0 {
						reset = t + r.windowMs - now
					}
					expires = max(expires, t+r.windowMs)
				}
				switch {
				case r.limit < 1:
					retry = -1
				case count+1 > r.limit:
					retry = rs.log.Leaves(floor, count+1-r.limit) + r.windowMs - now
				}
			} else {
				start := windowStart(now, r.windowMs)
				if rs.start == start {
					rs.count -= min(n, rs.count)
					count = rs.count
				}
				if count > 0 {
					reset = start + r.windowMs - now
				}
				switch {
				case r.limit < 1:
					retry = -1
				case count+1 > r.limit:
					retry = start + r.windowMs - now
				}
				if rs.count > 0 {
					expires = max(expires, rs.start+r.windowMs)
				}
			}
			if retry != 0 {
				allowed = false
			}
			each[i] = redisx.ResultOf(retry == 0, r.limit, max(r.limit-count, 0), retry, reset)
		}
		return expires
	})
	return combine(allowed, each), each, nil
}
