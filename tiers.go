package ratelimit

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ratekit/ratelimit/internal/quote"
	"github.com/ratekit/ratelimit/strategy"
)

// withTiers builds l's tier Limiters (Config.Tiers), once, and sets l's
// shadow mode.
func (l *Limiter) withTiers() (*Limiter, error) {
	l.shadow = l.cfg.Mode == ModeShadow
	if len(l.cfg.Tiers) == 0 {
		return l, nil
	}
	if len(l.cfg.Tiers) > MaxTiers {
		return nil, fmt.Errorf("%w: Tiers: want at most %d (MaxTiers), got %d", strategy.ErrInvalidOption, MaxTiers, len(l.cfg.Tiers))
	}
	window := l.st.Limit().Window
	l.tiers = make(map[string]*Limiter, len(l.cfg.Tiers))
	for name, lim := range l.cfg.Tiers {
		if err := validPolicyName(name); err != nil {
			return nil, fmt.Errorf("%w: Tiers: %s", strategy.ErrInvalidOption, strings.TrimPrefix(err.Error(), strategy.ErrInvalidOption.Error()+": "))
		}
		if lim.Window == 0 {
			lim.Window = window
		}
		if lim.Window != window {
			return nil, fmt.Errorf("%w: Tiers: tier %s: Window must be 0 or the policy's %s, got %s", strategy.ErrInvalidLimit, quote.Value(name), window, lim.Window)
		}
		if err := lim.Validate(); err != nil {
			return nil, fmt.Errorf("%w: Tiers: tier %s: %s", strategy.ErrInvalidLimit, quote.Value(name), strings.TrimPrefix(err.Error(), strategy.ErrInvalidLimit.Error()+": "))
		}
		t := *l
		t.tiers = nil
		t.tier, t.lim = name, lim
		share := Config{Limit: lim.Limit, Burst: lim.Burst, LocalShare: l.cfg.LocalShare}.local()
		t.localLim = strategy.Limit{Limit: share.Limit, Window: lim.Window, Burst: share.Burst}
		t.cfg.Limit, t.cfg.Burst = lim.Limit, lim.Burst
		t.capacity = lim.Capacity()
		if l.st.Limit().Burst == 0 { // the algorithm has no burst
			t.capacity = lim.Limit
		}
		l.tiers[name] = &t
	}
	if _, ok := l.st.(strategy.LimitOverrider); !ok {
		return nil, fmt.Errorf("%w: Tiers: the strategy cannot decide under another limit (it does not implement strategy.LimitOverrider)", strategy.ErrInvalidOption)
	}
	return l, nil
}

// Tier returns the Limiter that decides under the limit of the named tier
// (Config.Tiers), with the same strategy, keys, failure handling and
// Observer: a subject's usage is the same whichever tier it is decided
// under. It does not allocate, so it can be called for each request:
//
//	r, err := l.Tier(user.Plan).Allow(ctx, user.ID)
//
// When a subject's tier changes mid-window it keeps what it used: an
// upgrade gives the new headroom at once, and a downgrade below what it
// used denies until enough leaves the window (the algorithm packages say
// exactly how, for the token bucket and GCRA too). An unknown name returns
// l itself, deciding under Config's own limit, so that a subject without a
// known tier gets the default; Tiers lists the names. A tier Limiter's
// Config is l's with Limit and Burst the tier's.
func (l *Limiter) Tier(name string) *Limiter {
	if t, ok := l.tiers[name]; ok {
		return t
	}
	return l
}

// Tiers returns the names of the limiter's tiers, sorted.
func (l *Limiter) Tiers() []string {
	names := make([]string, 0, len(l.tiers))
	for n := range l.tiers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
