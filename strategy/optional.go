package strategy

import "context"

// The optional interfaces below are placeholders the lead's facade
// compiles against; the helpers' branches define them for real.

// Refunder gives back units that AllowN recorded.
type Refunder interface {
	RefundN(ctx context.Context, key string, n int64) (Result, error)
}

// LimitOverrider decides with another Limit for one call.
type LimitOverrider interface {
	AllowNWith(ctx context.Context, key string, n int64, lim Limit) (Result, error)
	PeekWith(ctx context.Context, key string, lim Limit) (Result, error)
}
