package ratelimit

import (
	"fmt"
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
// Every Limiter built by New has a Breaker of its own with the defaults. To
// let several limiters that share one Redis detect an outage together, build
// one Breaker and give it to each with WithBreaker. A Breaker is safe for
// concurrent use; the check made on each decision is lock-free.
type Breaker struct {
	failures int32
	cooldown time.Duration
	base     time.Time // monotonic origin of the ns times below

	state   atomic.Int32 // BreakerClosed or BreakerOpen; half-open is open past until
	consec  atomic.Int32 // failures in a row while closed
	until   atomic.Int64 // ns since base at which an open breaker lets a probe through
	probing atomic.Bool  // a probe is in flight
}

// NewBreaker returns a closed Breaker that opens after failures failures in
// a row (0 means DefaultBreakerFailures) and probes again after cooldown (0
// means DefaultBreakerCooldown). It fails, naming the argument, when
// failures < 0, cooldown < 0 or cooldown > MaxBreakerCooldown.
func NewBreaker(failures int, cooldown time.Duration) (*Breaker, error) {
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
	return &Breaker{failures: int32(failures), cooldown: cooldown, base: time.Now()}, nil
}

// Failures returns how many failures in a row open the breaker.
func (b *Breaker) Failures() int { return int(b.failures) }

// Cooldown returns how long the breaker stays open before it probes.
func (b *Breaker) Cooldown() time.Duration { return b.cooldown }

func (b *Breaker) now() int64 { return int64(time.Since(b.base)) }

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
		b.until.Store(b.now() + int64(b.cooldown))
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
			b.until.Store(b.now() + int64(b.cooldown)) // before state: who sees open sees until
			b.state.Store(int32(BreakerOpen))
			b.consec.Store(0)
		}
	}
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
