package propertytests

import (
	"fmt"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/prop"

	"github.com/ratekit/ratelimit"
)

// shadowProp: a facade Limiter in shadow mode over subject s (each host's
// strategy wrapped with ratelimit.Wrap, Mode ModeShadow) lets every request
// through, and says exactly what s alone decides: a request s allows comes
// back as s's Result; one s denies comes back with Allowed and Shadow set,
// its other fields s's; Peek is s's, never Shadow; and a shadow denial
// records nothing, so the two stay in step over random schedules.
func shadowProp(_ *testing.T, s subject, b backend, mk envBuilder, _ *stats) gopter.Prop {
	o := genOpts{maxBatch: 4, subjects: 2, peeks: true, resets: true, windows: len(b.windows)}
	return prop.ForAll(func(c Case) string {
		lim := c.limit(b.windows)
		var envs [2]*env // in shadow, alone
		for i := range envs {
			e, err := mk(s, lim, c.start(lim), false)
			if err != nil {
				return "build: " + err.Error()
			}
			envs[i] = e
		}
		e, alone := envs[0], envs[1]
		if e.guard != nil {
			alone.guard = e.guard
		}
		shadow := make([]*ratelimit.Limiter, len(e.hosts))
		for h := range e.hosts {
			l, err := ratelimit.Wrap(e.hosts[h], ratelimit.Config{Mode: "shadow", Timeout: time.Minute})
			if err != nil {
				return "Wrap: " + err.Error()
			}
			shadow[h] = l
		}
		for i, st := range c.Steps {
			e.advance(st.advance(lim, e.now()))
			alone.clock.Set(e.clock.Now())
			for _, r := range st.Reqs {
				got := e.call(shadow[r.Host], i, r.Host, r.Subject, r.Op, r.N)
				want := alone.do(i, r)
				if got.err != nil || want.err != nil {
					return fmt.Sprintf("in shadow %s\n    alone %s", got, want)
				}
				if r.Op == opAllow && r.N > 0 && !want.res.Allowed {
					want.res.Allowed, want.res.Shadow = true, true
				}
				if got.res != want.res {
					return fmt.Sprintf("in shadow %s\n     want %s", got, want)
				}
			}
		}
		return ""
	}, genCase(o))
}
