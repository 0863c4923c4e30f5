package sharded

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/strategy"
)

var _ strategy.Refunder = (*Limiter)(nil)

// RefundN gives back up to n units of key across its shards. The wrapper
// does not know which shard recorded which request (round robin spread
// them), so it reads every shard first (one pipeline, as Peek), takes
// each shard's spent units as its capacity minus its Remaining, and gives
// back to the most spent shards first, to each at most what it spent,
// until n units are placed: each shard then gives back by the wrapped
// algorithm's own rule (see its RefundN), never above that shard's
// capacity. So the subject never gets back more than n units nor more
// than it spent; it may get back less when a shard's algorithm holds back
// part of what it reports spent (a sliding counter's previous window).
// The read and the refunds are separate calls: a decision on the subject
// may come between them, as between any two calls of a sharded subject;
// every shard's refund stays within its capacity whatever happens.
//
// Round trips: one pipeline to read, then, with the strategies of this
// module on Redis, one pipeline of the refunds (one script call per shard
// given units, usually one or two, with other strategies). It returns the subject's state after the
// refund, as Peek reports it (the shards refunded report their own state
// after their refund). n = 0 is Peek. Every shard must implement
// strategy.Refunder (every strategy of this module does); otherwise the
// error wraps strategy.ErrNoRefund and nothing is touched.
func (l *Limiter) RefundN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	if err := strategy.ValidateKey(key); err != nil {
		return strategy.Result{}, err
	}
	if err := strategy.ValidateCost(n); err != nil {
		return strategy.Result{}, err
	}
	rfs := make([]strategy.Refunder, len(l.st))
	for i, st := range l.st {
		rf, ok := st.(strategy.Refunder)
		if !ok {
			return strategy.Result{}, fmt.Errorf("%w: shard %d is a %T", strategy.ErrNoRefund, i, st)
		}
		rfs[i] = rf
	}
	if n == 0 {
		return l.Peek(ctx, key)
	}
	res := make([]strategy.Result, len(l.st))
	if err := l.all(ctx, key, res); err != nil {
		return strategy.Result{}, err
	}
	// the most spent shards first; ties by index, so the order is stable
	order := make([]int, len(l.st))
	for i := range order {
		order[i] = i
	}
	spent := func(i int) int64 { return max(res[i].Limit-res[i].Remaining, 0) }
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(spent(b), spent(a)) })
	gives := make([]int64, len(l.st))
	left := n
	for _, i := range order {
		if gives[i] = min(left, spent(i)); gives[i] == 0 {
			break
		}
		left -= gives[i]
	}
	// the refunds of shards on Redis in one pipeline per client, the
	// others' one by one
	planned := make([]*engine.Call, len(l.st))
	for i, g := range gives {
		if p, ok := l.st[i].(engine.Planner); ok && l.view[i] && g > 0 {
			c, err := p.Plan(engine.Req{Op: engine.OpRefund, Key: key, N: g})
			if err != nil {
				return strategy.Result{}, err
			}
			planned[i] = &c
		}
	}
	l.execPlanned(ctx, planned)
	for _, i := range order {
		if gives[i] == 0 {
			break
		}
		if c := planned[i]; c != nil {
			if c.Err != nil {
				return strategy.Result{}, c.Err
			}
			res[i] = c.Result
			continue
		}
		r, err := l.call(ctx, i, key, func(_ strategy.Strategy, ctx context.Context, key string) (strategy.Result, error) {
			return rfs[i].RefundN(ctx, key, gives[i])
		})
		if err != nil {
			return strategy.Result{}, err
		}
		res[i] = r
	}
	out := l.combine(order, reorder(res, order))
	if out.Allowed {
		out.RetryAfter = 0
	}
	return out, nil
}

// reorder returns res in the order of the shard indexes in order.
func reorder(res []strategy.Result, order []int) []strategy.Result {
	out := make([]strategy.Result, len(order))
	for j, i := range order {
		out[j] = res[i]
	}
	return out
}
