package gcra

import (
	_ "embed"
	"math/bits"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/internal/exact"
	"github.com/ratekit/ratelimit/strategy"
)

var (
	//go:embed gcra.lua
	scriptSrc string
	//go:embed refund.lua
	refundSrc string
)

// spec is GCRA for the engine. Its tag has two letters, like the others: a
// key name of 14 bytes or less (rl:gc:{u1234}) costs 16 bytes less in
// Redis than one of 15 to 30.
var spec = exact.Spec("gcra", "gc", scriptSrc, refundSrc, decide, give, tail)

// tail is the ARGV the script reads of the strategy's own limit: the
// digits of a stored remainder in 1/lp ms and the format of the value
// (none when lp is 1), its lp and wp, and the window.
func tail(own *exact.Params) []any {
	digits, format := 0, ""
	if own.LP > 1 {
		digits = len(strconv.FormatInt(own.LP-1, 10))
		format = "%d%0" + strconv.Itoa(digits) + "d"
	}
	return []any{digits, format, own.LP, own.WP, own.Window}
}

// Limiter is GCRA on Redis; it implements strategy.Strategy,
// LimitOverrider and Refunder. It is safe for concurrent
// use.
type Limiter struct {
	engine.Redis[exact.Params, tat]
}

// Local is GCRA in this process only, Limiter's twin: for the same clock,
// the same decisions. A subject costs four int64 (two of them for per-call
// limits) and its map entry, until its theoretical arrival time passes.
// It is safe for concurrent use.
type Local struct {
	engine.Local[exact.Params, tat]
}

// New returns a GCRA limiter that keeps each subject's theoretical arrival
// time in Redis through rdb (a *redis.Client, *redis.ClusterClient or
// *redis.Ring) under the keys <prefix>gc:{<subject>}. The capacity is
// lim.Burst, or lim.Limit when Burst is 0; the rate is lim.Limit per
// lim.Window. It fails when lim or an option is invalid, or when the limit
// cannot be computed exactly (see the package doc, also for per-call limits
// and refunds).
func New(rdb redis.Scripter, lim strategy.Limit, opts ...strategy.Option) (*Limiter, error) {
	return engine.New[Limiter](spec, rdb, lim, opts)
}

// NewLocal is New's twin (see Local); WithClock (time.Now when not given)
// and WithMaxSubjects are the options it reads.
func NewLocal(lim strategy.Limit, opts ...strategy.Option) (*Local, error) {
	return engine.NewLocal[Local](spec, lim, opts)
}

// tat is a theoretical arrival time: ms + frac/lp milliseconds since the
// Unix epoch. The zero tat has long passed.
type tat struct {
	ms, frac int64
	// the scale of frac when the last write was under a per-call limit
	// other than the strategy's
	exact.Written
}

// decide is the decision script: n units (0: peek) against v under p at
// now. It returns the Result and until when v matters.
func decide(v *tat, p, own *exact.Params, now, n int64) (strategy.Result, int64) {
	ahead := v.ahead(p, now)
	if !v.RatePlain(p, own) {
		// v written at another rate, or p is a per-call limit of another
		// rate: how far v is after now, in its stored scale, carries over
		// to p (exact.Carry), then p decides; an allowed write records p's
		// scale unless it has the strategy's own rate.
		olp, owp := v.Of(own)
		if ahead = 0; v.ms >= now {
			hi, lo := bits.Mul64(uint64(v.ms-now), uint64(olp))
			if hi != 0 || lo >= 1<<62 {
				ahead = p.Full // far beyond any capacity
			} else {
				ahead = exact.Carry(int64(lo)+v.frac, owp, p.Scale, p.Window)
			}
		}
	}
	res, expires := v.take(p, ahead, now, n)
	if !res.Allowed || n == 0 {
		// v unchanged: it matters until its TAT
		if v.frac > 0 {
			return res, v.ms + 1
		}
		return res, v.ms
	}
	v.Written = exact.RateAs(p, own)
	return res, expires
}

// ahead is how far v, written under p, is after now, in 1/lp ms, at most
// a capacity used in full.
func (v *tat) ahead(p *exact.Params, now int64) int64 {
	d := v.ms - now
	switch {
	case d < 0:
		return 0
	case d > p.FullMs:
		return p.Full
	}
	return min(d*p.LP+v.frac, p.Full)
}

// take is the decision on v once its distance after now is known: an
// allowed request moves TAT to now + ahead + n emission intervals.
func (v *tat) take(p *exact.Params, ahead, now, n int64) (strategy.Result, int64) {
	res, after, expires := exact.Decide(p, ahead, now, n)
	if after != ahead {
		v.ms, v.frac = now+after/p.LP, after%p.LP
	}
	return res, expires
}

// give is the refund script: TAT moves back by n emission intervals,
// never earlier than now, then a peek. A TAT written under a per-call
// limit (a tier) gets nothing back.
func give(v *tat, own *exact.Params, now, n int64) (strategy.Result, int64) {
	if v.WP != 0 {
		return decide(v, own, own, now, 0)
	}
	// TAT - n emission intervals from the stored TAT, not capped at an
	// empty bucket from now: a refund whose clock is behind the last
	// decision's gives back n units and no more. A TAT more than two
	// capacities after now is left as it is (under-admission only).
	switch d := v.ms - now; {
	case d < 0:
		*v = tat{}
	case d <= 2*own.FullMs && d*own.LP+v.frac <= 2*own.Full:
		if ahead := d*own.LP + v.frac; n >= exact.CeilDiv(ahead, own.WP) {
			*v = tat{}
		} else {
			ahead -= n * own.WP
			v.ms, v.frac = now+ahead/own.LP, ahead%own.LP
		}
	}
	return v.take(own, v.ahead(own, now), now, 0)
}
