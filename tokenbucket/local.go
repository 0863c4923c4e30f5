package tokenbucket

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
// limits, and the map entry) and is dropped once its bucket is full again.
type Local struct {
	//lint:ignore U1000 its promoted method makes the type keys.ShardAware, which sharded checks
	shardAware
	t  localstore.Twin[bucket]
	sc scale
}

var (
	_ strategy.Strategy        = (*Local)(nil)
	_ keys.ShardAware          = (*Local)(nil)
	_ strategy.ContextHonourer = (*Local)(nil)
)

// bucket is a subject's state. The zero bucket is full.
type bucket struct {
	deficit int64 // full - tokens, in scaled units
	last    int64 // the last refill, Unix ms; meaningless when deficit is 0
	// lp, wp: the scale of deficit and the rate of refill since last when
	// the last write was under a per-call limit other than the strategy's
	// (see AllowNWith); 0 otherwise
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
	return &Local{t: localstore.NewTwin[bucket](lim, o, lim.Window.Milliseconds()), sc: sc}, nil
}

// Limit returns the limit the strategy enforces.
func (l *Local) Limit() strategy.Limit { return l.t.Lim }

// HonoursContext returns true: the twin never waits on a network.
func (*Local) HonoursContext() bool { return true }

// AllowN takes n tokens from key's bucket if it holds at least n.
func (l *Local) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	return l.allowN(ctx, key, n, l.sc)
}

// decide is the script's decision, on b at now, for n units (0: peek). It
// returns the Result and the instant from which b no longer matters (the
// bucket is full).
func (s scale) decide(b *bucket, now, n int64) (strategy.Result, int64) {
	if now > b.last {
		// e*lp cannot overflow below fullMs, and from fullMs on any bucket is full
		if e := now - b.last; e >= s.fullMs || e*s.lp >= b.deficit {
			b.deficit = 0
		} else {
			b.deficit -= e * s.lp
		}
		b.last = now
	}
	if b.deficit == 0 {
		b.last = now
	}
	tokens := s.full - b.deficit
	want := max(n, 1)
	remaining := tokens / s.wp
	reset := ceilDiv(b.deficit, s.lp)
	if want > s.capacity {
		return redisx.ResultOf(false, s.capacity, remaining, -1, reset), now + reset
	}
	switch need := want * s.wp; {
	case need > tokens:
		return redisx.ResultOf(false, s.capacity, remaining, ceilDiv(need-tokens, s.lp), reset), now + reset
	case n == 0:
		return redisx.ResultOf(true, s.capacity, remaining, 0, reset), now + reset
	default:
		b.deficit += need
		reset = ceilDiv(b.deficit, s.lp)
		return redisx.ResultOf(true, s.capacity, (tokens-need)/s.wp, 0, reset), now + reset
	}
}

// ceilDiv is ⌈a/b⌉ for a >= 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// Peek reports key's bucket now without taking anything.
func (l *Local) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return l.AllowN(ctx, key, 0)
}

// Reset forgets key: the subject starts again with a full bucket.
func (l *Local) Reset(ctx context.Context, key string) error { return l.t.Reset(ctx, key) }

// Subjects returns how many subjects the twin holds state for.
func (l *Local) Subjects() int { return l.t.Subjects() }
