package slidinglog

import (
	"context"

	"github.com/ratekit/ratelimit/internal/keys"
	"github.com/ratekit/ratelimit/internal/localstore"
	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/internal/unitlog"
	"github.com/ratekit/ratelimit/strategy"
)

// Local is the in-process twin of Limiter: the same decisions for the same
// clock, kept in this process only. It is safe for concurrent use. A subject
// costs 16 bytes per allowed request in the window (whatever its cost) plus
// a small header, and is dropped once its newest entry has left the window.
// A decision never allocates in proportion to its cost n, and takes
// O(log entries) time (amortized), whichever way the clock moved.
type Local struct {
	//lint:ignore U1000 its promoted method makes the type keys.ShardAware, which sharded checks
	shardAware
	t        localstore.Twin[unitlog.Log]
	windowMs int64
}

var (
	_ strategy.Strategy        = (*Local)(nil)
	_ keys.ShardAware          = (*Local)(nil)
	_ strategy.ContextHonourer = (*Local)(nil)
)

// NewLocal returns the in-process twin of New. lim.Burst is ignored. Of the
// options, only WithClock matters; the default clock is time.Now.
func NewLocal(lim strategy.Limit, opts ...strategy.Option) (*Local, error) {
	o, err := redisx.Setup(lim, opts)
	if err != nil {
		return nil, err
	}
	lim.Burst = 0
	w := lim.Window.Milliseconds()
	return &Local{t: localstore.NewTwin[unitlog.Log](lim, o, w), windowMs: w}, nil
}

// Limit returns the limit the strategy enforces, with Burst 0: the
// algorithm has no burst.
func (l *Local) Limit() strategy.Limit { return l.t.Lim }

// HonoursContext returns true: the twin never waits on a network.
func (*Local) HonoursContext() bool { return true }

// AllowN records n units for key if the units in the window plus n do not
// exceed the limit.
func (l *Local) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	return l.allowN(ctx, key, n, l.t.Lim.Limit)
}

// allowN is AllowN against limit units per window.
func (l *Local) allowN(ctx context.Context, key string, n, limit int64) (strategy.Result, error) {
	sk, now, err := l.t.Start(ctx, key, n)
	if err != nil {
		return strategy.Result{}, err
	}
	var res strategy.Result
	l.t.Store.Do(sk, now, func(g *unitlog.Log) int64 {
		res = decide(g, limit, l.windowMs, now, n)
		if t, ok := g.Newest(); ok {
			return t + l.windowMs
		}
		return 0
	})
	return res, nil
}

// decide is one decision of the sliding log g for n units at now (the same
// steps as slidinglog.lua): the units recorded after now - window count;
// an allowed request evicts what left the window and records its n units
// at max(now, the newest entry's time).
func decide(g *unitlog.Log, limit, window, now, n int64) strategy.Result {
	floor := now - window
	count := g.Count(floor)
	want := max(n, 1)
	reset := int64(0)
	if count > 0 {
		t, _ := g.Newest()
		reset = t + window - now
	}
	switch {
	case want > limit:
		return redisx.ResultOf(false, limit, max(limit-count, 0), -1, reset)
	case count+want <= limit && n == 0:
		return redisx.ResultOf(true, limit, limit-count, 0, reset)
	case count+want <= limit:
		g.Evict(floor)
		t := g.Record(now, n)
		return redisx.ResultOf(true, limit, limit-count-n, 0, t+window-now)
	}
	// the (count + want - limit)-th oldest live unit must leave first
	return redisx.ResultOf(false, limit, max(limit-count, 0), g.Leaves(floor, count+want-limit)+window-now, reset)
}

// Peek reports key's state now without recording anything.
func (l *Local) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return l.AllowN(ctx, key, 0)
}

// Reset forgets key.
func (l *Local) Reset(ctx context.Context, key string) error { return l.t.Reset(ctx, key) }

// Subjects returns how many subjects the twin holds state for.
func (l *Local) Subjects() int { return l.t.Subjects() }
