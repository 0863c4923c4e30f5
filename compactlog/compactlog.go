package compactlog

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

// Tag is the algorithm's part of every key: <prefix>cl:{<subject>}.
const Tag = "cl"

// MaxLimit is the largest Limit the compact log accepts. It bounds what one
// subject costs (a value of 13 + Limit x w bytes, w from 1 to 6 as Width
// says: 20,013 bytes at MaxLimit for windows up to 65.5 s) and the work of
// the rare decision that rebuilds it.
const MaxLimit = 10000

// rangesAbove is the size of value above which the script reads and writes
// it by ranges (GETRANGE, SETRANGE) instead of whole (GET, SET): a few
// commands more, but a decision's work no longer grows with the Limit.
const rangesAbove = 1024

//go:embed compactlog.lua
var scriptSrc string

var script = redis.NewScript(scriptSrc)

// Limiter is the compact exact sliding log on Redis. It is safe for
// concurrent use.
type Limiter struct {
	//lint:ignore U1000 its promoted method makes the type keys.ShardAware, which sharded checks
	shardAware
	//lint:ignore U1000 its promoted method makes the type redisx.Queueable, which sharded checks
	queueable
	b        redisx.Base
	windowMs int64
	width    int64
	ranges   int64 // 1: read and write the value by ranges
}

var (
	_ strategy.Strategy        = (*Limiter)(nil)
	_ keys.ShardAware          = (*Limiter)(nil)
	_ redisx.Queueable         = (*Limiter)(nil)
	_ strategy.ContextHonourer = (*Limiter)(nil)
)

// New returns a compact log that keeps its entries in Redis through rdb
// (a *redis.Client, *redis.ClusterClient or *redis.Ring). lim.Burst is
// ignored. It fails when lim or an option is invalid, or when lim.Limit
// exceeds MaxLimit.
func New(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (*Limiter, error) {
	b, err := redisx.NewBase("compactlog", Tag, rdb, lim, opts, checkLimit)
	if err != nil {
		return nil, err
	}
	b.Lim.Burst = 0
	w := lim.Window.Milliseconds()
	l := &Limiter{b: b, windowMs: w, width: Width(w)}
	if 13+lim.Limit*l.width > rangesAbove {
		l.ranges = 1
	}
	return l, nil
}

// checkLimit bounds the memory of one subject.
func checkLimit(lim strategy.Limit) error {
	if lim.Limit > MaxLimit {
		return fielderr.New(strategy.ErrInvalidLimit, "compactlog: ", "Limit", func(name func(string) string) string {
			return fmt.Sprintf("%s must be <= %d, got %d (use sliding_log or sliding_counter)", name("Limit"), MaxLimit, lim.Limit)
		})
	}
	return nil
}

// Width returns the bytes the compact log stores per unit for a window of
// windowMs milliseconds: the fewest w >= 1 with 256^w >= windowMs. One
// byte up to 256 ms, two up to 65.5 s, three up to 4.6 h, four up to 49.7
// days, five up to 34.8 years, six beyond.
func Width(windowMs int64) int64 {
	w := int64(1)
	for m := int64(256); m < windowMs; m *= 256 {
		w++
	}
	return w
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
// now] plus n do not exceed the limit, in one script run.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	k, err := l.b.KeyN(ctx, key, n)
	if err != nil {
		return strategy.Result{}, err
	}
	return redisx.Decision(ctx, l.b.RDB, script, k, l.b.Lim.Limit,
		l.b.Lim.Limit, l.windowMs, n, l.width, l.b.Now(), l.ranges)
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
