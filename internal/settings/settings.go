// Package settings resolves the options every strategy shares for this
// module's strategies: strategy.Options and the first invalid option's
// error, in one value.
package settings

import "github.com/ratekit/ratelimit/strategy"

// DefaultPrefix is strategy.DefaultPrefix.
const DefaultPrefix = strategy.DefaultPrefix

// Options are the resolved options and the first invalid one's error.
type Options struct {
	strategy.Options
	Err error
}

// Apply returns the Options that opts set, with defaults for the rest
// (see strategy.Apply). nil options are ignored.
func Apply[F ~func(*strategy.Options)](opts []F) Options {
	so := make([]strategy.Option, len(opts))
	for i, o := range opts {
		so[i] = strategy.Option(o)
	}
	o, err := strategy.Apply(so)
	return Options{Options: o, Err: err}
}
