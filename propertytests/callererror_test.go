package propertytests

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/prop"

	"github.com/ratekit/ratelimit"
	"github.com/ratekit/ratelimit/compactlog"
	"github.com/ratekit/ratelimit/strategy"
)

// overrider is a strategy that decides under per-call limits but whose
// check ahead accepts every limit, as one of another module may: the
// facade then meets a refused limit at each call.
type overrider struct {
	strategy.Strategy
	strategy.LimitOverrider
}

// ValidateLimit accepts every limit: the calls refuse it.
func (overrider) ValidateLimit(strategy.Limit) error { return nil }

// callerErrorProp: an invalid-argument error is the caller's. A facade
// Limiter over subject s (each host's strategy behind ratelimit.Wrap, with
// FailOpen) with a tier that s refuses returns, for every call under that
// tier, no Result and an error wrapping strategy.ErrInvalidLimit, never a
// degraded Result of the failure policy; and since the breaker counts those
// calls as answered, the Limiter's own decisions stay exactly what s alone
// decides, never degraded, over random schedules.
func callerErrorProp(_ *testing.T, s subject, b backend, mk envBuilder, _ *stats) gopter.Prop {
	o := genOpts{maxBatch: 4, subjects: 2, peeks: true, windows: len(b.windows)}
	return prop.ForAll(func(c Case) string {
		lim := c.limit(b.windows)
		var envs [2]*env // behind the facade, alone
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
		refused := strategy.Limit{Limit: compactlog.MaxLimit + 1, Window: lim.Window}
		ls := make([]*ratelimit.Limiter, len(e.hosts))
		tiers := make([]strategy.Strategy, len(e.hosts))
		for h, host := range e.hosts {
			ov, ok := host.(strategy.LimitOverrider)
			if !ok {
				return fmt.Sprintf("%T does not implement strategy.LimitOverrider", host)
			}
			if v, ok := host.(strategy.LimitOverrider); !ok || v.ValidateLimit(refused) == nil {
				return fmt.Sprintf("%T accepts %+v; the property needs a limit it refuses", host, refused)
			}
			l, err := ratelimit.Wrap(overrider{host, ov}, ratelimit.Config{OnFailure: ratelimit.FailOpen,
				Timeout: time.Minute, Tiers: map[string]ratelimit.Limit{"refused": {Limit: refused.Limit}}})
			if err != nil {
				return "Wrap: " + err.Error()
			}
			ls[h] = l
			if tiers[h], err = l.Tier("refused"); err != nil {
				return "Tier: " + err.Error()
			}
		}
		for i, st := range c.Steps {
			e.advance(st.advance(lim, e.now()))
			alone.clock.Set(e.clock.Now())
			for _, r := range st.Reqs {
				bad := e.call(tiers[r.Host], i, r.Host, r.Subject, r.Op, r.N)
				if !errors.Is(bad.err, strategy.ErrInvalidLimit) || bad.res != (strategy.Result{}) {
					return fmt.Sprintf("under a refused tier %s; want no Result and an error wrapping ErrInvalidLimit", bad)
				}
				got := e.call(ls[r.Host], i, r.Host, r.Subject, r.Op, r.N)
				want := alone.do(i, r)
				if got.err != nil || want.err != nil || got.res != want.res {
					return fmt.Sprintf("behind the facade %s\n               want %s", got, want)
				}
			}
		}
		return ""
	}, genCase(o))
}
