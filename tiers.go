package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ratekit/ratelimit/internal/fielderr"
	"github.com/ratekit/ratelimit/internal/quote"
	"github.com/ratekit/ratelimit/strategy"
)

// withTiers builds l's tier Limiters (Config.Tiers), once, and sets l's
// shadow mode. Each tier's limit is checked by the strategy's own rules
// (strategy.LimitOverrider) when it has them, and by its FailLocal twin's,
// so that a limit the algorithm refuses fails here, naming the tier, and
// never at a call.
func (l *Limiter) withTiers() (*Limiter, error) {
	l.shadow = l.cfg.Mode == modeShadow
	if len(l.cfg.Tiers) == 0 {
		return l, nil
	}
	tiers := func(problem string) error {
		return newFieldError(strategy.ErrInvalidOption, "Tiers", jsonName("Tiers"), func(name func(string) string) string {
			return name("Tiers") + ": " + problem
		})
	}
	if len(l.cfg.Tiers) > maxTiers {
		return nil, tiers(fmt.Sprintf("want at most %d, got %d", maxTiers, len(l.cfg.Tiers)))
	}
	if _, ok := l.st.(strategy.LimitOverrider); !ok {
		return nil, tiers("the strategy cannot decide under another limit (it does not implement strategy.LimitOverrider)")
	}
	window := l.st.Limit().Window
	l.tiers = make(map[string]*tier, len(l.cfg.Tiers))
	names := make([]string, 0, len(l.cfg.Tiers))
	for name := range l.cfg.Tiers {
		names = append(names, name)
	}
	slices.Sort(names) // the first invalid tier by name, whatever the map's order
	for _, name := range names {
		lim := l.cfg.Tiers[name]
		if problem := policyNameProblem(name); problem != "" {
			return nil, tiers(problem)
		}
		if lim.Window == 0 {
			lim.Window = window
		}
		if lim.Window != window {
			return nil, tierError(strategy.ErrInvalidLimit, name, "Window", func(n func(string) string) string {
				return fmt.Sprintf("%s must be 0 or the policy's %s, got %s", n("Window"), window, lim.Window)
			})
		}
		t := *l
		t.tiers = nil
		t.tier, t.lim = name, lim
		share := Config{Limit: lim.Limit, Burst: lim.Burst, LocalShare: l.cfg.LocalShare}.local()
		t.localLim = strategy.Limit{Limit: share.Limit, Window: lim.Window, Burst: share.Burst}
		if err := l.checkTier(name, lim, t.localLim); err != nil {
			return nil, err
		}
		t.cfg.Limit, t.cfg.Burst = lim.Limit, lim.Burst
		t.capacity = lim.Capacity()
		if l.st.Limit().Burst == 0 { // the algorithm has no burst
			t.capacity = lim.Limit
		}
		l.tiers[name] = &tier{v: &t}
	}
	return l, nil
}

// checkTier reports whether the strategy, and the FailLocal twin with the
// tier's share local, can decide under the tier's limit lim, as a
// *FieldError naming the tier's field at fault (Limit, or Burst when the
// limit is valid without it).
func (l *Limiter) checkTier(name string, lim, local strategy.Limit) error {
	// check returns the first error, and what to add to its message
	check := func(lim, local strategy.Limit) (string, error) {
		if err := lim.Validate(); err != nil {
			return "", err
		}
		if v, ok := l.st.(strategy.LimitOverrider); ok {
			if err := v.ValidateLimit(lim); err != nil {
				return "", err
			}
		}
		if l.fail != nil && l.fail.local != nil {
			if v, ok := l.fail.local.(strategy.LimitOverrider); ok {
				if err := v.ValidateLimit(local); err != nil {
					return " (FailLocal's twin, with LocalShare)", err
				}
			}
		}
		return "", nil
	}
	suffix, err := check(lim, local)
	if err == nil {
		return nil
	}
	field := "Limit"
	if lim.Burst != 0 {
		if _, err := check(strategy.Limit{Limit: lim.Limit, Window: lim.Window}, strategy.Limit{Limit: local.Limit, Window: local.Window}); err == nil {
			field = "Burst"
		}
	}
	sentinel := strategy.ErrInvalidLimit
	if !errors.Is(err, sentinel) {
		sentinel = strategy.ErrInvalidOption
	}
	var fe *fielderr.Error
	if !errors.As(err, &fe) { // a strategy's own error that names no field
		return &FieldError{Field: "Tiers." + name + "." + field, JSON: jsonName("Tiers") + "." + name + "." + jsonName(field),
			Err: fmt.Errorf("%w (Tiers: tier %s)", err, quote.Value(name))}
	}
	return tierError(sentinel, name, field, func(n func(string) string) string { return fe.Detail(n) + suffix })
}

// tierError returns the *FieldError of the field of tier name, e.g.
// "Tiers: tier "pro": Limit must be >= 0" ("tiers: tier "pro": limit must
// be >= 0" in JSON).
func tierError(sentinel error, name, field string, text func(name func(string) string) string) *FieldError {
	return newFieldError(sentinel, "Tiers."+name+"."+field, jsonName("Tiers")+"."+name+"."+jsonName(field),
		func(n func(string) string) string { return n("Tiers") + ": tier " + quote.Value(name) + ": " + text(n) })
}

// Tier returns the strategy (a strategy.Refunder too) that decides under
// the named tier's limit (Config.Tiers) with the Limiter's keys, failure
// handling and Observer, without allocating. An unknown name is an error
// wrapping strategy.ErrInvalidOption; to fall back to the own limit:
//
//	st, err := l.Tier(user.Plan)
//	if err != nil {
//		st = l
//	}
func (l *Limiter) Tier(name string) (strategy.Strategy, error) {
	if t, ok := l.tiers[name]; ok {
		return t, nil
	}
	names := make([]string, 0, len(l.tiers))
	for n := range l.tiers {
		names = append(names, quote.Value(n))
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: no tier %s; the limiter has no tiers", strategy.ErrInvalidOption, quote.Value(name))
	}
	slices.Sort(names)
	return nil, fmt.Errorf("%w: no tier %s; the tiers are %s", strategy.ErrInvalidOption, quote.Value(name), strings.Join(names, ", "))
}

// tier decides under one tier of a Limiter (see Limiter.Tier): v is a copy
// of the Limiter, with the tier's limit. Only the methods of a strategy are
// offered, so that a tier is not mistaken for a policy.
type tier struct{ v *Limiter }

var _ strategy.Refunder = (*tier)(nil)

func (t *tier) AllowN(ctx context.Context, key string, n int64) (Result, error) {
	return t.v.AllowN(ctx, key, n)
}

func (t *tier) Peek(ctx context.Context, key string) (Result, error) { return t.v.Peek(ctx, key) }

func (t *tier) Reset(ctx context.Context, key string) error { return t.v.Reset(ctx, key) }

func (t *tier) Limit() Limit { return t.v.lim }

func (t *tier) RefundN(ctx context.Context, key string, n int64) (Result, error) {
	return t.v.RefundN(ctx, key, n)
}
