package slidinglog

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/keys"
	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/strategy"
)

// Tag is the algorithm's part of every key: <prefix>sl:{<subject>}.
const Tag = "sl"

//go:embed slidinglog.lua
var scriptSrc string

var script = redis.NewScript(scriptSrc)

// Limiter is the exact sliding log on Redis. It is safe for concurrent use.
type Limiter struct {
	//lint:ignore U1000 its promoted method makes the type keys.ShardAware, which sharded checks
	shardAware
	//lint:ignore U1000 its promoted method makes the type redisx.Queueable, which sharded checks
	queueable
	b        redisx.Base
	windowMs int64
}

var (
	_ strategy.Strategy        = (*Limiter)(nil)
	_ keys.ShardAware          = (*Limiter)(nil)
	_ redisx.Queueable         = (*Limiter)(nil)
	_ strategy.ContextHonourer = (*Limiter)(nil)
)

// New returns a sliding log that keeps its entries in Redis through rdb
// (a *redis.Client, *redis.ClusterClient or *redis.Ring). lim.Burst is
// ignored. It fails when lim or an option is invalid.
func New(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (*Limiter, error) {
	b, err := redisx.NewBase("slidinglog", Tag, rdb, lim, opts)
	if err != nil {
		return nil, err
	}
	b.Lim.Burst = 0
	return &Limiter{b: b, windowMs: lim.Window.Milliseconds()}, nil
}

// Limit returns the limit the strategy enforces, with Burst 0: the
// algorithm has no burst.
func (l *Limiter) Limit() strategy.Limit { return l.b.Lim }

// HonoursContext reports whether every call returns by its context's
// deadline or cancellation: whether the Redis client does (see
// strategy.ContextHonourer).
func (l *Limiter) HonoursContext() bool { return l.b.HonoursContext() }

// Key returns the Redis key that holds key's entries.
func (l *Limiter) Key(key string) string { return l.b.Key(key) }

// AllowN records n units for key if the units in the window (now - Window,
// now] plus n do not exceed the limit, in one script run. The request is
// one sorted-set entry whatever n, and the script's work does not grow
// with n (see the package doc).
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	k, err := l.b.KeyN(ctx, key, n)
	if err != nil {
		return strategy.Result{}, err
	}
	return redisx.Decision(ctx, l.b.RDB, script, k, l.b.Lim.Limit,
		l.b.Lim.Limit, l.windowMs, n, l.b.Now())
}

// Peek reports key's state now without recording anything or writing to Redis.
func (l *Limiter) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return l.AllowN(ctx, key, 0)
}

// Reset deletes key's entries.
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
