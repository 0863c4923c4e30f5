// Package settings holds the options every strategy shares once resolved:
// strategy.Option is a func(*Options), so users set them through the
// strategy.WithXxx functions and never see the struct.
package settings

import "time"

// DefaultPrefix is strategy.DefaultPrefix (a test in package strategy
// checks that they agree).
const DefaultPrefix = "rl:"

// Clock is strategy.Clock: a value of either interface type is assignable
// to the other.
type Clock interface {
	Now() time.Time
}

// Options are the settings every strategy shares.
type Options struct {
	// Prefix is the key namespace; default DefaultPrefix.
	Prefix string
	// Clock is the client clock, or nil: Redis strategies then read the
	// server's TIME, local twins time.Now.
	Clock Clock
	// MaxSubjects bounds the subjects a local twin holds at once; 0 means
	// strategy.DefaultMaxSubjects. Redis strategies ignore it.
	MaxSubjects int
	// OnEvict is called by a local twin for each subject it evicts to make
	// room for another, or nil. Redis strategies ignore it.
	OnEvict func()
	// Err is the first invalid option seen, reported by the constructor.
	Err error
}

// Apply returns the Options that opts set, with defaults for the rest. nil
// options are ignored.
func Apply[F ~func(*Options)](opts []F) Options {
	o := Options{Prefix: DefaultPrefix}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}
