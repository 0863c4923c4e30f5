package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratelimit/breaker"
	"github.com/ratekit/ratelimit/compare"
	"github.com/ratekit/ratelimit/internal/denycache"
	"github.com/ratekit/ratelimit/internal/guard"
	"github.com/ratekit/ratelimit/internal/keys"
	"github.com/ratekit/ratelimit/internal/quote"
	"github.com/ratekit/ratelimit/strategy"
)

// FailurePolicy is what a Limiter built by New or Wrap decides when Redis
// cannot: it is down, too slow (see Config.Timeout), refuses (maxmemory,
// WRONGTYPE on a subject's key), or its circuit breaker is open (see
// package breaker). Every such decision is a Result with Degraded set, and no
// error, so that a call site that does not look at Degraded still gets the
// policy its owner chose; the Observer sees the cause (Decision.Cause).
//
// The caller's own context is not Redis failing: when it is canceled, or
// its deadline (sooner than Timeout) passes first, the decision returns
// with an error wrapping ctx.Err() (context.DeadlineExceeded once the
// clock reaches the deadline, even when Redis's i/o timeout at that
// deadline arrives a moment before ctx reports it), never
// strategy.ErrBackend; no policy applies, the breaker does not count it,
// and the Observer sees it as Decision.Err, not as a degraded decision.
//
// The zero value "" means FailOpen: an outage of the limiter's store must
// not become an outage of every service that imports it unless its owner
// chose so. Choose FailClosed where an unenforced limit costs more than
// refusing service (logins, password resets, paid APIs), and FailLocal to
// keep an approximate limit per process. docs/failure.md says how to set
// up the go-redis client so that a call abandoned at Timeout frees its
// connection and is never re-sent.
type FailurePolicy string

// The failure policies.
const (
	// FailOpen allows the request, records nothing and reports it not
	// enforced: Allowed true, Remaining the full capacity, Degraded true.
	// A request whose cost exceeds the capacity, which Redis would deny
	// whatever its state, is still denied with RetryAfter Never.
	FailOpen FailurePolicy = "open"
	// FailClosed denies the request: Allowed false, Remaining 0, RetryAfter
	// (and ResetAfter) the time until Redis is next tried (the rest of the
	// breaker's cool-down on the breaker's clock, or the whole cool-down),
	// Degraded true.
	FailClosed FailurePolicy = "closed"
	// FailLocal decides with an in-process twin that enforces
	// Config.LocalShare of Limit and Burst in this process alone, so that N
	// processes sharing one Redis together allow about the limit
	// (LocalShare = 1/N). The twin starts empty at the outage and frees its
	// subjects within about a window after Redis is back; it holds at most
	// Config.MaxSubjects subjects. Wrap takes the twin from WithFallback.
	FailLocal FailurePolicy = "local"
)

// The bounds of Config.Timeout (see there).
const (
	defaultTimeout = 250 * time.Millisecond
	maxTimeout     = time.Minute
)

// errBreakerOpen is breaker.ErrOpen as a backend failure: it is both, with
// one prefix.
var errBreakerOpen error = circuitOpen{}

type circuitOpen struct{}

func (circuitOpen) Error() string {
	return "ratelimit: backend error: circuit breaker open, Redis not called"
}

func (circuitOpen) Is(target error) bool {
	return target == strategy.ErrBackend || target == breaker.ErrOpen
}

