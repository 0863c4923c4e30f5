// Package gcra is the generic cell rate algorithm (GCRA) on Redis, and its
// in-process twin: the exact-rate limiter with O(1) state that many large
// deployments use.
//
// # Algorithm
//
// Each unit has an emission interval T = Window/Limit. A subject's only
// state is its theoretical arrival time (TAT): the instant at which, at the
// rate, everything it has been allowed so far would have been paid for. At
// time now the subject can spend capacity - (TAT - now)/T units (capacity
// when TAT <= now), where the capacity is Limit.Burst, or Limit.Limit when
// Burst is 0. A request of cost n passes when that is at least n, and then
// moves TAT to max(TAT, now) + n×T; a denied request changes nothing. The
// decisions are those of a token bucket of the same capacity and rate
// (package tokenbucket), with one stored instant instead of two numbers. A
// Limit of 0 denies every request (RetryAfter Never), whatever Burst says,
// without a round trip.
//
// # Exact arithmetic
//
// T is rarely a whole number of milliseconds (7 per 333 ms is 47.571... ms),
// and rounding it would either deny a client that keeps exactly to the rate
// or let through more than the rate over a long run. So time is counted in
// units of 1/lp ms, with g = gcd(Limit, Window in ms), lp = Limit/g and
// wp = Window/g: T is exactly wp units and the capacity capacity × wp units.
// RetryAfter and ResetAfter are exact ceilings in ms, Remaining is exact.
//
// Lua numbers are float64, exact for integers below 2^53. An absolute
// instant in 1/lp ms would exceed that for large lp, so the script only
// computes how far TAT is ahead of now, at most about 2 × capacity × wp
// units; New and NewLocal require capacity × wp <= 2^51 and otherwise fail
// with ErrInvalidLimit naming Burst (or Limit) and Window. Only extreme
// limits are refused, such as a burst of 10^12 over a window that shares no
// factor with Limit.
//
// # Storage
//
// One plain string key per subject, at <prefix>gc:{<subject>} (see
// strategy.KeyFor), holding TAT as an integer: the Unix time in whole ms,
// followed, when lp > 1, by the remainder in 1/lp ms zero-padded to the
// digits of lp - 1. For 100 per minute (lp 1) the value is just the TAT in
// ms; for 3 per second (lp 3) "17648124003331" is 1764812400333 ms and 1/3.
// Both fit a 64-bit integer while lp <= 10^6, so Redis keeps them in its
// compact integer encoding: on Redis 7.0 (jemalloc) a subject "user:42"
// under the default prefix costs 72 bytes by MEMORY USAGE, all of it the
// dictionary entry (24), the key name (32) and the object header (16): a
// key of that name holding the integer 1 costs the same. The key's TTL is
// the time until TAT, after which a missing key means the same thing. A
// decision is one script run: GET, and when allowed SET with PX (plus TIME
// with the server clock); Peek and denied requests only read.
//
// # Clock
//
// By default the script reads the Redis server's TIME; strategy.WithClock
// passes a client clock instead. The key's TTL always runs on the server's
// clock: with a client clock that runs slower than the server's (a manual
// test clock, say), a key can expire, and the subject read as idle, before
// the client clock reaches its TAT. A client clock that goes back never
// moves TAT back.
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
// RefundN gives n units back: TAT moves back by n emission intervals, never
// earlier than now, TAT = max(now, TAT - n × Window/Limit), so a subject
// never holds more than its capacity, and a refund whose clock is behind
// the last decision's gives back n units, not the refill between. GCRA does not remember which units
// were spent: a refund after time passed gives back only what is missing.
// A TAT last written under a per-call limit gets nothing back. RefundN
// returns the state after the refund, as Peek reports it, from one script
// run.
//
// # Per-subject limits
//
// AllowNWith and PeekWith (strategy.LimitOverrider) decide one call with
// another Limit and Burst of the same Window, e.g. a subject's tier. The
// subject keeps the units it used: u = (TAT - now)/T, T the emission
// interval of the limit TAT was written under, so time since then counts
// at that rate. A call carries u over to its own limit (rounded up to
// 1/wp of a unit, at most its capacity: a downgrade below what was used
// leaves no headroom, which returns at the new rate) and decides with
// capacity' - u units: an upgrade of capacity gives the difference at
// once. These are the token bucket's decisions under the same tiers. A
// TAT written under a limit other than the strategy's own is stored as
// the string "ms,remainder,lp,wp" (a raw string: more bytes than the
// integer form); the strategy's own calls read both and write the integer
// form. Per-call limits need (capacity + 1) × Window in ms < 2^53, for the
// call's limit and the strategy's.
package gcra
