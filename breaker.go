package ratelimit

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

// BreakerState is the state of a Breaker.
type BreakerState int32

// The states of a Breaker.
const (
	// BreakerClosed: Redis is called for every decision.
	BreakerClosed BreakerState = iota
	// BreakerOpen: Redis failed repeatedly; decisions are made by the
	// failure policy at once, without calling Redis, until the cool-down ends.
	BreakerOpen
	// BreakerHalfOpen: the cool-down ended; one decision at a time probes
	// Redis, the others are still made by the failure policy. A probe that
	// succeeds closes the breaker, one that fails opens it again.
	BreakerHalfOpen
)

// String returns "closed", "open" or "half-open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("BreakerState(%d)", int32(s))
}

// Defaults of a Breaker.
const (
	// DefaultBreakerFailures is how many failures in a row open a breaker.
	DefaultBreakerFailures = 5
	// DefaultBreakerCooldown is how long an open breaker waits before it
	// probes Redis again.
	DefaultBreakerCooldown = time.Second
	// MaxBreakerCooldown is the longest cool-down accepted.
	MaxBreakerCooldown = time.Hour
)

// Breaker is a circuit breaker in front of Redis. After Failures calls in a
// row fail (a connection error, a timeout, or a reply that says the server
// cannot serve: LOADING, BUSY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN, READONLY),
// it opens: for Cooldown, decisions are made by the failure policy at once,
// without calling Redis. Then one call probes Redis; its success closes the
// breaker, its failure opens it for another Cooldown. Replies that only
// concern one key (WRONGTYPE) or a write (OOM) prove that Redis answers, so
// they do not count as failures; the decision itself is still made by the
// failure policy.
//
// Every Limiter built by New or Wrap has a Breaker of its own with the
// defaults. To let several limiters that share one Redis detect an outage
// together, build one Breaker and give it to each with WithBreaker. A
// Breaker is safe for concurrent use; the check made on each decision is
// lock-free and allocation-free.
//
// A Breaker times its cool-down with one clock, fixed when it is built:
// the process's monotonic clock, or the clock given to NewBreaker with
// WithBreakerClock. The Breaker a Limiter builds for itself takes the
// limiter's client clock (WithClock) when one is set. A Breaker given with
// WithBreaker keeps its own clock whatever the clocks of the limiters that
// share it: give it theirs with WithBreakerClock so that a test steps the
// limiters and the breaker together. The clock is read on the goroutine
// that makes a decision (so concurrently when decisions are), never on one
// of the breaker's own: by an open or half-open breaker on each decision
// and in State, by a closed one only when a failure opens it.
type Breaker struct {
	failures int32
	cooldown time.Duration
	clock    strategy.Clock // nil: the monotonic clock
	base     time.Time      // origin of the ns times below, on clock

	state   atomic.Int32 // BreakerClosed or BreakerOpen; half-open is open past until
	consec  atomic.Int32 // failures in a row while closed
	until   atomic.Int64 // ns since base at which an open breaker lets a probe through
	probing atomic.Bool  // a probe is in flight
}

// BreakerOption configures a Breaker beyond its failures and cool-down.
// Build one with WithBreakerClock; nil options are ignored.
type BreakerOption func(*breakerOptions)

type breakerOptions struct {
	clock strategy.Clock
}

// WithBreakerClock makes the breaker time its cool-down with c instead of
// the process's monotonic clock: usually the clock given with WithClock to
// the limiters that share the breaker, so that a test steps through a
// cool-down instead of sleeping, and FailClosed's RetryAfter (the rest of
// the cool-down) is exact. c must be safe for concurrent use (see
// strategy.Clock): its Now is called from every goroutine that makes a
// decision while the breaker is open or half-open, and by State. A clock
// that goes back lengthens the cool-down; one that stands still keeps an
// open breaker open. A nil c is ignored.
func WithBreakerClock(c strategy.Clock) BreakerOption {
	return func(o *breakerOptions) {
		if c != nil {
			o.clock = c
		}
	}
}

