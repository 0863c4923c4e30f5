package strategy

import (
	"fmt"
	"strings"
	"time"

	"github.com/ratekit/ratelimit/internal/quote"
)

// DefaultPrefix is the key namespace used when WithPrefix is not given.
const DefaultPrefix = "rl:"

// Clock tells the time. A client clock replaces the Redis server's TIME.
type Clock interface {
	Now() time.Time
}

// ClockFunc adapts a function to a Clock.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

// Options are the settings every strategy shares. Build them with Apply.
type Options struct {
	// Prefix is the key namespace; default DefaultPrefix.
	Prefix string
	// Clock is the client clock, or nil: Redis strategies then read the
	// server's TIME, local twins time.Now.
	Clock Clock
	// Err is the first invalid option seen, reported by the constructor.
	Err error
}

// Option sets one of Options.
type Option func(*Options)

// WithPrefix sets the key namespace, e.g. "rl:login:". It must not contain
// '{' or '}', which would change the Redis Cluster hash tag of every key.
func WithPrefix(prefix string) Option {
	return func(o *Options) {
		if strings.ContainsAny(prefix, "{}") && o.Err == nil {
			o.Err = fmt.Errorf("%w: prefix must not contain '{' or '}', got %s", ErrInvalidOption, quote.Value(prefix))
		}
		o.Prefix = prefix
	}
}

// WithClock makes the strategy use c instead of the Redis server's TIME (or
// time.Now for local twins). Use it for tests, or to keep every host of a
// fleet on its own NTP-disciplined clock; skew between hosts then shifts
// decisions by the skew. A nil c is ignored.
func WithClock(c Clock) Option {
	return func(o *Options) {
		if c != nil {
			o.Clock = c
		}
	}
}

// Apply returns the Options that opts set, with defaults for the rest. nil
// options are ignored.
func Apply(opts []Option) Options {
	o := Options{Prefix: DefaultPrefix}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}