// checkFailure validates the failure settings of cfg; wrapped says that cfg
// was given to Wrap, which takes no strategy fields.
func checkFailure(cfg Config, wrapped bool) error {
	invalid := func(field string, text func(name func(string) string) string) error {
		return newFieldError(strategy.ErrInvalidOption, field, jsonName(field), text)
	}
	switch cfg.Mode {
	case "", modeEnforce, modeShadow:
	default:
		mode := cfg.Mode // captured by the message alone: cfg stays on the stack
		return invalid("Mode", func(name func(string) string) string {
			return fmt.Sprintf("%s must be %q or %q (empty means %q), got %s", name("Mode"), modeEnforce, modeShadow, modeEnforce, quote.Value(mode))
		})
	}
	switch cfg.OnFailure {
	case "", FailOpen, FailClosed, FailLocal:
	default:
		policy := cfg.OnFailure
		return invalid("OnFailure", func(name func(string) string) string {
			return fmt.Sprintf("%s must be %q, %q or %q (empty means %q), got %s",
				name("OnFailure"), FailOpen, FailClosed, FailLocal, FailOpen, quote.Value(string(policy)))
		})
	}
	if s := cfg.LocalShare; math.IsNaN(s) || s < 0 || s > 1 {
		return invalid("LocalShare", func(name func(string) string) string {
			return fmt.Sprintf("%s must be in [0, 1] (0 means 1), got %v", name("LocalShare"), s)
		})
	}
	switch timeout := cfg.Timeout; {
	case timeout < 0:
		return invalid("Timeout", func(name func(string) string) string {
			return fmt.Sprintf("%s must be >= 0 (0 means %s), got %s", name("Timeout"), defaultTimeout, timeout)
		})
	case timeout > maxTimeout:
		return invalid("Timeout", func(name func(string) string) string {
			return fmt.Sprintf("%s must be <= %s, got %s", name("Timeout"), maxTimeout, timeout)
		})
	}
	if !wrapped {
		return nil
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"Algorithm", cfg.Algorithm != ""}, {"Limit", cfg.Limit != 0}, {"Window", cfg.Window != 0},
		{"Burst", cfg.Burst != 0}, {"Shards", cfg.Shards != 0}, {"Prefix", cfg.Prefix != ""},
		{"Rules", len(cfg.Rules) != 0}, {"LocalShare", cfg.LocalShare != 0}, {"MaxSubjects", cfg.MaxSubjects != 0},
	} {
		if f.set {
			field := f.name
			return newFieldError(strategy.ErrInvalidOption, field, jsonName(field), func(name func(string) string) string {
				return "Wrap: " + name(field) + " must be zero: the strategy given is what is enforced"
			})
		}
	}
	return nil
}

// failure is what a Limiter built by New or Wrap adds around its strategy:
// timeout, breaker, policy and denial cache.
type failure struct {
	policy  FailurePolicy
	guard   *guard.Guard
	breaker *breaker.Breaker
	local   strategy.Strategy // FailLocal: the fallback
	deny    *denycache.Cache  // nil when off
	cmp     *compare.Limiter  // with deny: the strategy when it has a candidate, which decides cached denials too
}

// wrap returns the Limiter of st with the failure handling of cfg and o.
func wrap(st strategy.Strategy, cfg Config, o options, fallback strategy.Strategy, ev *evictions) (*Limiter, error) {
	if cfg.OnFailure == FailLocal && fallback == nil {
		return nil, fmt.Errorf("%w: OnFailure %q needs a fallback strategy (WithFallback)", strategy.ErrInvalidOption, FailLocal)
	}
	lim := st.Limit()
	if cfg.Algorithm != Multi {
		cfg.Limit, cfg.Window, cfg.Burst = lim.Limit, lim.Window, lim.Burst
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = defaultTimeout
	}
	f := &failure{policy: cfg.OnFailure, guard: guard.New(timeout, honours(st)), breaker: o.breaker}
	if f.policy == "" {
		f.policy = FailOpen
	}
	if f.breaker == nil { // its own, on the limiter's clock
		f.breaker, _ = breaker.New(0, 0, breaker.WithClock(o.clock))
	}
	if f.policy == FailLocal {
		f.local = fallback
	}
	// A sharded denial says that the shards tried are full, not that the
	// next request, which may land on another shard, would be denied.
	if o.denyCache > 0 && !shardedStrategy(cfg, st) {
		f.deny = denycache.New(o.denyCache, o.clock, lim.Window, ev.add)
		f.cmp, _ = st.(*compare.Limiter)
	}
	_, checked := st.(keys.ShardAware) // this module's strategies validate their input
	l := &Limiter{cfg: cfg, st: st, obs: o.observer, capacity: lim.Capacity(), checked: checked, fail: f, ev: ev}
	return l.withTiers()
}

