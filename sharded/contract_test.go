package sharded

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekit/ratelimit/internal/conformance"
	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/slidinglog"
	"github.com/ratekit/ratelimit/strategy"
	"github.com/ratekit/ratelimit/tokenbucket"
)

// peeks counts the Peeks that reach the wrapped strategy.
type peeks struct {
	strategy.Strategy
	n *atomic.Int64
}

// Shard counts the Peeks of the wrapped strategy's shard view.
func (p peeks) Shard(i int) strategy.Strategy {
	return peeks{p.Strategy.(engine.Sharder).Shard(i), p.n}
}

func (p peeks) Peek(ctx context.Context, key string) (strategy.Result, error) {
	p.n.Add(1)
	return p.Strategy.Peek(ctx, key)
}

// TestCapacityFromTheContract: the shards' capacities come from their
// strategies' Limit(), so AllowN never reads a shard to find them out, and
// the subject's Result.Limit and Limit() agree from the first decision.
func TestCapacityFromTheContract(t *testing.T) {
	clock := conformance.NewClock(conformance.Epoch)
	for _, c := range []struct {
		name  string
		lim   strategy.Limit
		build func(strategy.Limit) (strategy.Strategy, error)
		want  strategy.Limit // Limit()
	}{
		{"token bucket, burst above limit", strategy.Limit{Limit: 10, Window: time.Second, Burst: 30}, func(l strategy.Limit) (strategy.Strategy, error) {
			return tokenbucket.NewLocal(l, strategy.WithClock(clock))
		}, strategy.Limit{Limit: 10, Window: time.Second, Burst: 30}},
		// shard 0 holds 1 unit of Limit and 2 of Burst, the others 1 and 1:
		// a decision on shard 1 cannot tell Limit from Burst by its Result
		{"token bucket, shares that do not tell", strategy.Limit{Limit: 10, Window: time.Second, Burst: 11}, func(l strategy.Limit) (strategy.Strategy, error) {
			return tokenbucket.NewLocal(l, strategy.WithClock(clock))
		}, strategy.Limit{Limit: 10, Window: time.Second, Burst: 11}},
		{"sliding log, burst ignored", strategy.Limit{Limit: 12, Window: time.Second, Burst: 30}, func(l strategy.Limit) (strategy.Strategy, error) {
			return slidinglog.NewLocal(l, strategy.WithClock(clock))
		}, strategy.Limit{Limit: 12, Window: time.Second}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var n atomic.Int64
			l := mustNew(t, 10, c.lim, func(sl strategy.Limit) (strategy.Strategy, error) {
				st, err := c.build(sl)
				return peeks{st, &n}, err
			})
			for i := range l.rr {
				l.rr[i].Store(0) // the first pick is shard 1
			}
			if got := l.Limit(); got != c.want {
				t.Errorf("Limit() = %v, want %v", got, c.want)
			}
			r, err := l.AllowN(context.Background(), "k", 1)
			if err != nil {
				t.Fatal(err)
			}
			if got := n.Load(); got != 0 {
				t.Errorf("AllowN made %d Peeks of a shard, want 0", got)
			}
			if r.Limit != c.want.Capacity() {
				t.Errorf("AllowN: Result.Limit = %d, want Limit().Capacity() = %d", r.Limit, c.want.Capacity())
			}
		})
	}
}
