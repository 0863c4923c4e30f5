// Package slidinglog is the exact sliding window: a log of every request
// recorded in the last Window, with its cost, on a Redis sorted set, and its
// in-process twin.
//
// # Algorithm
//
// A request of n units at time now is allowed when the units recorded in the
// window (now - Window, now] plus n do not exceed Limit; only then are its n
// units recorded, as one entry whatever n. One Lua script per decision runs
// atomically on the server. Denied requests, Peek and AllowN with n = 0
// write nothing.
//
// RetryAfter of a denied request is exact, to the millisecond: the time until
// the entry holding the k-th oldest live unit leaves the window, k = the
// units in the window + n - Limit (for n = 1, until the oldest entry leaves).
// ResetAfter is the time until the newest entry leaves. RetryAfter is
// strategy.Never when n > Limit. Limit.Burst is ignored.
//
// # Storage and work
//
// One sorted set per subject, key <prefix>sl:{<subject>}: one entry per
// allowed request in the window, score = the time it was recorded at in Unix
// milliseconds, member = the running count of units recorded up to and
// including it (modulo 2^41), so an entry's cost is its member minus the
// previous entry's. A base entry (a negative member, -1 - the count it
// starts from) comes first. Requests recorded in the same millisecond are
// merged into one entry, so scores are strictly increasing and rank order
// is recording order: the live units are the newest member minus the
// member of the newest entry at or before now - Window, and the entry
// holding the k-th oldest live unit is found by a binary search over ranks.
//
// Work per decision, on N entries: an allowed request runs about six
// commands of O(log N) each, plus the removal of the entries that left the
// window (each evicted once); a denied one adds a binary search of O(log N)
// rank lookups, O(log^2 N) in all (one lookup for n = 1). Nothing grows with
// n: a request of 2^40 units is one entry and a few commands.
//
// Members stay small integers while a subject drains now and then (the
// count starts again from 0 when every entry has left), and small integers
// cost one to four bytes in a listpack: a subject holding 100 requests of
// cost 1 measured 1,352 bytes with MEMORY USAGE on Redis 7.0, against 5,192
// for the common "<ms>-<random hex>" member. Above
// zset-max-listpack-entries (128 by default) Redis converts the set to a
// skiplist, about 100 bytes per entry. The key expires Window after its
// newest entry.
//
// # A clock that steps back
//
// A request is recorded at max(now, the time of the newest entry), so the
// log stays in insertion order and a step back costs what a step forward
// costs. Entries still leave by now - Window (units recorded at t count
// while now - t < Window; an allowed request first drops the entries that
// have left), and RetryAfter and ResetAfter are measured from now. With a
// clock that never steps back this is the window (now - Window, now]; after
// a step back a unit may count longer than Window (by the step), never
// shorter, so the limit still holds. The twin decides the same.
//
// # Time
//
// The script reads the Redis server's TIME unless strategy.WithClock gives a
// client clock. Any Redis >= 5 (scripts replicated by effects) runs it, and
// Redis Cluster too: the script touches only its one key.
//
// Limiter and Local are safe for concurrent use; their methods are every
// algorithm's (see "The algorithms' types" in package strategy).
//
// # Per-subject limits
//
// AllowNWith and PeekWith (strategy.LimitOverrider) decide one call with
// another Limit of the same Window, e.g. a subject's tier. The log is the
// same whatever limit a call carries: a call of limit L passes when the
// units recorded in (now - Window, now] plus its cost are at most L. So a
// subject keeps what it used when its limit changes: an upgrade gives the
// new headroom at once, a downgrade below what it used denies it until
// enough units have left the window.
package slidinglog