// shardedStrategy reports whether st spreads a subject over shards: by
// Config.Shards, or as a strategy given to Wrap that says so (Shards() > 1,
// as sharded.Limiter does). Its denial says that the shards tried are full,
// not that the next request would be denied, so no denial cache applies.
func shardedStrategy(cfg Config, st strategy.Strategy) bool {
	if cfg.Shards > 1 {
		return true
	}
	s, ok := st.(interface{ Shards() int })
	return ok && s.Shards() > 1
}

// honours reports whether st says each call returns by its context's
// deadline (strategy.ContextHonourer).
func honours(st strategy.Strategy) bool {
	h, ok := st.(strategy.ContextHonourer)
	return ok && h.HonoursContext()
}

// decide makes one decision (AllowN, or Peek when op is opPeek) and reports
// it to the Observer.
func (l *Limiter) decide(ctx context.Context, op, key string, n int64) (Result, error) {
	var start time.Time
	if l.obs != nil {
		start = time.Now()
	}
	var (
		r   Result
		err error
		out outcome
	)
	switch {
	case l.fail != nil:
		r, out, err = l.guarded(ctx, op, key, n)
	case l.tier != "":
		c := guard.Call{Op: guard.Allow, Key: key, N: n, Lim: l.lim}
		if op == opPeek {
			c.Op = guard.Peek
		}
		r, err = guard.Do(ctx, l.st, c)
	case op == opPeek:
		r, err = l.st.Peek(ctx, key)
	default:
		r, err = l.st.AllowN(ctx, key, n)
	}
	if l.shadow && !r.Allowed && err == nil && op == opAllow && n > 0 {
		r.Allowed, r.Shadow = true, true
	}
	if l.obs != nil {
		l.report(ctx, op, n, r, err, out, start)
	}
	return r, err
}

// validate checks key and n, for the paths that do not reach a strategy
// that checks them itself.
func validate(key string, n int64) error {
	if err := strategy.ValidateKey(key); err != nil {
		return err
	}
	return strategy.ValidateCost(n)
}

// callerError reports whether err is the caller's: bad input (a key, a
// cost, a per-call limit the strategy refuses, an operation it does not
// offer), which a strategy reports before it touches Redis. Such an error
// says nothing about Redis: it reaches the caller as is, never the failure
// policy, and the breaker counts the call as answered. An error that also
// wraps strategy.ErrBackend is Redis's.
func callerError(err error) bool {
	if err == nil || errors.Is(err, strategy.ErrBackend) {
		return false
	}
	return errors.Is(err, strategy.ErrInvalidKey) || errors.Is(err, strategy.ErrInvalidCost) ||
		errors.Is(err, strategy.ErrInvalidLimit) || errors.Is(err, strategy.ErrInvalidOption)
}

