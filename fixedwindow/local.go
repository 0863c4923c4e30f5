package fixedwindow

import (
	"context"

	"github.com/ratekit/ratelimit/internal/exact"
	"github.com/ratekit/ratelimit/internal/keys"
	"github.com/ratekit/ratelimit/internal/localstore"
	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/strategy"
)

// Local is the in-process twin of Limiter: the same decisions for the same
// clock, kept in this process only. It is safe for concurrent use. A
// subject's state is dropped when its window ends.
type Local struct {
	//lint:ignore U1000 its promoted method makes the type keys.ShardAware, which sharded checks
	shardAware
	t        localstore.Twin[counter]
	windowMs int64
}

var (
	_ strategy.Strategy        = (*Local)(nil)
	_ keys.ShardAware          = (*Local)(nil)
	_ strategy.ContextHonourer = (*Local)(nil)
)

// counter is the units counted in window idx (now / window).
type counter struct {
	idx   int64
	count int64
}

// NewLocal returns the in-process twin of New. lim.Burst is ignored. Of the
// options, only WithClock matters; the default clock is time.Now.
func NewLocal(lim strategy.Limit, opts ...strategy.Option) (*Local, error) {
	o, err := redisx.Setup(lim, opts)
	if err != nil {
		return nil, err
	}
	lim.Burst = 0
	w := lim.Window.Milliseconds()
	return &Local{t: localstore.NewTwin[counter](lim, o, w), windowMs: w}, nil
}

// Limit returns the limit the strategy enforces, with Burst 0: the
// algorithm has no burst.
func (l *Local) Limit() strategy.Limit { return l.t.Lim }

// HonoursContext returns true: the twin never waits on a network.
func (*Local) HonoursContext() bool { return true }

// AllowN counts n units for key if the units already counted in the current
// window plus n do not exceed the limit.
func (l *Local) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	return l.allowN(ctx, key, n, l.t.Lim.Limit)
}

// allowN is AllowN against limit units per window.
func (l *Local) allowN(ctx context.Context, key string, n, limit int64) (strategy.Result, error) {
	sk, now, err := l.t.Start(ctx, key, n)
	if err != nil {
		return strategy.Result{}, err
	}
	window := l.windowMs
	idx := exact.FloorDiv(now, window)
	end := (idx + 1) * window
	left := end - now
	var res strategy.Result
	l.t.Store.Do(sk, now, func(c *counter) int64 {
		var count int64
		if c.idx == idx {
			count = c.count
		}
		want := max(n, 1)
		reset := int64(0)
		if count > 0 {
			reset = left
		}
		switch {
		case want > limit:
			res = redisx.ResultOf(false, limit, max(limit-count, 0), -1, reset)
		case count+want > limit:
			res = redisx.ResultOf(false, limit, max(limit-count, 0), left, left)
		case n == 0:
			res = redisx.ResultOf(true, limit, limit-count, 0, reset)
		default:
			c.idx, c.count = idx, count+n
			res = redisx.ResultOf(true, limit, limit-count-n, 0, left)
		}
		if c.count == 0 {
			return 0
		}
		return (c.idx + 1) * window
	})
	return res, nil
}

// Peek reports key's state now without counting anything.
func (l *Local) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return l.AllowN(ctx, key, 0)
}

// Reset forgets key.
func (l *Local) Reset(ctx context.Context, key string) error { return l.t.Reset(ctx, key) }

// Subjects returns how many subjects the twin holds state for.
func (l *Local) Subjects() int { return l.t.Subjects() }
