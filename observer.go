package ratelimit

import (
	"context"
	"time"

	"github.com/ratekit/ratelimit/breaker"
	"github.com/ratekit/ratelimit/lease"
	"github.com/ratekit/ratelimit/strategy"
)

// Decision is what a Limiter reports to its Observer after each call,
// without the subject's key: telemetry must never see it.
type Decision struct {
	Policy         string             // Config.Name
	Algorithm      strategy.Algorithm // Config.Algorithm ("" for Wrap's); the candidate's for "compare"
	Op             string             // "allow", "peek", "reset", "refund", "compare" (a candidate's decision), or a lease's event: "lease_take", "lease_give_back", "lease_strand" (N its units)
	N              int64              // the cost asked for
	Result         Result             // the outcome; zero when Err is set
	Err            error              // the error returned to the caller, if any
	Start          time.Time          // when the call started
	Duration       time.Duration      // how long it took
	Degraded       bool               // the failure policy decided; Cause says why
	Cause          error              // Degraded: the Redis failure, or breaker.ErrOpen (wrapped)
	Cached         bool               // decided in process without a round trip: by the denial cache, or from a lease
	Breaker        breaker.State      // the breaker's state after the call (a Limiter on Redis)
	Evicted        int64              // subjects evicted in this process since the previous report: a sum counts each once
	Agreement      string             // for "compare": a compare.Outcome ("both_allow", "candidate_only_deny"...)
	EvictionPolicy string             // once per Limiter on Redis (per Set): Redis's maxmemory-policy if it may evict keys, or "unknown"; docs/failover.md
}

// Observer is told of every call of a Limiter, on the caller's goroutine
// after it: Observe must be quick and safe for concurrent use.
type Observer interface {
	Observe(ctx context.Context, d Decision)
}

// leaseEvents is the lease option that tells obs of each lease event of
// the policy cfg, as a Decision of Op "lease_take" (Result.Allowed: the
// lease was granted), "lease_give_back" or "lease_strand", N its units;
// nil without an Observer.
func leaseEvents(obs Observer, cfg Config) lease.Option {
	if obs == nil {
		return nil
	}
	return lease.WithObserver(func(ev lease.Event) {
		op := "lease_strand"
		switch ev.Op {
		case lease.OpTake:
			op = "lease_take"
		case lease.OpGiveBack:
			op = "lease_give_back"
		}
		obs.Observe(context.Background(), Decision{Policy: cfg.Name, Algorithm: cfg.Algorithm, Op: op, N: ev.Units,
			Result: Result{Allowed: ev.Allowed}, Err: ev.Err, Start: time.Now()})
	})
}
