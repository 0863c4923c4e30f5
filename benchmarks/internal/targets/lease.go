package targets

import (
	"context"

	"github.com/ratekit/ratelimit/lease"
	"github.com/ratekit/ratelimit/strategy"
)

// LeasedTargets returns each leasable strategy of ours (see package lease)
// wrapped in a lease.Limiter with its defaults, named "<algorithm>
// leased": a process deciding from blocks of units it took through the
// strategy's own decision. On the report's workload, subjects spread
// over many keys, each subject leases little; its precision probes check
// that leasing keeps the algorithm's bound.
func LeasedTargets() []Target {
	var ts []Target
	for _, a := range []strategy.Algorithm{strategy.SlidingLog, strategy.CompactLog, strategy.FixedWindow, strategy.SlidingCounter, strategy.TokenBucket, strategy.GCRA} {
		ts = append(ts, Target{Name: string(a) + " leased", Kind: Leased, Algorithm: string(a),
			Note: "lease.New(lim, " + string(a) + ".New), default options",
			New: func(e Env) (Decider, error) {
				opts := []lease.Option{}
				if e.Clock != nil {
					opts = append(opts, lease.WithClock(e.Clock))
				}
				l, err := lease.New(e.Limit, func(lim strategy.Limit) (strategy.Strategy, error) {
					return NewStrategy(a, e.scripter(), lim, e.Prefix, e.Clock, 0)
				}, opts...)
				if err != nil {
					return nil, err
				}
				return leased{l}, nil
			}})
	}
	return ts
}

// leased adapts a lease.Limiter; Close gives back what its leases hold.
type leased struct{ l *lease.Limiter }

func (d leased) Decide(ctx context.Context, subject string) (bool, error) {
	r, err := d.l.AllowN(ctx, subject, 1)
	return r.Allowed, err
}

func (d leased) Close() error { return d.l.Close(context.Background()) }
