package strategy

import (
	"context"
	"fmt"
	"time"

	"github.com/ratekit/ratelimit/internal/fielderr"
)

// Never is the RetryAfter of a request that can never pass, because its cost
// exceeds the capacity of the limit.
const Never time.Duration = -1

// Limit is what a strategy enforces: Limit units per Window, with Burst the
// capacity of a token bucket (0 means Limit). The zero Limit is invalid
// (Window must be > 0). A Limit of 0 units is valid and denies every request.
type Limit struct {
	Limit  int64         // units allowed per Window; >= 0
	Window time.Duration // the period the limit applies to; > 0, whole milliseconds
	Burst  int64         // token bucket capacity; 0 means Limit; >= 0
}

// PerSecond returns a Limit of n units per second.
func PerSecond(n int64) Limit { return Limit{Limit: n, Window: time.Second} }

// PerMinute returns a Limit of n units per minute.
func PerMinute(n int64) Limit { return Limit{Limit: n, Window: time.Minute} }

// PerHour returns a Limit of n units per hour.
func PerHour(n int64) Limit { return Limit{Limit: n, Window: time.Hour} }

// String returns the limit as "100/1m0s", with ", burst 200" when Burst is set.
func (l Limit) String() string {
	if l.Burst != 0 {
		return fmt.Sprintf("%d/%s, burst %d", l.Limit, l.Window, l.Burst)
	}
	return fmt.Sprintf("%d/%s", l.Limit, l.Window)
}

// Capacity is the most units a subject can spend at once: Burst when set,
// Limit otherwise.
func (l Limit) Capacity() int64 {
	if l.Burst > 0 {
		return l.Burst
	}
	return l.Limit
}

// MaxWindow is the longest Window accepted: long enough for any rate limit,
// short enough that millisecond arithmetic on it cannot overflow.
const MaxWindow = 100 * 365 * 24 * time.Hour

// MaxUnits bounds Limit, Burst and a request's cost n, so that sums and
// products of units and milliseconds stay exact in Lua's float64 numbers.
const MaxUnits = 1 << 40

// Validate reports whether the limit can be enforced. The error wraps
// ErrInvalidLimit and names the field and its value.
func (l Limit) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fielderr.New(ErrInvalidLimit, "", field, func(name func(string) string) string {
			return name(field) + " " + fmt.Sprintf(format, args...)
		})
	}
	switch {
	case l.Limit < 0:
		return bad("Limit", "must be >= 0, got %d", l.Limit)
	case l.Limit > MaxUnits:
		return bad("Limit", "must be <= %d, got %d", int64(MaxUnits), l.Limit)
	case l.Window <= 0:
		return bad("Window", "must be > 0, got %s", l.Window)
	case l.Window > MaxWindow:
		return bad("Window", "must be <= %s, got %s", MaxWindow, l.Window)
	case l.Window%time.Millisecond != 0:
		return bad("Window", "must be a whole number of milliseconds, got %s", l.Window)
	case l.Burst < 0:
		return bad("Burst", "must be >= 0, got %d", l.Burst)
	case l.Burst > MaxUnits:
		return bad("Burst", "must be <= %d, got %d", int64(MaxUnits), l.Burst)
	}
	return nil
}

// Result is the outcome of a decision.
type Result struct {
	// Allowed reports whether the request's units were recorded.
	Allowed bool
	// Limit is the capacity that applied.
	Limit int64
	// Remaining is the number of units still available right after this
	// decision.
	Remaining int64
	// RetryAfter is, for a denied request, the earliest wait after which the
	// same request can pass if nothing else is recorded meanwhile; 0 when
	// allowed; Never when the request's cost exceeds the capacity.
	RetryAfter time.Duration
	// ResetAfter is the time until the subject is back to full capacity.
	ResetAfter time.Duration
	// Degraded reports that the backend did not make this decision: Redis
	// failed or was not called, and the limiter's failure policy decided
	// (see ratelimit.FailurePolicy). Strategies never set it.
	Degraded bool
	// Shadow reports a denial that the limiter let through because its
	// policy is in shadow mode (ratelimit.Config.Mode "shadow"): Allowed is true and
	// the other fields are what enforcement decided. Strategies never set
	// it.
	Shadow bool
}

// Strategy is a rate-limiting algorithm. Implementations are safe for
// concurrent use; every method honours ctx.
type Strategy interface {
	// AllowN decides whether n units may be spent now by the subject key and
	// records them only if allowed. A denial is a Result with Allowed false,
	// not an error. n = 0 behaves as Peek.
	AllowN(ctx context.Context, key string, n int64) (Result, error)
	// Peek reports the state of key now and consumes nothing: Allowed and
	// RetryAfter are what a request of one unit would get, Remaining is the
	// number of units available.
	Peek(ctx context.Context, key string) (Result, error)
	// Reset forgets the subject.
	Reset(ctx context.Context, key string) error
	// Limit returns the limit the strategy enforces for each subject. Burst
	// is 0 unless the algorithm uses a burst (token bucket, GCRA), so
	// Limit().Capacity() is the most units a subject can hold, the
	// Result.Limit of its decisions.
	Limit() Limit
}

// ContextHonourer is implemented by a Strategy, or a Redis client, that can
// tell whether every call returns by its context's deadline or cancellation,
// whatever the network does. A caller may then call it on its own
// goroutine rather than guard it with a timer. Every strategy of this
// module implements it: a Redis strategy asks its client (true for a
// *redis.Client, or a type embedding one, built with
// ContextTimeoutEnabled, and for a client that implements ContextHonourer
// and says so); a local twin returns true. The facade calls such a
// strategy under a context that is valid for that call only (it reuses
// it afterwards): a strategy that says true must not keep its context, or
// anything derived from it, once the call has returned.
type ContextHonourer interface {
	HonoursContext() bool
}

// Algorithm names a rate-limiting algorithm of this module, as written in
// configuration (the facade's Config and Policies JSON, multilimit's Rule).
type Algorithm string

// The algorithms of this module.
const (
	// SlidingLog is the exact sliding window on a sorted set (package
	// slidinglog): memory grows with the requests in the window.
	SlidingLog Algorithm = "sliding_log"
	// CompactLog is the exact sliding window in a few bytes per unit
	// (package compactlog), for limits up to 10,000.
	CompactLog Algorithm = "compact_log"
	// FixedWindow counts the units of the current window, aligned to
	// multiples of Window since the Unix epoch (package fixedwindow).
	FixedWindow Algorithm = "fixed_window"
	// TokenBucket refills Limit tokens per Window up to Burst (package
	// tokenbucket).
	TokenBucket Algorithm = "token_bucket"
	// GCRA is the generic cell rate algorithm, a token bucket kept as one
	// timestamp (package gcra).
	GCRA Algorithm = "gcra"
	// SlidingCounter approximates the sliding window from the current and
	// previous windows' counters (package slidingcounter).
	SlidingCounter Algorithm = "sliding_counter"
)

// Algorithms returns the algorithms above, sorted: the names a facade
// Config accepts besides "multi", which combines some of them.
func Algorithms() []Algorithm {
	return []Algorithm{CompactLog, FixedWindow, GCRA, SlidingCounter, SlidingLog, TokenBucket}
}
