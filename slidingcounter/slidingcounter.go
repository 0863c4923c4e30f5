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
	rdb  redis.Scripter
	lim  strategy.Limit
	opts strategy.Options
	// the script's constant arguments, boxed once rather than per call
	limitArg, windowArg any
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
	if rdb == nil {
		return nil, fmt.Errorf("%w: slidingcounter: redis client is nil", strategy.ErrInvalidOption)
	}
	o, err := setup(lim, opts)
	if err != nil {
		return nil, err
	}
	return &Limiter{rdb: rdb, lim: lim, opts: o, limitArg: lim.Limit, windowArg: lim.Window.Milliseconds()}, nil
}

func setup(lim strategy.Limit, opts []strategy.Option) (strategy.Options, error) {
	if err := lim.Validate(); err != nil {
		return strategy.Options{}, fmt.Errorf("slidingcounter: %w", err)
	}
	// Validate bounds both factors, so the product cannot overflow int64.
	if w := lim.Window.Milliseconds(); lim.Limit*w > MaxProduct {
		return strategy.Options{}, fmt.Errorf("slidingcounter: %w: Limit x Window must be <= 2^52 unit-ms, got %d x %dms",
			strategy.ErrInvalidLimit, lim.Limit, w)
	}
	o := strategy.Apply(opts)
	if o.Err != nil {
		return o, fmt.Errorf("slidingcounter: %w", o.Err)
	}
	return o, nil
}

// Limit returns the limit the strategy enforces.
func (l *Limiter) Limit() strategy.Limit { return l.lim }

// Key returns the Redis key that holds key's counts.
func (l *Limiter) Key(key string) string {
	return strategy.KeyFor(l.opts.Prefix, Tag, key, strategy.NoShard)
}

// AllowN records n units for key if the estimated units in the sliding
// window plus n do not exceed the limit, in one script run.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	if err := strategy.ValidateKey(key); err != nil {
		return strategy.Result{}, err
	}
	if err := strategy.ValidateCost(n); err != nil {
		return strategy.Result{}, err
	}
	k := strategy.KeyFor(l.opts.Prefix, Tag, key, keys.Shard(ctx))
	return redisx.Decision(ctx, l.rdb, script, k, l.lim.Limit,
		l.limitArg, l.windowArg, n, l.nowArg())
}

// serverTime is redisx.ServerTime, boxed once.
var serverTime any = redisx.ServerTime

// nowArg is the script's "now" argument: the client clock's time, or
// ServerTime to read the server's.
func (l *Limiter) nowArg() any {
	if l.opts.Clock == nil {
		return serverTime
	}
	return redisx.NowArg(l.opts.Clock)
}

// Peek reports key's state now without recording anything or writing to
// Redis.
func (l *Limiter) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return l.AllowN(ctx, key, 0)
}

// Reset deletes key's counts.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	if err := strategy.ValidateKey(key); err != nil {
		return err
	}
	return redisx.Del(ctx, l.rdb, strategy.KeyFor(l.opts.Prefix, Tag, key, keys.Shard(ctx)))
}

// ShardAware marks the Limiter as honouring the shard index that the
// sharded wrapper passes. It does nothing.
func (*Limiter) ShardAware() {}
