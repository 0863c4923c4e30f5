package slidinglog

import (
	"context"

	"github.com/ratekit/ratelimit/internal/keys"
	"github.com/ratekit/ratelimit/internal/localstore"
	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/strategy"
)

// Local is the in-process twin of Limiter: the same decisions for the same
// clock, kept in this process only. It is safe for concurrent use. A subject
// costs 8 bytes per live entry plus a small header, and is dropped once its
// newest entry has left the window.
type Local struct {
	t        localstore.Twin[log]
	windowMs int64
}

var (
	_ strategy.Strategy = (*Local)(nil)
	_ keys.ShardAware   = (*Local)(nil)
)

// log is a ring buffer of entry times in ms, oldest first.
type log struct {
	buf   []int64
	head  int
	count int
}

func (g *log) at(i int) int64 { return g.buf[(g.head+i)%len(g.buf)] }

// evict drops the entries at or before floor from the front.
func (g *log) evict(floor int64) {
	for g.count > 0 && g.buf[g.head] <= floor {
		g.head = (g.head + 1) % len(g.buf)
		g.count--
	}
}

// live counts the entries after floor.
func (g *log) live(floor int64) int {
	i := 0
	for i < g.count && g.at(i) <= floor {
		i++
	}
	return g.count - i
}

// insert records n entries at now, keeping the buffer sorted even when the
// clock went backwards.
func (g *log) insert(now int64, n int, limit int64) {
	if need := g.count + n; need > len(g.buf) {
		size := max(need, min(2*len(g.buf), int(limit)), 4)
		nb := make([]int64, size)
		for i := 0; i < g.count; i++ {
			nb[i] = g.at(i)
		}
		g.buf, g.head = nb, 0
	}
	for range n {
		// place now after every entry <= now
		j := g.count
		for j > 0 && g.at(j-1) > now {
			g.buf[(g.head+j)%len(g.buf)] = g.at(j - 1)
			j--
		}
		g.buf[(g.head+j)%len(g.buf)] = now
		g.count++
	}
}

// NewLocal returns the in-process twin of New. lim.Burst is ignored. Of the
// options, only WithClock matters; the default clock is time.Now.
func NewLocal(lim strategy.Limit, opts ...strategy.Option) (*Local, error) {
	o, err := redisx.Setup("slidinglog", lim, opts)
	if err != nil {
		return nil, err
	}
	w := lim.Window.Milliseconds()
	return &Local{t: localstore.NewTwin[log](lim, o, w), windowMs: w}, nil
}

// Limit returns the limit the strategy enforces.
func (l *Local) Limit() strategy.Limit { return l.t.Lim }

// AllowN records n units for key if the units in the window plus n do not
// exceed the limit.
func (l *Local) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	sk, now, err := l.t.Start(ctx, key, n)
	if err != nil {
		return strategy.Result{}, err
	}
	limit, window := l.t.Lim.Limit, l.windowMs
	floor := now - window
	var res strategy.Result
	l.t.Store.Do(sk, now, func(g *log) int64 {
		want := n
		var count int64
		if n == 0 {
			want = 1
			count = int64(g.live(floor))
		} else {
			g.evict(floor)
			count = int64(g.count)
		}
		newest := func() int64 { return g.at(g.count-1) + window - now }
		switch {
		case want > limit:
			reset := int64(0)
			if count > 0 {
				reset = newest()
			}
			res = redisx.ResultOf(false, limit, max(limit-count, 0), -1, reset)
		case count+want <= limit && n == 0:
			reset := int64(0)
			if count > 0 {
				reset = newest()
			}
			res = redisx.ResultOf(true, limit, limit-count, 0, reset)
		case count+want <= limit:
			g.insert(now, int(n), limit)
			res = redisx.ResultOf(true, limit, limit-count-n, 0, window)
		default:
			k := count + want - limit // the k-th oldest live entry must leave
			first := int64(g.count) - count
			res = redisx.ResultOf(false, limit, max(limit-count, 0), g.at(int(first+k-1))+window-now, newest())
		}
		if g.count == 0 {
			return 0
		}
		return g.at(g.count-1) + window
	})
	return res, nil
}

// Peek reports key's state now without recording anything.
func (l *Local) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return l.AllowN(ctx, key, 0)
}

// Reset forgets key.
func (l *Local) Reset(ctx context.Context, key string) error { return l.t.Reset(ctx, key) }

// ShardAware marks the Local as honouring the shard index that the sharded
// wrapper passes. It does nothing.
func (*Local) ShardAware() {}

// Subjects returns how many subjects the twin holds state for.
func (l *Local) Subjects() int { return l.t.Subjects() }