// NewBreaker returns a closed Breaker that opens after failures failures in
// a row (0 means DefaultBreakerFailures) and probes again after cooldown (0
// means DefaultBreakerCooldown), timed by the monotonic clock unless
// WithBreakerClock is given. It fails, naming the argument, when
// failures < 0, cooldown < 0 or cooldown > MaxBreakerCooldown.
func NewBreaker(failures int, cooldown time.Duration, opts ...BreakerOption) (*Breaker, error) {
	switch {
	case failures < 0 || failures > 1<<30:
		return nil, fmt.Errorf("%w: breaker failures must be in [0, %d] (0 means %d), got %d",
			strategy.ErrInvalidOption, 1<<30, DefaultBreakerFailures, failures)
	case cooldown < 0:
		return nil, fmt.Errorf("%w: breaker cooldown must be >= 0 (0 means %s), got %s",
			strategy.ErrInvalidOption, DefaultBreakerCooldown, cooldown)
	case cooldown > MaxBreakerCooldown:
		return nil, fmt.Errorf("%w: breaker cooldown must be <= %s, got %s",
			strategy.ErrInvalidOption, MaxBreakerCooldown, cooldown)
	}
	if failures == 0 {
		failures = DefaultBreakerFailures
	}
	if cooldown == 0 {
		cooldown = DefaultBreakerCooldown
	}
	var o breakerOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	b := &Breaker{failures: int32(failures), cooldown: cooldown, clock: o.clock}
	if b.clock != nil {
		b.base = b.clock.Now()
	} else {
		b.base = time.Now()
	}
	return b, nil
}

// Failures returns how many failures in a row open the breaker.
func (b *Breaker) Failures() int { return int(b.failures) }

// Cooldown returns how long the breaker stays open before it probes.
func (b *Breaker) Cooldown() time.Duration { return b.cooldown }

// now is the time in ns since base on the breaker's clock. Sub saturates,
// so a client clock far from base cannot wrap around.
func (b *Breaker) now() int64 {
	if b.clock != nil {
		return int64(b.clock.Now().Sub(b.base))
	}
	return int64(time.Since(b.base))
}

// State returns the breaker's state now.
func (b *Breaker) State() BreakerState {
	if BreakerState(b.state.Load()) == BreakerClosed {
		return BreakerClosed
	}
	if b.now() < b.until.Load() {
		return BreakerOpen
	}
	return BreakerHalfOpen
}

// allow reports whether a call may go to Redis, and whether it is the probe
// of a half-open breaker (which must then be reported with done).
func (b *Breaker) allow() (ok, probe bool) {
	if BreakerState(b.state.Load()) == BreakerClosed {
		return true, false
	}
	if b.now() < b.until.Load() {
		return false, false
	}
	if b.probing.CompareAndSwap(false, true) {
		return true, true
	}
	return false, false
}

// outcome of a call, as the breaker sees it.
type callOutcome int

const (
	callAnswered  callOutcome = iota // Redis answered (even with an error reply)
	callFailed                       // Redis did not answer, or said it cannot serve
	callAbandoned                    // the caller gave up first: says nothing about Redis
)

// done records the outcome of a call that allow let through.
func (b *Breaker) done(probe bool, o callOutcome) {
	switch {
	case probe && o == callAnswered:
		b.consec.Store(0)
		b.state.Store(int32(BreakerClosed))
		b.probing.Store(false)
	case probe && o == callFailed:
		b.until.Store(b.reopen())
		b.probing.Store(false)
	case probe:
		b.probing.Store(false) // still half-open: the next call probes
	case BreakerState(b.state.Load()) != BreakerClosed:
		// a call let through before the breaker opened: only probes decide
	case o == callAnswered:
		if b.consec.Load() != 0 {
			b.consec.Store(0)
		}
	case o == callFailed:
		if b.consec.Add(1) >= b.failures {
			b.until.Store(b.reopen()) // before state: who sees open sees until
			b.state.Store(int32(BreakerOpen))
			b.consec.Store(0)
		}
	}
}

// reopen is the ns time at which a breaker opening now lets a probe through.
func (b *Breaker) reopen() int64 {
	n := b.now()
	if n > math.MaxInt64-int64(b.cooldown) { // a client clock centuries past base
		return math.MaxInt64
	}
	return n + int64(b.cooldown)
}

// retryIn is how long until the breaker next lets Redis be tried: the rest
// of the cool-down when open, at least 1ms, the whole cool-down otherwise.
func (b *Breaker) retryIn() time.Duration {
	if BreakerState(b.state.Load()) != BreakerClosed {
		if d := time.Duration(b.until.Load() - b.now()); d > 0 {
			return ceilMs(d)
		}
		return time.Millisecond
	}
	return ceilMs(b.cooldown)
}

// ceilMs rounds d up to a whole number of milliseconds, as Redis results are.
func ceilMs(d time.Duration) time.Duration {
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	return d
}
