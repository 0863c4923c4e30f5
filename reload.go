package ratelimit

import (
	"maps"
	"reflect"

	"github.com/ratekit/ratelimit/compare"
	"github.com/ratekit/ratelimit/strategy"
)

// setState is one generation of a Set's policies: what Update builds aside
// and then swaps in with one atomic store. It is never modified once
// stored, so Get reads it without a lock.
type setState struct {
	policies Policies            // as given to NewSet or Update (a copy)
	configs  map[string]Config   // the scoped Config of each policy (Name and Prefix set)
	limiters map[string]*Limiter // by policy name
	names    []string            // sorted
}

// Update replaces the Set's policies with p atomically, or leaves them on
// any error (a *FieldError). An unchanged policy keeps its Limiter and its
// in-process state; a changed one gets a new Limiter on the same keys.
func (s *Set) Update(p Policies) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.build(p, s.state.Load())
	if err != nil {
		return err
	}
	s.state.Store(st)
	return nil
}

// build validates p and returns the generation of a Set that enforces it,
// reusing from prev (nil when there is none) the Limiter of every policy
// whose scoped Config is unchanged. It changes nothing that exists.
func (s *Set) build(p Policies, prev *setState) (*setState, error) {
	cfgs, err := p.scopedAll()
	if err != nil {
		return nil, err
	}
	st := &setState{
		policies: maps.Clone(p),
		configs:  make(map[string]Config, len(cfgs)),
		limiters: make(map[string]*Limiter, len(cfgs)),
		names:    make([]string, 0, len(cfgs)),
	}
	for _, c := range cfgs {
		l := reusable(prev, c)
		if l == nil {
			var extra []Option
			// on Redis the candidate's state is in its keys, which a new
			// strategy (on the Set's batching client) reads as well
			if cand := promoted(prev, c); cand != nil && s.local {
				extra = append(extra, withStrategy(cand))
			}
			if l, err = s.mk(c, extra...); err != nil {
				return nil, ofPolicy(c.Name, err)
			}
		}
		st.configs[c.Name] = c
		st.limiters[c.Name] = l
		st.names = append(st.names, c.Name)
	}
	return st, nil
}

// reusable returns prev's Limiter for the scoped Config c when prev holds
// the same policy unchanged, nil otherwise.
func reusable(prev *setState, c Config) *Limiter {
	if prev == nil {
		return nil
	}
	old, ok := prev.configs[c.Name]
	if !ok || !sameConfig(old, c) {
		return nil
	}
	return prev.limiters[c.Name]
}

// promoted returns the candidate strategy of prev's policy c.Name when c
// promotes it: c enforces what the candidate decided (same algorithm,
// limits and key prefix). The new Limiter then decides with that strategy
// itself, so an in-process candidate's state carries over as a Redis one's
// does through its keys.
func promoted(prev *setState, c Config) strategy.Strategy {
	if prev == nil {
		return nil
	}
	old, ok := prev.configs[c.Name]
	if !ok || old.Candidate == nil {
		return nil
	}
	cc, err := old.candidate()
	if err != nil || !sameConfig(cc.strategyFields(), c.strategyFields()) {
		return nil
	}
	if cmp, ok := prev.limiters[c.Name].st.(*compare.Limiter); ok {
		return cmp.Candidate()
	}
	return nil
}

// sameConfig reports whether a Limiter built for a enforces b too, so that
// Update keeps it (and its in-process state) rather than rebuilding it.
// It is the one place that decides "unchanged": a field added to Config is
// compared here. reflect.DeepEqual compares slices, maps and pointed-to
// values by content; a func field would compare unequal unless both are
// nil, which only costs a rebuild.
func sameConfig(a, b Config) bool { return reflect.DeepEqual(a, b) }
