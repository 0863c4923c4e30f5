package strategy

import (
	"context"
	"fmt"

	"github.com/ratekit/ratelimit/internal/fielderr"
)

// LimitOverrider is implemented by strategies that can decide one call with
// another Limit than the one they were built with: per-subject limits, such
// as tiers (free, pro) that a caller looks up per request. The algorithms
// of this module (slidinglog, compactlog, fixedwindow, slidingcounter,
// tokenbucket, gcra), on Redis and as local twins, implement it; sharded
// and multilimit do not.
//
// AllowNWith and PeekWith are AllowN and Peek with lim in place of the
// strategy's Limit for this one call; Result.Limit is lim's capacity. The
// subject's stored state and key are the same whatever limit a call uses,
// so a subject whose calls never pass another Limit is stored exactly as
// before. lim.Window must equal the strategy's Window, and lim must be
// valid (see Limit.Validate), or the call returns an error wrapping
// ErrInvalidLimit that names the field, and touches no state. A valid lim
// costs no allocation.
//
// # When a subject's limit changes
//
// A subject keeps what it used: the units it spent count against whatever
// limit its next call carries. An upgrade gives the new headroom at once
// (a subject that used 10 of a free tier's 10 per minute can spend 90 more
// at once under a pro tier of 100); a downgrade below what the subject has
// used denies it until enough of its usage has left the window (or, for
// the token bucket and GCRA, refilled). Each algorithm states the exact rule
// in its package doc:
//
//   - sliding log, compact log, fixed window: the units recorded stay; a
//     call is decided against its own limit.
//   - sliding counter: the counts stay; its estimate weighs each window's
//     count capped at the call's limit, as it does for a lowered Limit.
//   - token bucket and GCRA: the units used (capacity - tokens, or
//     (TAT - now)/T) carry over, counted in units of the limit and rounded
//     up to the call's scaled unit: the subject holds max(capacity' -
//     used, 0), and the time since its last recorded request refills at
//     that request's rate.
type LimitOverrider interface {
	// AllowNWith is AllowN deciding with lim instead of the strategy's
	// Limit.
	AllowNWith(ctx context.Context, key string, n int64, lim Limit) (Result, error)
	// PeekWith is Peek deciding with lim instead of the strategy's Limit.
	PeekWith(ctx context.Context, key string, lim Limit) (Result, error)
	// ValidateLimit returns the error AllowNWith and PeekWith would
	// return for lim (wrapping ErrInvalidLimit and naming the field), or
	// nil, without making a call: the algorithm's own bounds besides
	// ValidateOverride's (compactlog's MaxLimit, the token bucket's and
	// GCRA's exact arithmetic, the sliding counter's MaxProduct). It
	// touches no state and allocates nothing when lim is valid. A caller
	// that knows its per-call limits in advance (the facade's tiers)
	// checks them once, at construction, so that a limit the algorithm
	// refuses never reaches a call.
	ValidateLimit(lim Limit) error
}

// ValidateOverride reports whether lim can replace base, the limit a
// strategy was built with, for one call: lim must be valid and have base's
// Window. The error wraps ErrInvalidLimit and names the field. It does not
// allocate when lim is valid.
func ValidateOverride(base, lim Limit) error {
	if lim.Window != base.Window {
		return fielderr.New(ErrInvalidLimit, "", "Window", func(name func(string) string) string {
			return fmt.Sprintf("%s of a per-call limit must equal the strategy's %s, got %s", name("Window"), base.Window, lim.Window)
		})
	}
	return lim.Validate()
}
