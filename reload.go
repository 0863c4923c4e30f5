package ratelimit

import (
	"maps"
	"reflect"
	"strings"

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

// Update replaces the Set's policies with p, atomically. It validates p and
// builds every Limiter it needs first: on any error the Set is left as it
// was, and the error is a *PolicyError naming the policy and, where it can
// tell, the JSON field at fault. Then one atomic swap:
//
//   - a policy whose Config is unchanged (see Changes) keeps its Limiter,
//     and so the state that Limiter holds in this process: a NewLocalSet's
//     twin, a FailLocal twin, the denial cache, the circuit breaker;
//   - a changed policy gets a new Limiter. On Redis (NewSet) it works on the
//     same keys, so its subjects keep the units they spent unless the
//     algorithm or the prefix changed (each algorithm has keys of its own,
//     so a swap starts its subjects empty, without WRONGTYPE); in process
//     (NewLocalSet) it starts empty;
//   - a removed policy is gone: Get returns an error naming it.
//
// Decisions in flight, and every Limiter obtained from Get before the swap,
// finish under the old policies: a Limiter is never changed, only replaced
// in the Set. Call Get per decision (it is one atomic load and a map
// lookup) to follow reloads; httplimit.NewForPolicy does. A Limiter no
// longer in the Set holds no goroutine, and is garbage collected with its
// in-process state once no caller holds it (the sweep timers of its
// in-process stores hold them weakly).
//
// Update uses the client and options the Set was built with. Concurrent
// Updates are serialized; Update is safe to call while decisions run.
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

// UpdateJSON is Update with policies decoded from JSON by ParsePolicies,
// with the same format and bounds (MaxPolicyBytes, MaxPolicies). A document
// that does not parse changes nothing.
func (s *Set) UpdateJSON(data []byte) error {
	p, err := ParsePolicies(data)
	if err != nil {
		return err
	}
	return s.Update(p)
}

// Policies returns the policies in force, as they were given to NewSet or
// the last successful Update.
func (s *Set) Policies() Policies { return maps.Clone(s.state.Load().policies) }

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
			if cand := promoted(prev, c); cand != nil {
				extra = append(extra, withStrategy(cand))
			}
			if l, err = s.mk(c, extra...); err != nil {
				return nil, policyError(c.Name, err)
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

// Changes lists, by policy name, what replacing one Policies with another
// changes (see Policies.Diff). Each list is sorted.
type Changes struct {
	Added   []string // in the new policies only
	Changed []string // in both, with a different Config: Update rebuilds their Limiter
	Removed []string // in the old policies only
}

// Empty reports whether nothing changes.
func (c Changes) Empty() bool {
	return len(c.Added) == 0 && len(c.Changed) == 0 && len(c.Removed) == 0
}

// String returns e.g. "added search; changed login; removed upload", or
// "no change".
func (c Changes) String() string {
	if c.Empty() {
		return "no change"
	}
	var parts []string
	for _, l := range []struct {
		what  string
		names []string
	}{{"added", c.Added}, {"changed", c.Changed}, {"removed", c.Removed}} {
		if len(l.names) > 0 {
			parts = append(parts, l.what+" "+strings.Join(l.names, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

// Diff returns what replacing p with next changes, with the rule Update
// applies: a policy is changed when its Config differs once Name and Prefix
// are filled in as the Set fills them (so Name "" and Name "login" are the
// same policy "login").
func (p Policies) Diff(next Policies) Changes {
	var c Changes
	for _, name := range p.Names() {
		n, ok := next[name]
		switch {
		case !ok:
			c.Removed = append(c.Removed, name)
		case !sameScoped(name, p[name], n):
			c.Changed = append(c.Changed, name)
		}
	}
	for _, name := range next.Names() {
		if _, ok := p[name]; !ok {
			c.Added = append(c.Added, name)
		}
	}
	return c
}

// sameScoped compares a and b as policy name's Configs.
func sameScoped(name string, a, b Config) bool {
	sa, errA := scoped(name, a)
	sb, errB := scoped(name, b)
	if errA != nil || errB != nil {
		return sameConfig(a, b)
	}
	return sameConfig(sa, sb)
}

// policyError returns err, from building policy name's Limiter, as a
// *PolicyError naming the JSON path of the field at fault, if any.
func policyError(name string, err error) *PolicyError {
	pe := &PolicyError{Policy: name, Err: err}
	if fe := asFieldError(err); fe != nil {
		pe.Field = fe.JSON
	}
	return pe
}
