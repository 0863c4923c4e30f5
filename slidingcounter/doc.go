// Package slidingcounter approximates a sliding window with two fixed-window
// counts: the current window's and the previous one's, the previous count
// weighted by how much of it the sliding window still covers, as if its
// units had arrived evenly. Windows are aligned to multiples of Window since
// the Unix epoch.
//
// # Algorithm
//
// At time now, elapsed = now mod Window ms into the current window, the
// units in the sliding window (now - Window, now] are estimated as
//
//	used = curr + ceil(prev * (Window - elapsed) / Window)
//
// in whole units, computed in integers (the float formula
// prev * (1 - elapsed/Window) + curr, rounded up), so Redis and the local
// twin agree to the unit. A request of n units is allowed, and counted in
// curr, if used + n <= Limit. Denied requests are not counted. Remaining is
// Limit - used.
//
// RetryAfter of a denied request is exact: the earliest millisecond at which
// the same request passes if nothing else is recorded (the estimate never
// grows while nothing is recorded, so waiting 1 ms less does not pass).
// ResetAfter is the time until the estimate is back to 0: the end of the
// next window when the current one holds units, of the current one when
// only the previous one does. Limit.Burst is ignored.
//
// Counts recorded under a higher limit (the limit was lowered while a
// subject held counts) weigh as a full window under the new one.
//
// Limit x Window (in ms) must not exceed MaxProduct (2^52), which keeps every
// intermediate value an exact integer in Lua's float64 numbers; New and
// NewLocal fail otherwise.
//
// # Precision
//
// The estimate assumes the previous window's units were spread evenly; they
// may not have been. In any sliding window (t - Window, t] at most
//
//	Limit + floor(Limit * (Window - 2ms) / Window)   (just under 2 x Limit)
//
// units are allowed. The bound is reached only when the previous window's
// whole count arrived in its last millisecond and the current window is
// then spent as fast as the estimate frees it (measured: 99 units at a
// limit of 50 per 200ms, 1.98 x). A boundary burst fares far better than
// on a fixed window: after Limit units in the last millisecond of a window,
// a second burst d ms after the edge gets floor(Limit x d / Window) units,
// so right at the edge it gets none and the most in one sliding window is
// Limit (1.00 x, where the fixed window allows 2 x Limit). Any one aligned
// window never holds more than Limit. The tests measure all three figures.
//
// # What Redis holds
//
// One key per active subject, <prefix>sc:{<subject>} (see strategy.KeyFor),
// e.g. rl:sc:{user:42}; one key keeps the subject on one Redis Cluster
// slot. It holds the current window's count, the previous window's, and the
// current window's index mod 4096 (the tag), packed in one integer when
// Limit < 2^20,
//
//	tag x 2^40 + prev x 2^20 + curr
//
// which Redis stores as an integer-encoded string, the cheapest value it
// has, and as the string "<tag>:<curr>:<prev>" for larger limits. Both
// forms are read whatever the limit, so changing the limit keeps the
// counts. The key expires when the window after the current one ends (its
// count stops mattering then). The tag, not the expiry, decides which count
// is current, so decisions stay right with a client clock
// (strategy.WithClock) or a lagging expiry; two windows are confused only
// if a key outlived 4096 windows, which takes a client clock jumping that
// far ahead within two windows.
//
// MEMORY USAGE on redis-server 7.0 for rl:sc:{user:42} after 100 requests
// is 72 bytes below a limit of 2^20 (dict entry 24, the 15-byte key 32,
// integer object 16) and 88 above it (a string of up to 12 bytes takes 32;
// 13 to 28 bytes, 48).
//
// One script per decision, one round trip: GET, then, only when allowed,
// INCRBY (or, for a window's first units or a limit of 2^20 or more, SET
// with PX); TIME too when the server's clock is used. Peek and denied
// requests write nothing. Needs Redis 5.0 or later (scripts that read TIME
// and then write rely on effects replication, the default since 5.0); every
// key the script touches comes in KEYS, so it runs unchanged on Redis
// Cluster.
//
// # Time
//
// All arithmetic is in whole milliseconds. The clock is the Redis server's
// TIME by default; strategy.WithClock selects a client clock.
//
// # Local twin
//
// NewLocal returns an in-process twin that makes the same decisions for the
// same clock, holding 24 bytes of state per subject plus the map entry and
// dropping it when its counts stop mattering.
//
// Limiter and Local are safe for concurrent use; their methods are every
// algorithm's (see "The algorithms' types" in package strategy).
//
// # Refunds
//
// RefundN (strategy.Refunder) gives back up to n units to the subject's
// current window: its count drops by min(n, count). The previous window's
// count is not touched: its units only weigh a share of the estimate, and a
// request refunded after the window changed gives back nothing, though its
// units still weigh. So a refund never gives back more than was spent, and
// may give back less. It returns the state after the refund, as Peek
// reports it, from one script run (the refund and then the decision script
// as a peek); n = 0 is Peek.
//
// # Per-subject limits
//
// AllowNWith and PeekWith (strategy.LimitOverrider) decide one call with
// another Limit of the same Window, e.g. a subject's tier. The counts of
// the current and previous windows are the same whatever limit a call
// carries, and are stored as counted; a call of limit L estimates
// min(curr, L) + ⌈min(prev, L) × (Window - elapsed)/Window⌉, as for a
// lowered Limit. So a subject keeps what it used when its limit changes:
// an upgrade gives the new headroom at once, a downgrade below what it
// used denies it until the estimate has fallen below the new limit.
package slidingcounter
