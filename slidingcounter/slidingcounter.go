package slidingcounter

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/fielderr"
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
	//lint:ignore U1000 its promoted method makes the type keys.ShardAware, which sharded checks
	shardAware
	//lint:ignore U1000 its promoted method makes the type redisx.Queueable, which sharded checks
	queueable
	b redisx.Base
	// the script's constant arguments, boxed once rather than per call
	limitArg, windowArg any
	// per-call limits (AllowNWith): the limit argument, boxed once
	overrides redisx.Cache[any]
}

var (
	_ strategy.Strategy        = (*Limiter)(nil)
	_ keys.ShardAware          = (*Limiter)(nil)
	_ redisx.Queueable         = (*Limiter)(nil)
	_ strategy.ContextHonourer = (*Limiter)(nil)
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
	b.Lim.Burst = 0
	return &Limiter{b: b, limitArg: lim.Limit, windowArg: lim.Window.Milliseconds()}, nil
}

// checkProduct bounds Limit x Window by MaxProduct.
func checkProduct(lim strategy.Limit) error {
	// Validate bounds both factors, so the product cannot overflow int64.
	if w := lim.Window.Milliseconds(); lim.Limit*w > MaxProduct {
		return fielderr.New(strategy.ErrInvalidLimit, "slidingcounter: ", "Limit", func(name func(string) string) string {
			return fmt.Sprintf("%s x %s must be <= 2^52 unit-ms, got %d x %dms", name("Limit"), name("Window"), lim.Limit, w)
		})
	}
	return nil
}

// Limit returns the limit the strategy enforces, with Burst 0: the
// algorithm has no burst.
func (l *Limiter) Limit() strategy.Limit { return l.b.Lim }

// HonoursContext reports whether every call returns by its context's
// deadline or cancellation: whether the Redis client does (see
// strategy.ContextHonourer).
func (l *Limiter) HonoursContext() bool { return l.b.HonoursContext() }

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

// shardAware and queueable mark a Limiter as reading the shard index from
// the context, and its Peek and Reset as one script call each, which the
// sharded wrapper sends for all shards in one pipeline.
type (
	//lint:ignore U1000 used by the embedded field shardAware
	shardAware = keys.Aware
	//lint:ignore U1000 used by the embedded field queueable
	queueable = redisx.Queue
)
