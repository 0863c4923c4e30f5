package gcra

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/keys"
	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/strategy"
)

// Tag is the algorithm's part of every key: <prefix>gcra:{<subject>}.
const Tag = "gcra"

//go:embed gcra.lua
var scriptSrc string

var script = redis.NewScript(scriptSrc)

// Limiter is GCRA on Redis. It is safe for concurrent use.
type Limiter struct {
	rdb  redis.Scripter
	lim  strategy.Limit
	opts strategy.Options
	sc   scale
	// the constant script arguments, boxed once
	lp, wp, capacity, digits, format any
}

var (
	_ strategy.Strategy = (*Limiter)(nil)
	_ keys.ShardAware   = (*Limiter)(nil)
)

// New returns a GCRA limiter that keeps each subject's theoretical arrival
// time in Redis through rdb (a *redis.Client, *redis.ClusterClient or
// *redis.Ring). The capacity is lim.Burst, or lim.Limit when Burst is 0; the
// rate is lim.Limit per lim.Window. It fails when lim or an option is
// invalid, or when the limit cannot be computed exactly (see the package
// doc).
func New(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (*Limiter, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: gcra: redis client is nil", strategy.ErrInvalidOption)
	}
	o, sc, err := setup(lim, opts)
	if err != nil {
		return nil, err
	}
	digits, format := 0, ""
	if sc.lp > 1 {
		digits = len(strconv.FormatInt(sc.lp-1, 10))
		format = "%d%0" + strconv.Itoa(digits) + "d"
	}
	return &Limiter{rdb: rdb, lim: lim, opts: o, sc: sc,
		lp: sc.lp, wp: sc.wp, capacity: sc.capacity, digits: digits, format: format}, nil
}

// Limit returns the limit the strategy enforces.
func (l *Limiter) Limit() strategy.Limit { return l.lim }

// Key returns the Redis key that holds key's theoretical arrival time.
func (l *Limiter) Key(key string) string {
	return strategy.KeyFor(l.opts.Prefix, Tag, key, strategy.NoShard)
}

// AllowN lets key spend n units if its theoretical arrival time, moved by n
// emission intervals, stays within the capacity of now, in one script run.
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
		l.lp, l.wp, l.capacity, n, redisx.NowArg(l.opts.Clock), l.digits, l.format)
}

// Peek reports key's state now without recording anything or writing to
// Redis.
func (l *Limiter) Peek(ctx context.Context, key string) (strategy.Result, error) {
	return l.AllowN(ctx, key, 0)
}

// Reset deletes key's state: the subject starts again with full capacity.
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

func setup(lim strategy.Limit, opts []strategy.Option) (strategy.Options, scale, error) {
	if err := lim.Validate(); err != nil {
		return strategy.Options{}, scale{}, fmt.Errorf("gcra: %w", err)
	}
	o := strategy.Apply(opts)
	if o.Err != nil {
		return o, scale{}, fmt.Errorf("gcra: %w", o.Err)
	}
	sc, err := newScale(lim)
	if err != nil {
		return o, scale{}, fmt.Errorf("gcra: %w", err)
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
	s.fullMs = s.full / s.lp
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
