package strategy

import "context"

// The optional interfaces below are placeholders the lead's facade
// compiles against; the helpers' branches define them for real.

// LimitOverrider decides with another Limit for one call.
type LimitOverrider interface {
	AllowNWith(ctx context.Context, key string, n int64, lim Limit) (Result, error)
	PeekWith(ctx context.Context, key string, lim Limit) (Result, error)
}
