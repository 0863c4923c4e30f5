package propertytests

import (
	"fmt"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/prop"

	"github.com/ratekit/ratelimit/compare"
	"github.com/ratekit/ratelimit/strategy"
)

// candidateOf is the candidate algorithm compared with subject s: the next
// algorithm of the table, so every algorithm is enforced once and a
// candidate once.
func candidateOf(s subject) subject {
	for i, a := range algorithms {
		if a.name == s.name {
			return algorithms[(i+1)%len(algorithms)]
		}
	}
	return algorithms[0]
}

// compareProp: a compare.Limiter (candidate inline) over subject s gives
// every caller exactly what s alone gives, over random serial schedules
// with peeks and resets; its candidate holds the state a lone candidate
// fed the same requests holds (their Peeks agree after every request);
// and its agreement matrix is the one the two lone strategies' decisions
// make.
func compareProp(_ *testing.T, s subject, b backend, mk envBuilder, _ *stats) gopter.Prop {
	o := genOpts{maxBatch: 4, subjects: 2, peeks: true, resets: true, windows: len(b.windows)}
	cs := candidateOf(s)
	return prop.ForAll(func(c Case) string {
		lim := c.limit(b.windows)
		var envs [4]*env // under compare: enforced, candidate; alone: enforced, candidate
		for i, sub := range []subject{s, cs, s, cs} {
			e, err := mk(sub, lim, c.start(lim), false)
			if err != nil {
				return "build: " + err.Error()
			}
			envs[i] = e
		}
		e := envs[0]
		// one clock for all four: e's, guarded when either algorithm keeps
		// fixed windows (see fixedWindowGuard)
		for _, x := range envs {
			if x.guard != nil {
				e.guard = x.guard
			}
		}
		if e.guard != nil {
			e.clock.Set(time.UnixMilli(e.guard(e.now())))
		}
		sync := func() {
			for _, x := range envs[1:] {
				x.clock.Set(e.clock.Now())
			}
		}
		sync()
		cmp := make([]*compare.Limiter, len(e.hosts))
		for h := range e.hosts {
			l, err := compare.New(e.hosts[h], envs[1].hosts[h], compare.WithInline())
			if err != nil {
				return "compare.New: " + err.Error()
			}
			cmp[h] = l
		}
		var want compare.Agreement
		for i, st := range c.Steps {
			e.advance(st.advance(lim, e.now()))
			sync()
			for _, r := range st.Reqs {
				got := e.call(cmp[r.Host], i, r.Host, r.Subject, r.Op, r.N)
				alone := envs[2].do(i, r)
				if got.err != nil || alone.err != nil || got.res != alone.res {
					return fmt.Sprintf("through compare %s\n                alone %s", got, alone)
				}
				switch r.Op {
				case opAllow:
					if r.N > 0 {
						cand := envs[3].do(i, r)
						if cand.err != nil {
							return cand.String()
						}
						want.Add(compare.OutcomeOf(alone.res.Allowed, cand.res.Allowed))
					}
				case opReset:
					if ev := envs[3].do(i, r); ev.err != nil {
						return ev.String()
					}
				}
				shadow := envs[1].call(envs[1].hosts[0], i, 0, r.Subject, opPeek, 0)
				lone := envs[3].call(envs[3].hosts[0], i, 0, r.Subject, opPeek, 0)
				if shadow.err != nil || lone.err != nil || shadow.res != lone.res {
					return fmt.Sprintf("after %s: candidate %s state\n  in shadow %s\n  alone     %s", got, cs.name, shadow, lone)
				}
			}
		}
		var got compare.Agreement
		for _, l := range cmp {
			a := l.Agreement()
			got.BothAllow += a.BothAllow
			got.BothDeny += a.BothDeny
			got.EnforcedOnlyDeny += a.EnforcedOnlyDeny
			got.CandidateOnlyDeny += a.CandidateOnlyDeny
			got.CandidateErrors += a.CandidateErrors
			got.Dropped += a.Dropped
		}
		if got != want {
			return fmt.Sprintf("agreement matrix %+v, side by side %+v", got, want)
		}
		return ""
	}, genCase(o))
}

var _ strategy.Strategy = (*compare.Limiter)(nil)
