package gcra

import (
	"context"
	"math/bits"

	"github.com/ratekit/ratelimit/internal/exact"
	"github.com/ratekit/ratelimit/internal/redisx"
	"github.com/ratekit/ratelimit/strategy"
)

var (
	_ strategy.LimitOverrider = (*Limiter)(nil)
	_ strategy.LimitOverrider = (*Local)(nil)
)

// args are the scale of a per-call limit and its script arguments, boxed.
type args struct {
	sc               scale
	lp, wp, capacity any
}

// AllowNWith is AllowN with lim's capacity and rate instead of the
// strategy's Limit (see strategy.LimitOverrider). lim.Window must be the
// strategy's, and lim, like the strategy's Limit, must satisfy (capacity +
// 1) × Window in ms < 2^53 besides New's bounds. The units the subject
// used carry over: see "Per-subject limits" in the package doc.
func (l *Limiter) AllowNWith(ctx context.Context, key string, n int64, lim strategy.Limit) (strategy.Result, error) {
	a, ok := l.overrides.Get(lim)
	if !ok {
		sc, err := overrideScale(l.b.Lim, lim)
		if err != nil {
			return strategy.Result{}, err
		}
		a = args{sc: sc, lp: sc.lp, wp: sc.wp, capacity: sc.capacity}
		l.overrides.Put(lim, a)
	}
	k, err := l.b.KeyN(ctx, key, n)
	if err != nil {
		return strategy.Result{}, err
	}
	if a.sc.denyAll() {
		return redisx.DenyAll(ctx)
	}
	return redisx.Decision(ctx, l.b.RDB, script, k, a.sc.capacity,
		a.lp, a.wp, a.capacity, n, l.b.Now(), l.digits, l.format, l.lp, l.wp, l.window)
}

// PeekWith is Peek against lim (see AllowNWith).
func (l *Limiter) PeekWith(ctx context.Context, key string, lim strategy.Limit) (strategy.Result, error) {
	return l.AllowNWith(ctx, key, 0, lim)
}

// overrideScale checks lim, a per-call limit, against base, the
// strategy's, and returns its scale.
func overrideScale(base, lim strategy.Limit) (scale, error) {
	if err := strategy.ValidateOverride(base, lim); err != nil {
		return scale{}, err
	}
	if err := exact.CheckCarry(base); err != nil {
		return scale{}, err
	}
	if err := exact.CheckCarry(lim); err != nil {
		return scale{}, err
	}
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

// AllowNWith is AllowN with lim's capacity and rate instead of the
// strategy's Limit (see Limiter.AllowNWith).
func (l *Local) AllowNWith(ctx context.Context, key string, n int64, lim strategy.Limit) (strategy.Result, error) {
	s, err := overrideScale(l.t.Lim, lim)
	if err != nil {
		return strategy.Result{}, err
	}
	return l.allowN(ctx, key, n, s)
}

// allowN is AllowN under the scale s of a per-call limit.
func (l *Local) allowN(ctx context.Context, key string, n int64, s scale) (strategy.Result, error) {
	sk, now, err := l.t.Start(ctx, key, n)
	if err != nil {
		return strategy.Result{}, err
	}
	if s.denyAll() {
		return redisx.DenyAll(ctx)
	}
	own := s == l.sc
	window := l.t.Lim.Window.Milliseconds()
	var res strategy.Result
	l.t.Store.Do(sk, now, func(v *tat) int64 {
		var expires int64
		if own && v.wp == 0 {
			res, expires = s.decide(v, now, n)
			return expires
		}
		res, expires = l.decideWith(v, s, own, window, now, n)
		return expires
	})
	return res, nil
}

// PeekWith is Peek against lim (see AllowNWith).
func (l *Local) PeekWith(ctx context.Context, key string, lim strategy.Limit) (strategy.Result, error) {
	return l.AllowNWith(ctx, key, 0, lim)
}

// decideWith is the script's decision under s on a TAT stored under
// another limit, or under s when s is not the strategy's own (own false):
// how far TAT is ahead of now, in the stored scale, carries over to s
// (exact.Carry), then s decides; an allowed write records the scale unless
// it is the strategy's own.
func (l *Local) decideWith(v *tat, s scale, own bool, windowMs, now, n int64) (strategy.Result, int64) {
	olp, owp := v.lp, v.wp
	if owp == 0 {
		olp, owp = l.sc.lp, l.sc.wp
	}
	var ahead int64
	if d := v.ms - now; d >= 0 {
		hi, lo := bits.Mul64(uint64(d), uint64(olp))
		if hi != 0 || lo >= 1<<62 {
			ahead = s.full // far beyond any capacity
		} else {
			ahead = exact.Carry(int64(lo)+v.frac, owp, exact.Scale{WP: s.wp, Capacity: s.capacity, Full: s.full}, windowMs)
		}
	}
	res, expires := s.decideAhead(v, ahead, now, n)
	if !res.Allowed || n == 0 {
		// v unchanged: it matters until its TAT
		if v.frac > 0 {
			return res, v.ms + 1
		}
		return res, v.ms
	}
	if !own {
		v.lp, v.wp = s.lp, s.wp
	}
	return res, expires
}

var (
	_ strategy.LimitValidator = (*Limiter)(nil)
	_ strategy.LimitValidator = (*Local)(nil)
)

// ValidateLimit returns the error AllowNWith would return for lim, or nil
// (see strategy.LimitValidator).
func (l *Limiter) ValidateLimit(lim strategy.Limit) error {
	_, err := overrideScale(l.b.Lim, lim)
	return err
}

// ValidateLimit returns the error AllowNWith would return for lim, or nil
// (see strategy.LimitValidator).
func (l *Local) ValidateLimit(lim strategy.Limit) error {
	_, err := overrideScale(l.t.Lim, lim)
	return err
}
