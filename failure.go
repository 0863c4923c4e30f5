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
	"github.com/ratekit/ratelimit/internal/engine"
	"github.com/ratekit/ratelimit/internal/guard"
	"github.com/ratekit/ratelimit/internal/quote"
	"github.com/ratekit/ratelimit/lease"
	"github.com/ratekit/ratelimit/strategy"
)

// FailurePolicy is what a Limiter on Redis decides when Redis cannot: it is
// down, slower than Config.Timeout, refuses, or the breaker is open. Such a
// decision is a Result with Degraded set and no error; the Observer sees
// why (Decision.Cause). A caller's own canceled context or passed deadline
// is not Redis failing: the call returns an error wrapping ctx.Err(), and
// no policy applies. The zero value means FailOpen. docs/failure.md says
// which to choose and how to set up the client.
type FailurePolicy string

// The failure policies.
const (
	// FailOpen allows, unrecorded: Remaining is the capacity. A cost above
	// the capacity is still denied, RetryAfter strategy.Never.
	FailOpen FailurePolicy = "open"
	// FailClosed denies: RetryAfter is the time until Redis is next tried.
	FailClosed FailurePolicy = "closed"
	// FailLocal decides with an in-process twin enforcing
	// Config.LocalShare of the limits (1/N for N processes); Wrap takes it
	// from WithFallback.
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
	if err := checkReplicas(cfg); err != nil {
		return err
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
		{"Replicas", cfg.Replicas != 0}, {"ReplicaTimeout", cfg.ReplicaTimeout != 0}, {"Lease", cfg.Lease},
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

// checkReplicas validates the durability mode of cfg: Replicas >= 0, and
// with Replicas > 0 a ReplicaTimeout > 0 below the Timeout in force (which
// would end the WAIT first); without, no ReplicaTimeout.
func checkReplicas(cfg Config) error {
	invalid := func(field string, text func(name func(string) string) string) error {
		return newFieldError(strategy.ErrInvalidOption, field, jsonName(field), text)
	}
	n, wait := cfg.Replicas, cfg.ReplicaTimeout
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = defaultTimeout
	}
	switch {
	case n < 0:
		return invalid("Replicas", func(name func(string) string) string {
			return fmt.Sprintf("%s must be >= 0 (0: no durability mode), got %d", name("Replicas"), n)
		})
	case n > strategy.MaxReplicas:
		return invalid("Replicas", func(name func(string) string) string {
			return fmt.Sprintf("%s must be <= %d, got %d", name("Replicas"), strategy.MaxReplicas, n)
		})
	case n == 0 && wait != 0:
		return invalid("ReplicaTimeout", func(name func(string) string) string {
			return fmt.Sprintf("%s needs %s > 0, got %s with %s 0", name("ReplicaTimeout"), name("Replicas"), wait, name("Replicas"))
		})
	case n > 0 && wait <= 0:
		return invalid("ReplicaTimeout", func(name func(string) string) string {
			return fmt.Sprintf("%s must be > 0 with %s %d, got %s", name("ReplicaTimeout"), name("Replicas"), n, wait)
		})
	case n > 0 && wait >= timeout:
		return invalid("ReplicaTimeout", func(name func(string) string) string {
			return fmt.Sprintf("%s must be below %s (%s), got %s", name("ReplicaTimeout"), name("Timeout"), timeout, wait)
		})
	}
	return nil
}

// failure is what a Limiter built by New or Wrap adds around its strategy:
// timeout, breaker, policy and denial cache.
type failure struct {
	policy  FailurePolicy
	guard   *guard.Guard
	breaker *breaker.Breaker
	nodes   *nodeBreakers     // a cluster's masters' own breakers; nil: breaker for all
	local   strategy.Strategy // FailLocal: the fallback
	deny    *denycache.Cache  // nil when off
	cmp     *compare.Limiter  // with deny: the strategy when it has a candidate, which decides cached denials too
	lease   *lease.Limiter    // the strategy when it leases: what it decides in process goes first
	evict   *evictionCheck    // with an Observer: whether Redis may evict the limiter's keys
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
	f.lease, _ = st.(*lease.Limiter)
	if f.policy == "" {
		f.policy = FailOpen
	}
	if f.breaker == nil { // its own, on the limiter's clock
		f.breaker, _ = breaker.New(0, 0, breaker.WithClock(o.clock))
		// and one per master of a cluster, for a subject's keys on one
		// master (not sharded)
		if cc, ok := o.rdb.(*redis.ClusterClient); ok && cfg.Shards <= 1 {
			f.nodes = &nodeBreakers{cc: cc, shared: f.breaker, clock: o.clock, m: map[*redis.Client]*breaker.Breaker{}}
		}
	}
	if f.policy == FailLocal {
		f.local = fallback
	}
	if o.observer != nil { // New's client, or the Set's check of it
		if f.evict = o.evict; f.evict == nil {
			f.evict = newEvictionCheck(o.rdb)
		}
	}
	// A sharded denial says that the shards tried are full, not that the
	// next request, which may land on another shard, would be denied.
	if o.denyCache > 0 && !shardedStrategy(cfg, st) {
		f.deny = denycache.New(o.denyCache, o.clock, lim.Window, ev.add)
		f.cmp, _ = st.(*compare.Limiter)
	}
	_, checked := st.(engine.Sharder) // this module's strategies validate their input
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

// degrade makes the decision c (Allow or Peek) by the failure policy.
func (l *Limiter) degrade(ctx context.Context, c guard.Call, brk *breaker.Breaker) Result {
	f, capacity, n := l.fail, l.capacity, c.N
	if f.policy == FailLocal {
		c.Lim = l.localLim
		r, err := guard.Do(context.WithoutCancel(ctx), f.local, c)
		if err == nil {
			if r.RetryAfter == strategy.Never && max(n, 1) <= capacity {
				// beyond this process's share, not beyond the limit
				r.RetryAfter = brk.RetryAfter()
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
	retry := brk.RetryAfter()
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
