package slidingcounter

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/keys"
	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/strategy"
)

// Tag is the algorithm's part of every key: <prefix>sc:{<subject>}.
const Tag = "sc"

// MaxProduct bounds Limit x Window (in ms), so that the script's integer
// arithmetic stays exact in Lua's float64 numbers. It allows, e.g., a
// million units per year or a billion per hour.
const MaxProduct = 1 << 52

//go:embed slidingcounter.lua
var scriptSrc string

var script = redis.NewScript(scriptSrc)

// Limiter is the sliding window counter on Redis. It is safe for concurrent
// use.
type Limiter struct {
	b redisx.Base
	// the script's constant arguments, boxed once rather than per call
	limitArg, windowArg any
	// per-call limits (AllowNWith): the limit argument, boxed once
	overrides redisx.Cache[any]
}

var (
	_ strategy.Strategy = (*Limiter)(nil)
	_ keys.ShardAware   = (*Limiter)(nil)
)

// New returns a sliding window counter that keeps its counts in Redis
// through rdb (a *redis.Client, *redis.ClusterClient or *redis.Ring).
// lim.Burst is ignored. It fails when lim or an option is invalid, or when
// Limit x Window exceeds MaxProduct.
func New(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (*Limiter, error) {
	b, err := redisx.NewBase("slidingcounter", Tag, rdb, lim, opts, checkProduct)
	if err != nil {
		return nil, err
	}
	return &Limiter{b: b, limitArg: lim.Limit, windowArg: lim.Window.Milliseconds()}, nil
}

// checkProduct bounds Limit x Window by MaxProduct.
func checkProduct(lim strategy.Limit) error {
	// Validate bounds both factors, so the product cannot overflow int64.
	if w := lim.Window.Milliseconds(); lim.Limit*w > MaxProduct {
		return fmt.Errorf("%w: Limit x Window must be <= 2^52 unit-ms, got %d x %dms",
			strategy.ErrInvalidLimit, lim.Limit, w)
	}
	return nil
}

// Limit returns the limit the strategy enforces.
func (l *Limiter) Limit() strategy.Limit { return l.b.Lim }

// Key returns the Redis key that holds key's counts.
func (l *Limiter) Key(key string) string { return l.b.Key(key) }

// AllowN records n units for key if the estimated units in the sliding
// window plus n do not exceed the limit, in one script run.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	k, err := l.b.KeyN(ctx, key, n)
	if err != nil {
		return strategy.Result{}, err
	}
	return redisx.Decision(ctx, l.b.RDB, script, k, l.b.Lim.Limit,
		l.limitArg, l.windowArg, n, l.b.Now())
}

// Peek reports key's state now without recording anything or writing to
// Redis.
func (l *Limiter) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return l.AllowN(ctx, key, 0)
}

// Reset deletes key's counts.
func (l *Limiter) Reset(ctx context.Context, key string) error { return l.b.Reset(ctx, key) }

// ShardAware marks the Limiter as honouring the shard index that the
// sharded wrapper passes. It does nothing.
func (*Limiter) ShardAware() {}

// Queueable marks the Limiter's Peek and Reset as one script call each,
// which the sharded wrapper sends for all shards in one pipeline. It does
// nothing.
func (*Limiter) Queueable() {}
