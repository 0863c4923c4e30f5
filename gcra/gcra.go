package gcra

import (
	"context"
	_ "embed"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/exact"
	"github.com/ratekit/ratelimit/internal/keys"
	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/strategy"
)

// Tag is the algorithm's part of every key: <prefix>gc:{<subject>}. Two
// letters, like the other tags: a key name of 14 bytes or less (rl:gc:{u1234})
// costs 16 bytes less in Redis than one of 15 to 30.
const Tag = "gc"

//go:embed gcra.lua
var scriptSrc string

var script = redis.NewScript(scriptSrc)

// Limiter is GCRA on Redis. It is safe for concurrent use.
type Limiter struct {
	//lint:ignore U1000 its promoted method makes the type keys.ShardAware, which sharded checks
	shardAware
	//lint:ignore U1000 its promoted method makes the type redisx.Queueable, which sharded checks
	queueable
	b  redisx.Base
	sc scale
	// the constant script arguments, boxed once
	lp, wp, capacity, digits, format any
	window                           any
	// per-call limits (AllowNWith): their scale and arguments, boxed once
	overrides redisx.Cache[args]
}

var (
	_ strategy.Strategy        = (*Limiter)(nil)
	_ keys.ShardAware          = (*Limiter)(nil)
	_ redisx.Queueable         = (*Limiter)(nil)
	_ strategy.ContextHonourer = (*Limiter)(nil)
)

// New returns a GCRA limiter that keeps each subject's theoretical arrival
// time in Redis through rdb (a *redis.Client, *redis.ClusterClient or
// *redis.Ring). The capacity is lim.Burst, or lim.Limit when Burst is 0; the
// rate is lim.Limit per lim.Window. It fails when lim or an option is
// invalid, or when the limit cannot be computed exactly (see the package
// doc).
func New(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (*Limiter, error) {
	b, err := redisx.NewBase("gcra", Tag, rdb, lim, opts)
	if err != nil {
		return nil, err
	}
	sc, err := newScale(lim)
	if err != nil {
		return nil, err
	}
	digits, format := 0, ""
	if sc.lp > 1 {
		digits = len(strconv.FormatInt(sc.lp-1, 10))
		format = "%d%0" + strconv.Itoa(digits) + "d"
	}
	return &Limiter{b: b, sc: sc,
		lp: sc.lp, wp: sc.wp, capacity: sc.capacity, digits: digits, format: format,
		window: lim.Window.Milliseconds()}, nil
}

// Limit returns the limit the strategy enforces.
func (l *Limiter) Limit() strategy.Limit { return l.b.Lim }

// HonoursContext reports whether every call returns by its context's
// deadline or cancellation: whether the Redis client does (see
// strategy.ContextHonourer).
func (l *Limiter) HonoursContext() bool { return l.b.HonoursContext() }

// Key returns the Redis key that holds key's theoretical arrival time.
func (l *Limiter) Key(key string) string { return l.b.Key(key) }

// AllowN lets key spend n units if its theoretical arrival time, moved by n
// emission intervals, stays within the capacity of now, in one script run.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (strategy.Result, error) {
	k, err := l.b.KeyN(ctx, key, n)
	if err != nil {
		return strategy.Result{}, err
	}
	if l.sc.denyAll() {
		return redisx.DenyAll(ctx)
	}
	return redisx.Decision(ctx, l.b.RDB, script, k, l.sc.capacity,
		l.lp, l.wp, l.capacity, n, l.b.Now(), l.digits, l.format, l.lp, l.wp, l.window)
}

// Peek reports key's state now without recording anything or writing to
// Redis.
func (l *Limiter) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return l.AllowN(ctx, key, 0)
}

// Reset deletes key's state: the subject starts again with full capacity.
func (l *Limiter) Reset(ctx context.Context, key string) error { return l.b.Reset(ctx, key) }

// scale is the exact integer form of a limit: time is counted in 1/lp ms,
// the emission interval is wp of those units, and the capacity full units.
type scale struct {
	lp, wp   int64
	capacity int64 // in units of the limit
	full     int64 // capacity × wp
	fullMs   int64 // ⌊full/lp⌋
}

// denyAll reports a Limit of 0, which denies every request.
func (s scale) denyAll() bool { return s.lp == 0 }

// newScale returns the scale of lim, which must be valid.
func newScale(lim strategy.Limit) (scale, error) {
	x, err := exact.Of(lim)
	if err != nil {
		return scale{}, err
	}
	s := scale{lp: x.LP, wp: x.WP, capacity: x.Capacity, full: x.Full}
	if !s.denyAll() {
		s.fullMs = s.full / s.lp
	}
	return s, nil
}

// shardAware and queueable mark a Limiter as reading the shard index from
// the context, and its Peek and Reset as one script call each, which the
// sharded wrapper sends for all shards in one pipeline.
type (
	//lint:ignore U1000 used by the embedded field shardAware
	shardAware = keys.Aware
	//lint:ignore U1000 used by the embedded field queueable
	queueable = redisx.Queue
)
