// Package compactlog is an exact sliding window for a few bytes per unit:
// the sliding log's decisions (package slidinglog) from one compact Redis
// string per subject, and its in-process twin.
//
// # Algorithm
//
// A request of n units at time now is allowed when the units recorded in the
// window (now - Window, now] plus n do not exceed Limit; only then are its n
// units recorded. Remaining, RetryAfter (exact to the millisecond for any n:
// the time until enough of the oldest units leave) and ResetAfter (until the
// newest leaves) are the sliding log's, field by field, for the same inputs;
// the tests hold the two to it over random schedules. Denied requests record
// nothing. RetryAfter is strategy.Never when n > Limit. Limit.Burst is
// ignored.
//
// The log needs at most Limit units: a unit can only be recorded when fewer
// than Limit count, so a ring of Limit slots, each overwritten only once its
// unit has left the window, holds every unit that can matter. Units are
// recorded at max(now, the newest unit's time), so their times never
// decrease around the ring even when the clock steps back (the units of
// such a request then count until the newest leaves; RetryAfter and
// ResetAfter are still measured from now), and a search (the newest unit,
// then the oldest 1, 2, 4 ..., then binary) finds the oldest unit that
// still counts. Only a recorded request forgets the units that left the
// window, as the sliding log's eviction does; denied requests, Peek and
// n = 0 write nothing.
//
// # Storage and memory
//
// One string per subject, key <prefix>cl:{<subject>}: a 13-byte header (the
// entry width w, the newest unit's time in Unix ms, the ring's head, count
// and capacity) then Limit slots of w bytes. A slot holds its unit's time
// modulo 256^w; it is decoded as the latest time at or before the newest
// that it fits, which is exact because the units kept never span 256^w ms
// or more: w is the fewest bytes whose range holds the Window (Width: 1
// byte up to 256 ms, 2 up to 65.5 s, 3 up to 4.6 h, 4 up to 49.7 days),
// and the script widens the entries if a Window change ever makes them
// span more. Measured with MEMORY USAGE on Redis 7.0 for a full subject of
// a 1-minute window (2 bytes a unit, 6-byte subject, default prefix):
// 280 bytes at Limit 100, 2,104 at 1,000 and 20,536 at 10,000, against
// the sorted-set log's 1,336, about 100,000 and about 1,030,000 (a
// skiplist above 128 entries, whose size varies a little between runs). A subject costs its
// whole ring from its first unit; the key expires Window after its newest
// unit.
//
// Limit is at most MaxLimit (10,000): that bounds a subject's value (at
// most 60,013 bytes, 20,013 for windows up to 65.5 s) and the work of the
// rare decision that rebuilds the ring.
//
// # Work per decision
//
// One script run: TIME, then for values up to 1 KB (Limit up to about 500
// at 2 bytes a unit) one GET and, when it records units, one
// SET; for larger values GETRANGE of the header, STRLEN (a value shorter
// or longer than its header says is malformed state), one GETRANGE per
// unit the search reads (2 to 4 for a busy subject, at most about 2 log2(Limit)),
// then SETRANGE of the n slots written (two ranges when they wrap) and of
// the header, and PEXPIRE. A cost of n is one write of n slots, never n
// commands. Redis CPU per decision is about the sliding log's (see
// BenchmarkRedisCPU and benchmarks/README.md). Replicas and the AOF receive what the
// script wrote (Redis replicates scripts by their effects): the whole value
// up to 1 KB, the SETRANGEs above. A change of Limit
// (or of the entry width) rebuilds the ring once, keeping every unit that
// still counts: decisions stay exact across configuration changes.
//
// # Time
//
// The script reads the Redis server's TIME unless strategy.WithClock gives a
// client clock. It runs on Redis >= 6.0 and on Redis
// Cluster: it touches only its one key.
//
// Limiter and Local are safe for concurrent use; their methods are every
// algorithm's (see "The algorithms' types" in package strategy).
//
// # Refunds
//
// RefundN (strategy.Refunder) gives back up to n of the units the subject
// recorded that are still in the window, newest first: the newest slots of
// the ring go, so the log stays exact (its decisions are the sliding log's
// after the same refund). Units that left the window are never given back.
// It returns the state after the refund, as Peek reports it, from one
// script run (the refund and then the decision script as a peek); n = 0 is
// Peek. The twin does the same on its entries.
//
// # Per-subject limits
//
// AllowNWith and PeekWith (strategy.LimitOverrider) decide one call with
// another Limit (at most MaxLimit) of the same Window, e.g. a subject's
// tier, by the rule of the sliding log: a call of limit L passes when the
// units recorded in (now - Window, now] plus its cost are at most L. A
// subject keeps what it used when its limit changes: an upgrade gives the
// new headroom at once, a downgrade below what it used denies it until
// enough units have left the window. The ring holds as many slots as the
// limit of the last recorded request: the first recorded request under
// another limit lays the ring out again (as a change of Limit does, one
// O(Limit) rewrite keeping every unit that counts); a subject whose tier
// alternates call by call pays that rewrite each time.
package compactlog
