// Package breaker is the circuit breaker a ratelimit.Limiter puts in front
// of Redis. After a number of calls in a row fail it opens: for a
// cool-down, the limiter's failure policy decides at once, without calling
// Redis. Then one call probes Redis; its success closes the breaker, its
// failure opens it for another cool-down.
//
// Every Limiter built by ratelimit.New or ratelimit.Wrap has a Breaker of
// its own with the defaults, on the limiter's clock. To let several
// limiters that share one Redis detect an outage together, build one
// Breaker with New and give it to each with ratelimit.WithBreaker.
package breaker

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

// ErrOpen is the cause of the decisions a limiter makes while its breaker
// is open (ratelimit.Decision.Cause), and the error its Reset and RefundN
// return then, wrapped with strategy.ErrBackend.
var ErrOpen = errors.New("breaker: circuit breaker open, Redis not called")

// State is the state of a Breaker.
type State int32

// The states of a Breaker.
const (
	// Closed: Redis is called for every decision.
	Closed State = iota
	// Open: Redis failed repeatedly; decisions are made by the failure
	// policy at once, without calling Redis, until the cool-down ends.
	Open
	// HalfOpen: the cool-down ended; one decision at a time probes Redis,
	// the others are still made by the failure policy. A probe that
	// succeeds closes the breaker, one that fails opens it again.
	HalfOpen
)

// String returns "closed", "open" or "half-open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// Defaults and bounds of New.
const (
	// DefaultFailures is how many failures in a row open a breaker.
	DefaultFailures = 5
	// DefaultCooldown is how long an open breaker waits before it probes
	// Redis again.
	DefaultCooldown = time.Second
	// MaxCooldown is the longest cool-down accepted.
	MaxCooldown = time.Hour
)

// Breaker is a circuit breaker in front of Redis. What counts as a failure
// is the limiter's to say (see Record): for a ratelimit.Limiter, a
// connection error, a timeout, or a reply that says the server cannot
// serve (LOADING, BUSY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN, READONLY).
// Replies that only concern one key (WRONGTYPE) or a write (OOM) prove
// that Redis answers, so they do not count as failures.
//
// A Breaker is safe for concurrent use; the check made on each decision
// is lock-free and allocation-free.
//
// A Breaker times its cool-down with one clock, fixed when it is built:
// the process's monotonic clock, or the clock given with WithClock. The
// Breaker a Limiter builds for itself takes the limiter's client clock
// (ratelimit.WithClock) when one is set. A Breaker given with
// ratelimit.WithBreaker keeps its own clock whatever the clocks of the
// limiters that share it: give it theirs with WithClock so that a test
// steps the limiters and the breaker together. The clock is read on the
// goroutine that makes a decision (so concurrently when decisions are),
// never on one of the breaker's own: by an open or half-open breaker on
// each decision and in State, by a closed one only when a failure opens
// it.
type Breaker struct {
	failures int32
	cooldown time.Duration
	clock    strategy.Clock // nil: the monotonic clock
	base     time.Time      // origin of the ns times below, on clock

	state   atomic.Int32 // Closed or Open; half-open is open past until
	consec  atomic.Int32 // failures in a row while closed
	until   atomic.Int64 // ns since base at which an open breaker lets a probe through
	probing atomic.Bool  // a probe is in flight
}

// Option configures a Breaker beyond its failures and cool-down. Nil
// options are ignored.
type Option func(*options)

type options struct {
	clock strategy.Clock
}

// WithClock makes the breaker time its cool-down with c instead of the
// process's monotonic clock: usually the clock given with
// ratelimit.WithClock to the limiters that share the breaker, so that a
// test steps through a cool-down instead of sleeping, and FailClosed's
// RetryAfter (the rest of the cool-down) is exact. c must be safe for
// concurrent use (see strategy.Clock): its Now is called from every
// goroutine that makes a decision while the breaker is open or half-open,
// and by State. A clock that goes back lengthens the cool-down; one that
// stands still keeps an open breaker open. A nil c is ignored.
func WithClock(c strategy.Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// New returns a closed Breaker that opens after failures failures in a row
// (0 means DefaultFailures) and probes again after cooldown (0 means
// DefaultCooldown), timed by the monotonic clock unless WithClock is given.
// It fails, naming the argument, with an error wrapping
// strategy.ErrInvalidOption when failures < 0, cooldown < 0 or cooldown >
// MaxCooldown.
func New(failures int, cooldown time.Duration, opts ...Option) (*Breaker, error) {
	switch {
	case failures < 0 || failures > 1<<30:
		return nil, fmt.Errorf("%w: breaker failures must be in [0, %d] (0 means %d), got %d",
			strategy.ErrInvalidOption, 1<<30, DefaultFailures, failures)
	case cooldown < 0:
		return nil, fmt.Errorf("%w: breaker cooldown must be >= 0 (0 means %s), got %s",
			strategy.ErrInvalidOption, DefaultCooldown, cooldown)
	case cooldown > MaxCooldown:
		return nil, fmt.Errorf("%w: breaker cooldown must be <= %s, got %s",
			strategy.ErrInvalidOption, MaxCooldown, cooldown)
	}
	if failures == 0 {
		failures = DefaultFailures
	}
	if cooldown == 0 {
		cooldown = DefaultCooldown
	}
	var o options
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
func (b *Breaker) State() State {
	if State(b.state.Load()) == Closed {
		return Closed
	}
	if b.now() < b.until.Load() {
		return Open
	}
	return HalfOpen
}

// Allow reports whether a call may go to Redis now, and whether it is the
// probe of a half-open breaker. A call it lets through must be reported
// with Record, once.
func (b *Breaker) Allow() (ok, probe bool) {
	if State(b.state.Load()) == Closed {
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

// Outcome is what a call that Allow let through says about Redis.
type Outcome int

// The outcomes of a call.
const (
	// Answered: Redis answered, even with an error reply about one key.
	Answered Outcome = iota
	// Failed: Redis did not answer, or said that it cannot serve.
	Failed
	// Abandoned: the caller gave up first; it says nothing about Redis.
	Abandoned
)

// Record records the outcome o of a call that Allow let through; probe is
// what Allow returned for it.
func (b *Breaker) Record(probe bool, o Outcome) {
	switch {
	case probe && o == Answered:
		b.consec.Store(0)
		b.state.Store(int32(Closed))
		b.probing.Store(false)
	case probe && o == Failed:
		b.until.Store(b.reopen())
		b.probing.Store(false)
	case probe:
		b.probing.Store(false) // still half-open: the next call probes
	case State(b.state.Load()) != Closed:
		// a call let through before the breaker opened: only probes decide
	case o == Answered:
		if b.consec.Load() != 0 {
			b.consec.Store(0)
		}
	case o == Failed:
		if b.consec.Add(1) >= b.failures {
			b.until.Store(b.reopen()) // before state: who sees open sees until
			b.state.Store(int32(Open))
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

// RetryAfter returns how long until the breaker next lets Redis be tried,
// in whole milliseconds as Redis results are: the rest of the cool-down
// when open (at least 1ms), the whole cool-down otherwise.
func (b *Breaker) RetryAfter() time.Duration {
	if State(b.state.Load()) != Closed {
		if d := time.Duration(b.until.Load() - b.now()); d > 0 {
			return ceilMs(d)
		}
		return time.Millisecond
	}
	return ceilMs(b.cooldown)
}

// ceilMs rounds d up to a whole number of milliseconds.
func ceilMs(d time.Duration) time.Duration {
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	return d
}
