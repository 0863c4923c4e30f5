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
	b        redisx.Base
	windowMs int64
	mod      int64
}

var (
	_ strategy.Strategy = (*Limiter)(nil)
	_ keys.ShardAware   = (*Limiter)(nil)
)

// New returns a sliding log that keeps its entries in Redis through rdb
// (a *redis.Client, *redis.ClusterClient or *redis.Ring). lim.Burst is
// ignored. It fails when lim or an option is invalid.
func New(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (*Limiter, error) {
	b, err := redisx.NewBase("slidinglog", Tag, rdb, lim, opts)
	if err != nil {
		return nil, err
	}
	return &Limiter{b: b, windowMs: lim.Window.Milliseconds(), mod: memberModulus(lim.Limit)}, nil
}

// memberModulus is how many distinct members the script cycles through:
// at least twice the limit, so a free member is always near, and at least
// 128, since members below 128 cost one byte in a listpack anyway.
func memberModulus(limit int64) int64 {
	return max(128, 2*limit)
}

// Limit returns the limit the strategy enforces.
func (l *Limiter) Limit() strategy.Limit { return l.b.Lim }

// Key returns the Redis key that holds key's entries.
func (l *Limiter) Key(key string) string { return l.b.Key(key) }

// AllowN records n units for key if the units in the window (now - Window,
// now] plus n do not exceed the limit, in one script run.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	k, err := l.b.KeyN(ctx, key, n)
	if err != nil {
		return strategy.Result{}, err
	}
	return redisx.Decision(ctx, l.b.RDB, script, k, l.b.Lim.Limit,
		l.b.Lim.Limit, l.windowMs, n, l.mod, l.b.Now())
}

// Peek reports key's state now without recording anything or writing to Redis.
func (l *Limiter) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return l.AllowN(ctx, key, 0)
}

// Reset deletes key's entries.
func (l *Limiter) Reset(ctx context.Context, key string) error { return l.b.Reset(ctx, key) }

// ShardAware marks the Limiter as honouring the shard index that the
// sharded wrapper passes. It does nothing.
func (*Limiter) ShardAware() {}

// Queueable marks the Limiter's Peek and Reset as one script call each,
// which the sharded wrapper sends for all shards in one pipeline. It does
// nothing.
func (*Limiter) Queueable() {}
