package ratelimit

import (
	"fmt"

	"github.com/ratekit/ratelimit/breaker"
	"github.com/ratekit/ratelimit/strategy"
)

// Option configures a Limiter beyond its Config.
type Option func(*options)

type options struct {
	clock     strategy.Clock
	observer  Observer
	breaker   *breaker.Breaker  // WithBreaker
	denyCache int               // WithDenyCache: max subjects; 0 is off
	fallback  strategy.Strategy // WithFallback (Wrap)
	prebuilt  strategy.Strategy // withStrategy: a promoted candidate
	err       error             // the first invalid option
}

// apply returns the options opts set, or the first invalid one's error.
func apply(opts []Option) (options, error) {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o, o.err
}

// WithClock makes the limiter use c instead of the Redis server's TIME. A nil
// c is ignored. See strategy.WithClock. The denial cache and the circuit
// breaker the limiter builds for itself read c too, so a test that steps c
// steps their expiry and cool-down; a Breaker given with WithBreaker reads
// the clock it was built with (see breaker.WithClock). c must be safe for
// concurrent use: it is called from every goroutine that makes a decision
// and from the limiter's own (sweeps of idle subjects).
func WithClock(c strategy.Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// WithObserver makes the limiter report every decision to obs (telemetry,
// logging). A nil obs is ignored.
func WithObserver(obs Observer) Option {
	return func(o *options) {
		if obs != nil {
			o.observer = obs
		}
	}
}

// WithBreaker makes the limiter use b, which other limiters may share, instead
// of a breaker of its own with the defaults (see package breaker). b times
// its cool-down with its own clock, not the limiter's WithClock clock:
// build it with breaker.WithClock to share that clock. A nil b is ignored.
// It has no effect on an in-process limiter (New with a nil client).
func WithBreaker(b *breaker.Breaker) Option {
	return func(o *options) {
		if b != nil {
			o.breaker = b
		}
	}
}

// WithFallback gives a Limiter made by Wrap the strategy that decides under
// FailLocal, usually an in-process twin (NewLocal of an algorithm package)
// with a share of the limit. A nil st is ignored. New builds its own from
// Config.LocalShare.
func WithFallback(st strategy.Strategy) Option {
	return func(o *options) {
		if st != nil {
			o.fallback = st
		}
	}
}

// WithDenyCache turns on a local cache of denials holding at most
// maxSubjects subjects (New and Wrap; off by default). Once Redis denies a
// subject a request of cost n with RetryAfter r, requests of cost n or more
// for the subject are denied in this process, without a round trip, until r
// has passed. The cache never denies a request that Redis would allow,
// except after the subject is reset by another process or Limiter (Reset on
// this Limiter clears its entry): then for at most r. It costs about 130
// bytes per subject plus the key. Its clock is the limiter's client clock
// (WithClock) when set, the monotonic clock otherwise. maxSubjects must be
// > 0. When maxSubjects are held, a new denial evicts the least recently
// used subject of the 1/64 that share its stripe, in O(1) (counted in
// Decision.Evicted): that subject's next request goes to Redis. Denials are
// freed once their RetryAfter has passed, within about a window even when
// no request arrives. It is not used when Config.Shards > 1, nor for a
// strategy given to Wrap whose Shards method returns more than 1 (as
// sharded.Limiter's does): a sharded subject denied on the shards one
// request tried may still have room on the others. With a
// Config.Candidate, a denial the cache answers is still decided by the
// candidate, and its agreement reported, so that the candidate sees every
// request (see compare.Limiter.CompareN): the candidate's script call
// alone, within Config.Timeout, where the candidate runs (on the caller's
// goroutine when pipelined, as by default on a *redis.Client); the
// enforced strategy's call is saved.
func WithDenyCache(maxSubjects int) Option {
	return func(o *options) {
		if maxSubjects <= 0 && o.err == nil {
			o.err = fmt.Errorf("%w: WithDenyCache: maxSubjects must be > 0, got %d", strategy.ErrInvalidOption, maxSubjects)
		}
		o.denyCache = maxSubjects
	}
}

// withStrategy makes New decide with st, built already for the
// Config given (a candidate that Set.Update promotes), instead of building
// one.
func withStrategy(st strategy.Strategy) Option {
	return func(o *options) { o.prebuilt = st }
}
