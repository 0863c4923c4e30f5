package compactlog

import (
	"context"

	"github.com/ratekit/ratelimit/internal/keys"
	"github.com/ratekit/ratelimit/internal/localstore"
	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/strategy"
)

// Local is the in-process twin of Limiter: the same decisions for the same
// clock, kept in this process only. It is safe for concurrent use. A
// subject costs 16 bytes per distinct millisecond at which units were
// recorded in the window (a request of cost n is one such run, whatever n),
// plus a small header, and is dropped once its newest unit has left the
// window.
type Local struct {
	//lint:ignore U1000 its promoted method makes the type keys.ShardAware, which sharded checks
	shardAware
	t        localstore.Twin[runs]
	windowMs int64
}

var (
	_ strategy.Strategy        = (*Local)(nil)
	_ keys.ShardAware          = (*Local)(nil)
	_ strategy.ContextHonourer = (*Local)(nil)
)

// run is n units recorded at the same millisecond.
type run struct{ at, n int64 }

// runs is a ring buffer of runs, oldest first; times never decrease.
type runs struct {
	buf   []run
	head  int
	len   int
	units int64 // the units of every run
}

func (g *runs) at(i int) *run { return &g.buf[(g.head+i)%len(g.buf)] }

func (g *runs) newest() int64 { return g.at(g.len - 1).at }

// evict drops the runs at or before floor from the front.
func (g *runs) evict(floor int64) {
	for g.len > 0 && g.buf[g.head].at <= floor {
		g.units -= g.buf[g.head].n
		g.head = (g.head + 1) % len(g.buf)
		g.len--
	}
}

// stale returns the index of the first run after floor and the units of
// the runs before it.
func (g *runs) stale(floor int64) (first int, units int64) {
	for first < g.len && g.at(first).at <= floor {
		units += g.at(first).n
		first++
	}
	return first, units
}

// push records n units at t, which is not before the newest run.
func (g *runs) push(t, n int64) {
	g.units += n
	if g.len > 0 {
		if last := g.at(g.len - 1); last.at == t {
			last.n += n
			return
		}
	}
	if g.len == len(g.buf) {
		nb := make([]run, max(4, 2*len(g.buf)))
		for i := range g.len {
			nb[i] = *g.at(i)
		}
		g.buf, g.head = nb, 0
	}
	g.buf[(g.head+g.len)%len(g.buf)] = run{t, n}
	g.len++
}

// kth returns the time of the k-th oldest unit (k >= 1) from run first on.
func (g *runs) kth(first int, k int64) int64 {
	for i := first; ; i++ {
		r := g.at(i)
		if k <= r.n {
			return r.at
		}
		k -= r.n
	}
}

// NewLocal returns the in-process twin of New. lim.Burst is ignored. Of the
// options, only WithClock matters; the default clock is time.Now. Limit is
// bounded by MaxLimit as for New, though the twin stores runs, not units.
func NewLocal(lim strategy.Limit, opts ...strategy.Option) (*Local, error) {
	o, err := redisx.Setup(lim, opts, checkLimit)
	if err != nil {
		return nil, err
	}
	lim.Burst = 0
	w := lim.Window.Milliseconds()
	return &Local{t: localstore.NewTwin[runs](lim, o, w), windowMs: w}, nil
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
	window := l.windowMs
	floor := now - window
	var res strategy.Result
	l.t.Store.Do(sk, now, func(g *runs) int64 {
		// only a recorded request forgets what left the window: denials
		// and Peek change nothing, even after the clock stepped back
		first, stale := g.stale(floor)
		live := g.units - stale
		want := max(n, 1)
		reset := int64(0)
		if live > 0 {
			reset = g.newest() + window - now
		}
		switch {
		case want > limit:
			res = redisx.ResultOf(false, limit, max(limit-live, 0), -1, reset)
		case live+want <= limit && n == 0:
			res = redisx.ResultOf(true, limit, limit-live, 0, reset)
		case live+want <= limit:
			t := now // recorded at the newest unit's time if the clock went back
			if g.len > 0 {
				t = max(now, g.newest())
			}
			g.evict(floor)
			g.push(t, n)
			res = redisx.ResultOf(true, limit, limit-g.units, 0, t+window-now)
		default: // the (live+want-limit)-th oldest live unit must leave
			res = redisx.ResultOf(false, limit, max(limit-live, 0), g.kth(first, live+want-limit)+window-now, reset)
		}
		if g.len == 0 {
			return 0
		}
		return g.newest() + window
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
