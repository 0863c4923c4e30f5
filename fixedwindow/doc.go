// Package fixedwindow limits a subject to Limit units per fixed window: one
// counter per window, the windows aligned to multiples of Window since the
// Unix epoch (so every host and every subject shares the same edges).
//
// # Algorithm
//
// A request of n units at time now falls in the window
// [floor(now/Window)*Window, that + Window). It is allowed, and its units
// counted, if the units already counted in that window plus n do not exceed
// Limit. Denied requests are not counted. When the window ends the count
// starts again from zero.
//
// RetryAfter of a denied request is exact: the time left until the window
// ends, when the next window starts empty (waiting 1 ms less still falls in
// the full window). ResetAfter is the same instant, or 0 when nothing is
// counted. Remaining is Limit minus the count. Limit.Burst is ignored.
//
// # Precision
//
// A fixed window forgets at its edge: a subject can spend Limit units in the
// last millisecond of one window and Limit more in the first millisecond of
// the next, so up to 2 x Limit units can fall within one sliding period of
// Window (and never more). Choose the sliding log or the sliding counter
// when that matters.
//
// # What Redis holds
//
// One string key per active subject, <prefix>fw:{<subject>} (see
// strategy.KeyFor), e.g. rl:fw:{user:42}, holding one integer:
// (window index mod 4096) x 2^41 + count. Redis stores it as an
// integer-encoded string, the cheapest value it has. The key expires when
// its window ends (PEXPIRE with the milliseconds left), so an idle subject
// costs nothing. The window index in the value, not the expiry, decides
// whether the count belongs to the current window, so decisions stay right
// when the clock is the client's (strategy.WithClock) or when expiry lags;
// two windows are confused only if a key outlived 4096 windows, which
// takes a client clock jumping that far ahead within one window.
//
// MEMORY USAGE on redis-server 7.0 is 72 bytes for rl:fw:{user:42}: 24 for
// the dict entry, 16 for the integer object, 32 for the key's allocation.
// That is the least any Redis key of 15 to 30 bytes costs there; a key of
// at most 14 bytes (e.g. with WithPrefix("r:")) costs 56.
//
// One script per decision, one round trip: GET, then, only when allowed,
// INCRBY (or, for a window's first units, SET with PX); TIME too when the
// server's clock is used. Peek and denied requests write nothing. Needs Redis 5.0 or later (scripts that read TIME
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
// same clock, holding 16 bytes of state per subject plus the map entry and
// dropping it when its window ends.
//
// Limiter and Local are safe for concurrent use; their methods are every
// algorithm's (see "The algorithms' types" in package strategy).
//
// # Per-subject limits
//
// AllowNWith and PeekWith (strategy.LimitOverrider) decide one call with
// another Limit of the same Window, e.g. a subject's tier: a call of limit
// L passes when the units counted in the current window plus its cost are
// at most L. The count is the same whatever limit a call carries, so a
// subject keeps what it used when its limit changes: an upgrade gives the
// new headroom at once, a downgrade below what it used denies it until the
// window ends. The key is the same for every limit.
package fixedwindow
