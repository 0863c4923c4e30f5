// Package tokenbucket is the token bucket on Redis, and its in-process twin.
//
// # Algorithm
//
// A subject's bucket holds at most its capacity (Limit.Burst, or Limit.Limit
// when Burst is 0) and refills continuously at Limit tokens per Window. A
// request of cost n passes when the bucket holds at least n tokens, which it
// then takes; a denied request takes nothing. A fresh or idle subject has a
// full bucket, so a client may spend the whole capacity at once and then
// Limit per Window. A Limit of 0 denies every request (RetryAfter Never),
// whatever Burst says, without a round trip.
//
// # Exact arithmetic
//
// Tokens are counted in integers, scaled so that a refill of a whole number
// of milliseconds adds a whole number of scaled units: with
// g = gcd(Limit, Window in ms), wp = Window/g and lp = Limit/g, one token is
// wp units and every millisecond adds lp units, up to capacity × wp. So 10
// per second keeps tokens in hundredths (wp 100, lp 1) and 7 per 333 ms in
// 333ths (wp 333, lp 7). Nothing is rounded: a bucket refilled by a million
// one-millisecond steps holds exactly what one step of a million
// milliseconds gives, and RetryAfter, ResetAfter and Remaining are exact
// (RetryAfter is the ceiling, in ms, of the time the missing units take).
//
// Lua numbers are float64, exact for integers below 2^53. Every value the
// script computes is at most about 2 × capacity × wp, so New and NewLocal
// require capacity × wp <= 2^51 and otherwise fail with ErrInvalidLimit
// naming Burst (or Limit) and Window. Only extreme limits are refused, such
// as a burst of 10^12 over a window that shares no factor with Limit.
//
// # Storage
//
// One hash per subject, at <prefix>tb:{<subject>} (see strategy.KeyFor),
// with two fields: "t", the tokens in scaled units (tokens × wp), and "l",
// the Unix time in ms of the last refill. The key's TTL is the time until
// the bucket is full again, after which a missing key means the same thing.
// On Redis 7.0 (jemalloc) a subject "user:42" under the default prefix costs
// 104 bytes by MEMORY USAGE. A decision is one script run: HMGET, and when
// allowed HSET and PEXPIRE (plus TIME with the server clock); Peek and
// denied requests only read.
//
// # Clock
//
// By default the script reads the Redis server's TIME; strategy.WithClock
// passes a client clock instead. The key's TTL always runs on the server's
// clock: with a client clock that runs slower than the server's (a manual
// test clock, say), a key can expire, and its bucket read as full, before
// the client clock says it is. Requests whose time is before the last
// refill (a client clock that went back) refill nothing and never move the
// refill time back.
//
// # Requirements and concurrency
//
// Redis 5.0 or later (the script reads TIME before writing, which needs
// effect replication, the default since 5.0); one key per script, so Redis
// Cluster works. Limiter and Local are safe for concurrent use; every
// decision is atomic on the server, or under the subject's lock in Local.
// Their methods are every algorithm's (see "The algorithms' types" in
// package strategy).
//
// # Refunds
//
// RefundN puts n tokens back into a bucket, refilled to now first: tokens =
// min(capacity, tokens + n), so a bucket never holds more than its
// capacity. A bucket does not remember which tokens were spent: a refund
// after the bucket refilled gives back only what is missing. A bucket last
// written under a per-call limit gets nothing back. RefundN returns the
// state after the refund, as Peek reports it, from one script run.
//
// # Per-subject limits
//
// AllowNWith and PeekWith (strategy.LimitOverrider) decide one call with
// another Limit and Burst of the same Window, e.g. a subject's tier. The
// subject keeps the tokens it used: u = capacity - tokens, in units of the
// limit. A call first refills the bucket for the time since the last
// recorded request at that request's rate, then carries u over to its own
// limit (rounded up to its scaled unit, 1/wp of a token, and at most its
// capacity: a downgrade below what was used leaves an empty bucket, which
// then refills at the new rate), and decides with capacity' - u tokens:
// an upgrade of capacity gives the difference at once. Only a recorded
// request stores the result. A bucket last written under a limit other
// than the strategy's own stores that limit's scale in three more fields
// (p, w, c: its lp, wp and capacity); the strategy's own calls read both
// layouts and write the two-field one. Per-call limits need (capacity + 1)
// × Window in ms < 2^53, for the call's limit and the strategy's.
package tokenbucket
