package ratelimit

import (
	"maps"
	"slices"

	"github.com/ratekit/ratelimit/strategy"
)

// DenyCacheLen returns how many subjects l's denial cache holds, or -1 when
// it has none.
func DenyCacheLen(l *Limiter) int {
	if l.fail == nil || l.fail.deny == nil {
		return -1
	}
	return l.fail.deny.Len()
}

// FailLocalSubjects returns how many subjects l's FailLocal twin holds, or
// -1 when it has none.
func FailLocalSubjects(l *Limiter) int {
	if l.fail == nil || l.fail.local == nil {
		return -1
	}
	return l.fail.local.(interface{ Subjects() int }).Subjects()
}

// Inline reports whether l calls its strategy on the caller's goroutine.
func Inline(l *Limiter) bool { return l.fail != nil && l.fail.guard.Inline() }

// StrategyOf returns the strategy that makes l's decisions.
func StrategyOf(l *Limiter) strategy.Strategy { return l.st }

// Evicted returns how many subjects l evicted from this process since it
// was built (its twin, FailLocal twin and denial cache).
func Evicted(l *Limiter) uint64 { return l.ev.total.Load() }

// Bounds, for tests that go up to them.
const (
	MaxPolicies    = maxPolicies
	MaxPolicyBytes = maxPolicyBytes
	MaxTiers       = maxTiers
	MaxTimeout     = maxTimeout
	DefaultTimeout = defaultTimeout
)

// AlgorithmTable returns the algorithms the facade builds, sorted.
func AlgorithmTable() []strategy.Algorithm {
	names := make([]strategy.Algorithm, 0, len(algorithms))
	for a := range algorithms {
		names = append(names, a)
	}
	slices.Sort(names)
	return names
}

// SetNames returns the names of the policies s holds, sorted.
func SetNames(s *Set) []string { return slices.Clone(s.state.Load().names) }

// SetPolicies returns the policies s enforces, as given to NewSet or the
// last successful Update.
func SetPolicies(s *Set) Policies { return maps.Clone(s.state.Load().policies) }
