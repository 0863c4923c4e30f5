package ratelimit

import (
	"context"
	"time"

	"github.com/ratekit/ratelimit/breaker"
	"github.com/ratekit/ratelimit/internal/guard"
	"github.com/ratekit/ratelimit/strategy"
)

// This file is a Limiter's one pipeline: every call of AllowN, Peek, Reset
// and RefundN is one guard.Call, the operation typed (guard.Op) from the
// method to the Observer. In order:
//
//  1. decide times the call for the Observer and dispatches it;
//  2. Reset and RefundN go to their own steps (no failure policy);
//  3. a decision of an in-process Limiter goes to its strategy;
//  4. one of a Limiter on Redis goes through guarded: input, the caller's
//     context, a lease's or the denial cache's decision in process, the
//     breaker, the guard's timeout, then the failure policy (failure.go)
//     when Redis fails;
//  5. shadow mode turns a denial into a pass marked Shadow;
//  6. report tells the Observer.

// decide makes the call c on l's strategy and reports it to the Observer.
func (l *Limiter) decide(ctx context.Context, c guard.Call) (Result, error) {
	var start time.Time
	if l.obs != nil {
		start = time.Now()
	}
	c.Lim = l.lim // a tier's limit; zero (the strategy's own) otherwise
	var (
		r   Result
		err error
		out outcome
	)
	switch {
	case c.Op == guard.Reset:
		err = l.reset(ctx, c.Key)
	case c.Op == guard.Refund:
		r, err = l.refund(ctx, c.Key, c.N)
	case l.fail == nil: // in process: the strategy validates and never fails
		r, err = guard.Do(ctx, l.st, c)
	default:
		r, out, err = l.guarded(ctx, c)
	}
	if l.shadow && !r.Allowed && err == nil && c.Op == guard.Allow && c.N > 0 {
		r.Allowed, r.Shadow = true, true
	}
	if l.obs != nil {
		l.report(ctx, c.Op, c.N, r, err, out, start)
	}
	return r, err
}

// outcome is what a decision tells the Observer beyond its Result.
type outcome struct {
	degraded bool
	cached   bool
	cause    error
	brk      *breaker.Breaker // the breaker that counted the call; nil: the Limiter's
}

// report tells the Observer of a decision.
func (l *Limiter) report(ctx context.Context, op guard.Op, n int64, r Result, err error, out outcome, start time.Time) {
	d := Decision{Policy: l.cfg.Name, Algorithm: l.cfg.Algorithm, Op: op.String(), N: n,
		Result: r, Err: err, Start: start, Duration: time.Since(start),
		Degraded: out.degraded, Cause: out.cause, Cached: out.cached, Evicted: l.ev.take()}
	if l.fail != nil {
		brk := out.brk
		if brk == nil {
			brk = l.fail.breaker
		}
		d.Breaker = brk.State()
		if l.fail.evict != nil {
			d.EvictionPolicy = l.fail.evict.poll(ctx, start)
		}
	}
	l.obs.Observe(ctx, d)
}

// validate checks key and n, for the paths that do not reach a strategy
// that checks them itself.
func validate(key string, n int64) error {
	if err := strategy.ValidateKey(key); err != nil {
		return err
	}
	return strategy.ValidateCost(n)
}