// guarded is decide through the failure handling. Input is validated once:
// by the strategy when it is this module's, here otherwise or when the
// strategy is not called.
func (l *Limiter) guarded(ctx context.Context, op, key string, n int64) (Result, outcome, error) {
	f := l.fail
	if !l.checked {
		if err := validate(key, n); err != nil {
			return Result{}, outcome{}, err
		}
	}
	if op == opAllow && n == 0 {
		op = opPeek // n = 0 behaves as Peek
	}
	// A caller that has given up gets its context's error, as from any Go
	// call: that is not a failure of Redis, and no policy applies.
	if err := guard.Ended(ctx, true); err != nil { // a deadline already past bounds any call
		return Result{}, outcome{}, err
	}
	cache := f.deny != nil && op == opAllow
	if cache && n <= strategy.MaxUnits { // only valid keys are ever cached
		// with tiers, a denial under another tier's limit is not this one's
		if r, ok := f.deny.Lookup(key, n); ok && (len(l.cfg.Tiers) == 0 || r.Limit == l.capacity) {
			if f.cmp != nil {
				f.shadow(ctx, key, n, l.lim, r)
			}
			return r, outcome{cached: true}, nil
		}
	}
	ok, probe := f.breaker.Allow()
	if !ok {
		if l.checked { // not validated above, and the strategy is not called
			if err := validate(key, n); err != nil {
				return Result{}, outcome{}, err
			}
		}
		return l.degrade(ctx, op, key, n), outcome{degraded: true, cause: errBreakerOpen}, nil
	}
	var gen uint64
	var sent int64
	if cache {
		gen, sent = f.deny.Begin()
	}
	c := guard.Call{Op: guard.Allow, Key: key, N: n, Lim: l.lim}
	if op == opPeek {
		c.Op = guard.Peek
	}
	r, err := f.guard.Call(ctx, l.st, c)
	if err != nil && callerError(err) {
		f.breaker.Record(probe, breaker.Answered)
		return Result{}, outcome{}, err
	}
	f.breaker.Record(probe, classify(ctx, err))
	if err != nil && guard.IsEnded(err) {
		// the caller's own deadline or cancellation ended the wait
		return Result{}, outcome{}, err
	}
	if err != nil {
		return l.degrade(ctx, op, key, n), outcome{degraded: true, cause: err}, nil
	}
	if cache && !r.Allowed {
		f.deny.Put(key, n, r, gen, sent)
	}
	return r, outcome{}, nil
}

// shadow has the candidate decide a request whose denial the cache
// answered (see compare.Limiter.CompareN), within the Limiter's Timeout as
// the request would have been had it reached Redis.
func (f *failure) shadow(ctx context.Context, key string, n int64, lim strategy.Limit, r Result) {
	ctx, cancel := context.WithTimeout(ctx, f.guard.Timeout())
	f.cmp.CompareN(ctx, key, n, lim, r)
	cancel()
}

func (f *failure) reset(ctx context.Context, st strategy.Strategy, key string) error {
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
	ok, probe := f.breaker.Allow()
	if !ok {
		return errBreakerOpen
	}
	_, err := f.guard.Call(ctx, st, guard.Call{Op: guard.Reset, Key: key})
	f.breaker.Record(probe, classify(ctx, err))
	return err
}

// degrade makes the decision of the failure policy.
func (l *Limiter) degrade(ctx context.Context, op, key string, n int64) Result {
	f, capacity := l.fail, l.capacity
	if f.policy == FailLocal {
		c := guard.Call{Op: guard.Allow, Key: key, N: n, Lim: l.localLim}
		if op == opPeek {
			c.Op = guard.Peek
		}
		r, err := guard.Do(context.WithoutCancel(ctx), f.local, c)
		if err == nil {
			if r.RetryAfter == strategy.Never && max(n, 1) <= capacity {
				// beyond this process's share, not beyond the limit
				r.RetryAfter = f.breaker.RetryAfter()
			}
			r.Degraded = true
			return r
		}
		// a fallback that fails on valid input: decide as FailClosed
	}
	if max(n, 1) > capacity { // Redis would deny it whatever its state
		r := Result{Limit: capacity, RetryAfter: strategy.Never, Degraded: true}
		if f.policy == FailOpen {
			r.Remaining = capacity
		}
		return r
	}
	if f.policy == FailOpen {
		return Result{Allowed: true, Limit: capacity, Remaining: capacity, Degraded: true}
	}
	retry := f.breaker.RetryAfter()
	return Result{Limit: capacity, RetryAfter: retry, ResetAfter: retry, Degraded: true}
}

// classify tells the breaker what err says about Redis. ctx is the caller's.
func classify(ctx context.Context, err error) breaker.Outcome {
	if err == nil || callerError(err) {
		return breaker.Answered
	}
	if guard.IsEnded(err) || ctx.Err() != nil {
		return breaker.Abandoned
	}
	var re redis.Error
	if errors.As(err, &re) {
		for _, p := range []string{"LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY"} {
			if redis.HasErrorPrefix(err, p) {
				return breaker.Failed
			}
		}
		return breaker.Answered // WRONGTYPE, OOM...: Redis serves, this call failed
	}
	return breaker.Failed
}
