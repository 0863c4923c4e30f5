package ratelimit

import (
	"fmt"

	"github.com/redis/go-redis/v9"

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
	rdb       redis.Scripter    // New's client: a cluster's masters get a breaker each
	evict     *evictionCheck    // withEvictionCheck: a Set's, shared by its Limiters
	direct    bool              // WithoutBatching
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

// WithClock makes the limiter, its denial cache and the breaker it builds
// (not a shared one: see breaker.WithClock) read c, safe for concurrent
// use, instead of the Redis server's TIME; nil is ignored.
func WithClock(c strategy.Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// WithObserver makes the limiter report every call to obs; nil is ignored.
func WithObserver(obs Observer) Option {
	return func(o *options) {
		if obs != nil {
			o.observer = obs
		}
	}
}

// WithBreaker makes a limiter use b, which others may share; nil is ignored.
func WithBreaker(b *breaker.Breaker) Option {
	return func(o *options) {
		if b != nil {
			o.breaker = b
		}
	}
}

// WithFallback gives Wrap's Limiter the strategy FailLocal decides with,
// usually an in-process twin with a share of the limit; nil is ignored.
func WithFallback(st strategy.Strategy) Option {
	return func(o *options) {
		if st != nil {
			o.fallback = st
		}
	}
}

// WithDenyCache keeps the denials Redis made, for at most maxSubjects (>
// 0) subjects, and denies the same requests without a round trip until
// their RetryAfter (see docs/failure.md). Not in process nor when sharded.
func WithDenyCache(maxSubjects int) Option {
	return func(o *options) {
		if maxSubjects <= 0 && o.err == nil {
			o.err = fmt.Errorf("%w: WithDenyCache: maxSubjects must be > 0, got %d", strategy.ErrInvalidOption, maxSubjects)
		}
		o.denyCache = maxSubjects
	}
}

// WithoutBatching makes New send each call alone on rdb, not through the
// batching client that every Limiter and strategy on rdb shares (see
// strategy.WithoutBatching).
func WithoutBatching() Option {
	return func(o *options) { o.direct = true }
}

// withStrategy makes New decide with st, built already for the
// Config given (a candidate that Set.Update promotes), instead of building
// one.
func withStrategy(st strategy.Strategy) Option {
	return func(o *options) { o.prebuilt = st }
}

// withEvictionCheck makes New's Limiter report what e finds (see
// evictionCheck) instead of asking Redis itself: a Set asks once.
func withEvictionCheck(e *evictionCheck) Option {
	return func(o *options) { o.evict = e }
}