// guarded makes the decision c (Allow or Peek) through the failure
// handling. Input is validated once: by the strategy when it is this
// module's, here otherwise or when the strategy is not called.
func (l *Limiter) guarded(ctx context.Context, c guard.Call) (Result, outcome, error) {
	f := l.fail
	if !l.checked {
		if err := validate(c.Key, c.N); err != nil {
			return Result{}, outcome{}, err
		}
	}
	if c.Op == guard.Allow && c.N == 0 {
		c.Op = guard.Peek // n = 0 behaves as Peek
	}
	// A caller that has given up gets its context's error, as from any Go
	// call: that is not a failure of Redis, and no policy applies.
	if err := guard.Ended(ctx, true); err != nil { // a deadline already past bounds any call
		return Result{}, outcome{}, err
	}
	// what a lease decides in process needs no breaker or timeout: it
	// makes no call (a lease serves what it holds while Redis is down)
	if f.lease != nil && c.Op == guard.Allow && c.Lim.Window == 0 {
		if r, ok := f.lease.AllowLocal(ctx, c.Key, c.N); ok {
			return r, outcome{cached: true}, nil
		}
	}
	cache := f.deny != nil && c.Op == guard.Allow
	if cache && c.N <= strategy.MaxUnits { // only valid keys are ever cached
		// with tiers, a denial under another tier's limit is not this one's
		if r, ok := f.deny.Lookup(c.Key, c.N); ok && (len(l.cfg.Tiers) == 0 || r.Limit == l.capacity) {
			if f.cmp != nil {
				f.shadow(ctx, c, r)
			}
			return r, outcome{cached: true}, nil
		}
	}
	brk := f.breakerOf(ctx, c.Key)
	ok, probe := brk.Allow()
	if !ok {
		if l.checked { // not validated above, and the strategy is not called
			if err := validate(c.Key, c.N); err != nil {
				return Result{}, outcome{}, err
			}
		}
		return l.degrade(ctx, c, brk), outcome{degraded: true, cause: errBreakerOpen, brk: brk}, nil
	}
	var gen uint64
	var sent int64
	if cache {
		gen, sent = f.deny.Begin()
	}
	r, err := f.guard.Call(ctx, l.st, c)
	if err != nil && callerError(err) {
		f.record(brk, probe, breaker.Answered)
		return Result{}, outcome{brk: brk}, err
	}
	f.record(brk, probe, classify(ctx, err))
	if err != nil && guard.IsEnded(err) {
		// the caller's own deadline or cancellation ended the wait
		return Result{}, outcome{brk: brk}, err
	}
	if err != nil {
		return l.degrade(ctx, c, brk), outcome{degraded: true, cause: err, brk: brk}, nil
	}
	if cache && !r.Allowed {
		f.deny.Put(c.Key, c.N, r, gen, sent)
	}
	return r, outcome{brk: brk}, nil
}

// shadow has the candidate decide a request whose denial the cache
// answered (see compare.Limiter.CompareN), within the Limiter's Timeout as
// the request would have been had it reached Redis.
func (f *failure) shadow(ctx context.Context, c guard.Call, r Result) {
	ctx, cancel := context.WithTimeout(ctx, f.guard.Timeout())
	f.cmp.CompareN(ctx, c.Key, c.N, c.Lim, r)
	cancel()
}

// reset forgets key, in the strategy and in this process. Unlike a
// decision it has no failure policy.
func (l *Limiter) reset(ctx context.Context, key string) error {
	f := l.fail
	if f == nil {
		return l.st.Reset(ctx, key)
	}
	if err := strategy.ValidateKey(key); err != nil {
		return err
	}
	if f.local != nil {
		f.local.Reset(context.WithoutCancel(ctx), key)
	}
	if f.deny != nil {
		f.deny.Invalidate(key)
		// and again once Redis has forgotten the subject, for denials that
		// Redis made before the reset but that arrive after the first call
		defer f.deny.Invalidate(key)
	}
	_, err := l.call(ctx, guard.Call{Op: guard.Reset, Key: key})
	return err
}

// call makes c on the strategy, through the timeout and breaker when l has
// them, without a failure policy.
func (l *Limiter) call(ctx context.Context, c guard.Call) (Result, error) {
	f := l.fail
	if f == nil {
		return guard.Do(ctx, l.st, c)
	}
	brk := f.breakerOf(ctx, c.Key)
	ok, probe := brk.Allow()
	if !ok {
		return Result{}, errBreakerOpen
	}
	r, err := f.guard.Call(ctx, l.st, c)
	f.record(brk, probe, classify(ctx, err))
	return r, err
}
