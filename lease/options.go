package lease

import (
	"fmt"
	"time"

	"github.com/ratekit/ratelimit/strategy"
)

// Option configures New.
type Option func(*options)

type options struct {
	life        time.Duration
	share       int64
	maxSubjects int
	clock       strategy.Clock
	observer    func(Event)
	err         error
}

func (o *options) fail(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf("%w: lease: "+format, append([]any{strategy.ErrInvalidOption}, args...)...)
	}
}

// WithLifetime sets a lease's lifetime: how long a process may spend the
// units of one lease. Default Window/50, at most 2s; d is truncated to
// whole milliseconds and at most the Window. It must be > 0.
func WithLifetime(d time.Duration) Option {
	return func(o *options) {
		if d < time.Millisecond {
			o.fail("lifetime must be >= 1ms, got %s", d)
			return
		}
		o.life = d
	}
}

// WithShare sets the fairness rule: one lease takes at most capacity/k
// units (at least 1, or the one request's cost when that is more).
// Default 8; k must be >= 1.
func WithShare(k int64) Option {
	return func(o *options) {
		if k < 1 {
			o.fail("share must be >= 1, got %d", k)
			return
		}
		o.share = k
	}
}

// WithMaxSubjects bounds the subjects holding a lease in this process
// (default 10,000): a new subject beyond it is decided by the wrapped
// strategy, one call per decision, until idle subjects are forgotten.
func WithMaxSubjects(n int) Option {
	return func(o *options) {
		if n < 1 {
			o.fail("max subjects must be >= 1, got %d", n)
			return
		}
		o.maxSubjects = n
	}
}

// WithClock sets the clock that times leases (default time.Now). With a
// strategy on a client clock (strategy.WithClock), pass the same clock. It
// is called from the callers' goroutines, concurrently.
func WithClock(c strategy.Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// WithObserver sets a function told of every lease event (a lease taken
// or denied, units given back or stranded), never of the subject's key.
// It is called on the goroutine that caused the event (a caller's, also
// when its call swept; Close's; a sweep's refunds'), so it must be quick
// and safe for concurrent use.
// Decisions made in process are not events: Stats counts them. A nil f is
// ignored.
func WithObserver(f func(Event)) Option {
	return func(o *options) {
		if f != nil {
			o.observer = f
		}
	}
}
