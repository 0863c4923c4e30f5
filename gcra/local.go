package gcra

import (
	"context"

	"github.com/ratekit/ratelimit/internal/keys"
	"github.com/ratekit/ratelimit/internal/localstore"
	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/strategy"
)

// Local is the in-process twin of Limiter: the same decisions for the same
// clock, kept in this process only. It is safe for concurrent use. A
// subject costs a small fixed amount (four int64, two of them for per-call
// limits, and the map entry) and is dropped once its theoretical arrival
// time has passed.
type Local struct {
	//lint:ignore U1000 its promoted method makes the type keys.ShardAware, which sharded checks
	shardAware
	t  localstore.Twin[tat]
	sc scale
}

var (
	_ strategy.Strategy        = (*Local)(nil)
	_ keys.ShardAware          = (*Local)(nil)
	_ strategy.ContextHonourer = (*Local)(nil)
)

// tat is a theoretical arrival time: ms + frac/lp milliseconds since the
// Unix epoch. The zero tat has long passed.
type tat struct {
	ms, frac int64
	// lp, wp: the scale of frac when the last write was under a per-call
	// limit other than the strategy's (see AllowNWith); 0 otherwise
	lp, wp int64
}

// NewLocal returns the in-process twin of New. Of the options, only
// WithClock matters; the default clock is time.Now.
func NewLocal(lim strategy.Limit, opts ...strategy.Option) (*Local, error) {
	o, err := redisx.Setup(lim, opts)
	if err != nil {
		return nil, err
	}
	sc, err := newScale(lim)
	if err != nil {
		return nil, err
	}
	return &Local{t: localstore.NewTwin[tat](lim, o, lim.Window.Milliseconds()), sc: sc}, nil
}

// Limit returns the limit the strategy enforces.
func (l *Local) Limit() strategy.Limit { return l.t.Lim }

// HonoursContext returns true: the twin never waits on a network.
func (*Local) HonoursContext() bool { return true }

// AllowN lets key spend n units if its theoretical arrival time, moved by n
// emission intervals, stays within the capacity of now.
func (l *Local) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	return l.allowN(ctx, key, n, l.sc)
}

// decide is the script's decision, on v at now, for n units (0: peek). It
// returns the Result and the instant from which v no longer matters.
func (s scale) decide(v *tat, now, n int64) (strategy.Result, int64) {
	var ahead int64 // how far v is after now, in 1/lp ms
	if d := v.ms - now; d >= 0 {
		if d > s.fullMs {
			ahead = s.full
		} else {
			ahead = min(d*s.lp+v.frac, s.full)
		}
	}
	return s.decideAhead(v, ahead, now, n)
}

// decideAhead is decide once v's distance after now, in 1/lp ms, is known.
func (s scale) decideAhead(v *tat, ahead, now, n int64) (strategy.Result, int64) {
	want := max(n, 1)
	remaining := (s.full - ahead) / s.wp
	reset := ceilDiv(ahead, s.lp)
	if want > s.capacity {
		return redisx.ResultOf(false, s.capacity, remaining, -1, reset), now + reset
	}
	after := ahead + want*s.wp
	switch {
	case after > s.full:
		return redisx.ResultOf(false, s.capacity, remaining, ceilDiv(after-s.full, s.lp), reset), now + reset
	case n == 0:
		return redisx.ResultOf(true, s.capacity, remaining, 0, reset), now + reset
	}
	ms, frac := after/s.lp, after%s.lp
	v.ms, v.frac, v.lp, v.wp = now+ms, frac, 0, 0
	reset = ms
	if frac > 0 {
		reset++
	}
	return redisx.ResultOf(true, s.capacity, (s.full-after)/s.wp, 0, reset), now + reset
}

// ceilDiv is ⌈a/b⌉ for a >= 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// Peek reports key's state now without recording anything.
func (l *Local) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return l.AllowN(ctx, key, 0)
}

// Reset forgets key: the subject starts again with full capacity.
func (l *Local) Reset(ctx context.Context, key string) error { return l.t.Reset(ctx, key) }

// Subjects returns how many subjects the twin holds state for.
func (l *Local) Subjects() int { return l.t.Subjects() }
