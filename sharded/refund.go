package sharded

import (
	"cmp"
	"context"
	"fmt"
	"slices"

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
// Round trips: one pipeline to read, then one script call per shard given
// units (usually one or two). It returns the subject's state after the
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
	left := n
	for _, i := range order {
		g := min(left, spent(i))
		if g == 0 {
			break
		}
		r, err := l.call(ctx, i, key, func(_ strategy.Strategy, ctx context.Context, key string) (strategy.Result, error) {
			return rfs[i].RefundN(ctx, key, g)
		})
		if err != nil {
			return strategy.Result{}, err
		}
		res[i] = r
		left -= g
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
