package tokenbucket

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/keys"
	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/strategy"
)

// Tag is the algorithm's part of every key: <prefix>tb:{<subject>}.
const Tag = "tb"

//go:embed tokenbucket.lua
var scriptSrc string

var script = redis.NewScript(scriptSrc)

// Limiter is the token bucket on Redis. It is safe for concurrent use.
type Limiter struct {
	rdb  redis.Scripter
	lim  strategy.Limit
	opts strategy.Options
	sc   scale
	// the constant script arguments, boxed once
	lp, wp, capacity any
}

var (
	_ strategy.Strategy = (*Limiter)(nil)
	_ keys.ShardAware   = (*Limiter)(nil)
)

// New returns a token bucket that keeps each subject's bucket in Redis
// through rdb (a *redis.Client, *redis.ClusterClient or *redis.Ring). The
// capacity is lim.Burst, or lim.Limit when Burst is 0; the bucket refills at
// lim.Limit per lim.Window. It fails when lim or an option is invalid, or
// when the limit cannot be computed exactly (see the package doc).
func New(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (*Limiter, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: tokenbucket: redis client is nil", strategy.ErrInvalidOption)
	}
	o, sc, err := setup(lim, opts)
	if err != nil {
		return nil, err
	}
	return &Limiter{rdb: rdb, lim: lim, opts: o, sc: sc, lp: sc.lp, wp: sc.wp, capacity: sc.capacity}, nil
}

// Limit returns the limit the strategy enforces.
func (l *Limiter) Limit() strategy.Limit { return l.lim }

// Key returns the Redis key that holds key's bucket.
func (l *Limiter) Key(key string) string {
	return strategy.KeyFor(l.opts.Prefix, Tag, key, strategy.NoShard)
}

// AllowN takes n tokens from key's bucket if it holds at least n, in one
// script run.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	if err := strategy.ValidateKey(key); err != nil {
		return strategy.Result{}, err
	}
	if err := strategy.ValidateCost(n); err != nil {
		return strategy.Result{}, err
	}
	if l.sc.denyAll() {
		return denyAll(ctx)
	}
	k := strategy.KeyFor(l.opts.Prefix, Tag, key, keys.Shard(ctx))
	return redisx.Decision(ctx, l.rdb, script, k, l.sc.capacity,
		l.lp, l.wp, l.capacity, n, redisx.NowArg(l.opts.Clock))
}

// Peek reports key's bucket now without taking anything or writing to Redis.
func (l *Limiter) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return l.AllowN(ctx, key, 0)
}

// Reset deletes key's bucket: the subject starts again with a full one.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if err := strategy.ValidateKey(key); err != nil {
		return err
	}
	return redisx.Del(ctx, l.rdb, strategy.KeyFor(l.opts.Prefix, Tag, key, keys.Shard(ctx)))
}

// ShardAware marks the Limiter as honouring the shard index that the
// sharded wrapper passes. It does nothing.
func (*Limiter) ShardAware() {}

// maxScaled bounds capacity × wp: every value the script computes then stays
// an integer below 2^53, exact in Lua's float64 numbers.
const maxScaled = 1 << 51

// scale is the exact integer form of a limit: one token is wp units, every
// millisecond refills lp units, and a full bucket holds full units.
type scale struct {
	lp, wp   int64
	capacity int64 // in tokens
	full     int64 // capacity × wp
	fullMs   int64 // ⌈full/lp⌉: the refill time of an empty bucket, in ms
}

// denyAll reports a Limit of 0, which denies every request.
func (s scale) denyAll() bool { return s.lp == 0 }

func setup(lim strategy.Limit, opts []strategy.Option) (strategy.Options, scale, error) {
	if err := lim.Validate(); err != nil {
		return strategy.Options{}, scale{}, fmt.Errorf("tokenbucket: %w", err)
	}
	o := strategy.Apply(opts)
	if o.Err != nil {
		return o, scale{}, fmt.Errorf("tokenbucket: %w", o.Err)
	}
	sc, err := newScale(lim)
	if err != nil {
		return o, scale{}, fmt.Errorf("tokenbucket: %w", err)
	}
	return o, sc, nil
}

func newScale(lim strategy.Limit) (scale, error) {
	if lim.Limit == 0 {
		return scale{}, nil
	}
	w := lim.Window.Milliseconds()
	g := gcd(lim.Limit, w)
	s := scale{lp: lim.Limit / g, wp: w / g, capacity: lim.Capacity()}
	if s.wp > maxScaled/s.capacity {
		field := "Limit"
		if lim.Burst > 0 {
			field = "Burst"
		}
		return scale{}, fmt.Errorf("%w: %s %d with Window %s cannot be computed exactly: %s × Window/gcd(Limit, Window in ms) must be <= 2^51, got %d × %d",
			strategy.ErrInvalidLimit, field, s.capacity, lim.Window, field, s.capacity, s.wp)
	}
	s.full = s.capacity * s.wp
	s.fullMs = (s.full + s.lp - 1) / s.lp
	return s, nil
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// denyAll is the decision of a Limit of 0: nothing ever passes.
func denyAll(ctx context.Context) (strategy.Result, error) {
	if err := ctx.Err(); err != nil {
		return strategy.Result{}, fmt.Errorf("%w: %w", strategy.ErrBackend, err)
	}
	return redisx.ResultOf(false, 0, 0, -1, 0), nil
}
