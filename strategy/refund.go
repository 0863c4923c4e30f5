package strategy

import (
	"context"
	"errors"
)

// Refunder is implemented by strategies that can give units back: every
// algorithm of this module (Redis and local twin), sharded and multilimit.
//
// A refund is for a request charged up front whose work then failed: the
// caller called AllowN(ctx, key, n), was allowed, and gives the n units
// back. A refund never creates units that were not spent and never lifts
// a subject above its capacity: it gives back at most the units of key
// that still count (those recorded in the window, the bucket's deficit),
// and what left the window meanwhile is not given back twice. Each
// algorithm documents what exactly goes back (see its RefundN); the exact
// logs (slidinglog, compactlog) remove the newest units first, so
// RetryAfter stays exact afterwards.
type Refunder interface {
	// RefundN gives back up to n units that key spent and that still
	// count, in one atomic step (one script call on Redis), and returns
	// key's state after the refund, as Peek reports it. n is validated as
	// AllowN's cost (ValidateCost) and key as AllowN's key; invalid input
	// touches no state. n = 0 is Peek.
	RefundN(ctx context.Context, key string, n int64) (Result, error)
}

// ErrNoRefund: a wrapper (sharded) was asked for a refund but the strategy
// it wraps does not implement Refunder.
var ErrNoRefund = errors.New("ratelimit: the wrapped strategy cannot refund")
