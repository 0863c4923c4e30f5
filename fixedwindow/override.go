package fixedwindow

import (
	"context"

	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/strategy"
)

var (
	_ strategy.LimitOverrider = (*Limiter)(nil)
	_ strategy.LimitOverrider = (*Local)(nil)
)

// AllowNWith is AllowN against lim.Limit units per window instead of the
// strategy's Limit (see strategy.LimitOverrider); lim.Burst is ignored and
// lim.Window must be the strategy's. The units already counted in the
// current window stay counted: see "Per-subject limits" in the package doc.
func (l *Limiter) AllowNWith(ctx context.Context, key string, n int64, lim strategy.Limit) (strategy.Result, error) {
	arg, ok := l.overrides.Get(lim)
	if !ok {
		if err := strategy.ValidateOverride(l.b.Lim, lim); err != nil {
			return strategy.Result{}, err
		}
		arg = lim.Limit
		l.overrides.Put(lim, arg)
	}
	k, err := l.b.KeyN(ctx, key, n)
	if err != nil {
		return strategy.Result{}, err
	}
	return redisx.Decision(ctx, l.b.RDB, script, k, lim.Limit,
		arg, l.windowArg, n, l.b.Now())
}

// PeekWith is Peek against lim (see AllowNWith).
func (l *Limiter) PeekWith(ctx context.Context, key string, lim strategy.Limit) (strategy.Result, error) {
	return l.AllowNWith(ctx, key, 0, lim)
}

// AllowNWith is AllowN against lim.Limit units per window instead of the
// strategy's Limit (see Limiter.AllowNWith).
func (l *Local) AllowNWith(ctx context.Context, key string, n int64, lim strategy.Limit) (strategy.Result, error) {
	if err := strategy.ValidateOverride(l.t.Lim, lim); err != nil {
		return strategy.Result{}, err
	}
	return l.allowN(ctx, key, n, lim.Limit)
}

// PeekWith is Peek against lim (see AllowNWith).
func (l *Local) PeekWith(ctx context.Context, key string, lim strategy.Limit) (strategy.Result, error) {
	return l.AllowNWith(ctx, key, 0, lim)
}

var (
	_ strategy.LimitValidator = (*Limiter)(nil)
	_ strategy.LimitValidator = (*Local)(nil)
)

// ValidateLimit returns the error AllowNWith would return for lim, or nil
// (see strategy.LimitValidator).
func (l *Limiter) ValidateLimit(lim strategy.Limit) error {
	return strategy.ValidateOverride(l.b.Lim, lim)
}

// ValidateLimit returns the error AllowNWith would return for lim, or nil
// (see strategy.LimitValidator).
func (l *Local) ValidateLimit(lim strategy.Limit) error {
	return strategy.ValidateOverride(l.t.Lim, lim)
}
