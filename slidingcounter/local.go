package slidingcounter

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
// subject's state is dropped when the window after its last recorded one
// ends.
type Local struct {
	//lint:ignore U1000 its promoted method makes the type keys.ShardAware, which sharded checks
	shardAware
	t        localstore.Twin[counts]
	windowMs int64
}

var (
	_ strategy.Strategy        = (*Local)(nil)
	_ keys.ShardAware          = (*Local)(nil)
	_ strategy.ContextHonourer = (*Local)(nil)
)

// counts holds the units recorded in window idx (now / window) and in the
// window before it.
type counts struct {
	idx  int64
	curr int64
	prev int64
}

// NewLocal returns the in-process twin of New. lim.Burst is ignored. Of the
// options, only WithClock matters; the default clock is time.Now. It fails
// as New does.
func NewLocal(lim strategy.Limit, opts ...strategy.Option) (*Local, error) {
	o, err := redisx.Setup(lim, opts, checkProduct)
	if err != nil {
		return nil, err
	}
	lim.Burst = 0
	w := lim.Window.Milliseconds()
	return &Local{t: localstore.NewTwin[counts](lim, o, w), windowMs: w}, nil
}

// Limit returns the limit the strategy enforces, with Burst 0: the
// algorithm has no burst.
func (l *Local) Limit() strategy.Limit { return l.t.Lim }

// HonoursContext returns true: the twin never waits on a network.
func (*Local) HonoursContext() bool { return true }

// AllowN records n units for key if the estimated units in the sliding
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
	w := l.windowMs
	idx := exact.FloorDiv(now, w)
	elapsed := now - idx*w
	var res strategy.Result
	l.t.Store.Do(sk, now, func(s *counts) int64 {
		var curr, prev int64
		switch s.idx {
		case idx:
			curr, prev = s.curr, s.prev
		case idx - 1:
			prev = s.curr
		}
		rawPrev := prev // kept as it is: a later call may have a higher limit
		curr, prev = min(curr, limit), min(prev, limit)
		used := curr + (prev*(w-elapsed)+w-1)/w
		var reset int64
		switch {
		case curr > 0:
			reset = 2*w - elapsed
		case prev > 0:
			reset = w - elapsed
		}
		want := max(n, 1)
		switch {
		case want > limit:
			res = redisx.ResultOf(false, limit, max(limit-used, 0), -1, reset)
		case used+want <= limit && n == 0:
			res = redisx.ResultOf(true, limit, limit-used, 0, reset)
		case used+want <= limit:
			*s = counts{idx: idx, curr: curr + n, prev: rawPrev}
			res = redisx.ResultOf(true, limit, limit-used-n, 0, 2*w-elapsed)
		default:
			var retry int64
			if r := limit - curr - want; r >= 0 {
				retry = w - r*w/prev - elapsed
			} else {
				retry = 2*w - (limit-want)*w/curr - elapsed
			}
			res = redisx.ResultOf(false, limit, max(limit-used, 0), retry, reset)
		}
		switch {
		case s.curr > 0:
			return (s.idx + 2) * w
		case s.prev > 0:
			return (s.idx + 1) * w
		}
		return 0
	})
	return res, nil
}

// Peek reports key's state now without recording anything.
func (l *Local) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return l.AllowN(ctx, key, 0)
}

// Reset forgets key.
func (l *Local) Reset(ctx context.Context, key string) error { return l.t.Reset(ctx, key) }

// Subjects returns how many subjects the twin holds state for.
func (l *Local) Subjects() int { return l.t.Subjects() }
