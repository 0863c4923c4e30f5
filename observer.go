package ratelimit

import (
	"context"
	"time"

	"github.com/ratekit/ratelimit/breaker"
	"github.com/ratekit/ratelimit/strategy"
)

// Decision is what a Limiter reports to its Observer after each decision.
// It holds no subject key: keys are unbounded in number and may be personal
// data, so telemetry must never see them.
type Decision struct {
	Policy    string             // Config.Name
	Algorithm strategy.Algorithm // Config.Algorithm ("" for a Limiter made by Wrap)
	Op        string             // "allow", "peek", "reset", "refund", or "compare" (Config.Candidate)
	N         int64              // the cost asked for (AllowN)
	Result    Result             // the outcome; zero when Err is set
	Err       error              // the error returned to the caller, if any
	Start     time.Time          // when the decision started
	Duration  time.Duration      // how long it took

	Degraded bool          // the failure policy decided (Result.Degraded); Cause says why
	Cause    error         // Degraded: the Redis failure, or breaker.ErrOpen (wrapped)
	Cached   bool          // the denial cache decided, without a round trip (WithDenyCache)
	Breaker  breaker.State // the circuit breaker's state after the decision (Redis and Wrap limiters)

	// Evicted is how many subjects the limiter's in-process structures (its
	// twin, FailLocal twin or denial cache) evicted to make room for others
	// since the previous decision reported to the Observer: summed over
	// decisions it counts every eviction once, so a metric can add it up.
	// Evictions mean more subjects than the bound within a window (see
	// WithMaxSubjects).
	Evicted int64

	// Agreement is, for Op "compare", how the candidate's decision (in
	// Result; Algorithm is the candidate's) compared with the enforced
	// one: "both_allow", "both_deny", "enforced_only_deny",
	// "candidate_only_deny", "candidate_error" or "dropped" (see
	// compare.Outcome). It is "" for every other Op.
	Agreement string
}

// Observer is told of every decision of a Limiter. Observe runs on the
// caller's goroutine after the decision, with the caller's ctx, so it must
// be quick and safe for concurrent use. Package ratelimitotel implements it
// with OpenTelemetry.
type Observer interface {
	Observe(ctx context.Context, d Decision)
}

// The operations of a Limiter, as Decision.Op names them.
const (
	opAllow   = "allow"
	opPeek    = "peek"
	opReset   = "reset"
	opCompare = "compare"
)

// outcome is what a decision tells the Observer beyond its Result.
type outcome struct {
	degraded bool
	cached   bool
	cause    error
}

// report tells the Observer of a decision.
func (l *Limiter) report(ctx context.Context, op string, n int64, r Result, err error, out outcome, start time.Time) {
	d := Decision{Policy: l.cfg.Name, Algorithm: l.cfg.Algorithm, Op: op, N: n,
		Result: r, Err: err, Start: start, Duration: time.Since(start),
		Degraded: out.degraded, Cause: out.cause, Cached: out.cached, Evicted: l.ev.take()}
	if l.fail != nil {
		d.Breaker = l.fail.breaker.State()
	}
	l.obs.Observe(ctx, d)
}
