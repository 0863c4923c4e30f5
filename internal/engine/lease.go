package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

// LeaseRule is how an algorithm keeps its promise when a block of units
// decided now is spent in process later (package lease): what a lease of
// it may do.
type LeaseRule uint8

// The lease rules.
const (
	// LeaseNone: the algorithm does not support leases.
	LeaseNone LeaseRule = iota
	// LeaseAhead: the exact logs. A lease's units are decided now and
	// recorded ahead of now by the lease's lifetime (Req.Ahead), so that
	// they count from now until the lease's end + Window: a unit spent at
	// any time of the lease counts for a whole window from its use.
	LeaseAhead
	// LeaseWindow: the fixed window. A lease never outlives the window it
	// was decided in (the decision's ResetAfter).
	LeaseWindow
	// LeaseBurst: the token bucket and GCRA. A lease of lifetime L is
	// decided under the burst reduced by rate × L (a per-call limit), so
	// that units decided in [t - L, t'] and spent in [t, t'] stay within
	// burst + rate × (t' - t).
	LeaseBurst
	// LeaseCounter: the sliding counter. As LeaseWindow, a lease never
	// outlives the aligned window it was decided in, whose end is the
	// decision's ResetAfter less one Window (an allowed decision's
	// ResetAfter is the end of the next window). Its units are in that
	// window's count, and a unit spent later than decided was decided
	// against more of the previous window's count than at its use: the
	// counter's bounds hold.
	LeaseCounter
)

// LeaseRule returns the algorithm's lease rule.
func (r *Redis[P, S]) LeaseRule() LeaseRule { return r.spec.Lease }

// LeaseRule returns the algorithm's lease rule, LeaseNone for the exact
// logs: the twin does not record ahead of now.
func (l *Local[P, S]) LeaseRule() LeaseRule {
	if l.spec.Lease == LeaseAhead {
		return LeaseNone
	}
	return l.spec.Lease
}

// AllowAhead is AllowN for an algorithm of rule LeaseAhead, its n units
// recorded ahead (whole ms, > 0) after now: decided against the units
// that count now, and counted from now until now + ahead + Window.
func (r *Redis[P, S]) AllowAhead(ctx context.Context, key string, n int64, ahead time.Duration) (strategy.Result, error) {
	if r.spec.Lease != LeaseAhead {
		return strategy.Result{}, fmt.Errorf("%w: %s cannot record units ahead of now", strategy.ErrInvalidOption, r.spec.Name)
	}
	if ahead <= 0 || ahead%time.Millisecond != 0 {
		return strategy.Result{}, fmt.Errorf("%w: %s: ahead must be whole milliseconds > 0, got %s", strategy.ErrInvalidOption, r.spec.Name, ahead)
	}
	return r.do(ctx, Req{Op: OpAllow, Key: key, N: n, Ahead: ahead.Milliseconds()})
}
